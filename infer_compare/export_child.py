"""Exports run isolated like measuring cells: ``python -m infer_compare.export_child SPEC
RESULT`` builds one artifact in a fresh process, so that a converter's native crash
or hang becomes an ``export_failed`` row (artifacts.py) instead of taking the
comparison down. The parent passes everything as an :class:`ExportSpec`; an exporter
built from the PyTorch weights file (ONNX, TFLite) gets the module rebuilt here from
the model spec and that file.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .records import Record


@dataclass(frozen=True)
class ExportSpec(Record):
    exporter: str  # "module:Class"
    precision: str
    source: str | None
    out_dir: str
    model_spec: dict[str, Any] = field(default_factory=dict)  # set when the module must be rebuilt from `source`
    calibration: str | None = None  # .npy
    model_name: str = ""
    input_shape: tuple[int, ...] = ()
    num_classes: int = 0
    max_batch: int = 64
    opt_batch: int = 1
    batch_sizes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    preprocessing: dict[str, Any] = field(default_factory=dict)
    options_class: str = "infer_compare.options:NoOptions"
    options: dict[str, Any] = field(default_factory=dict)
    requested: dict[str, Any] = field(default_factory=dict)
    threads: int | None = None
    cache_root: str = ""
    input_names: tuple[str, ...] = ()  # a model with several inputs or outputs (ExportContext)
    output_names: tuple[str, ...] = ()
    layout: dict[str, Any] = field(default_factory=dict)  # batch axes other than 0 (ExportContext)


def _context(spec: ExportSpec):

    from .backends import load_impl
    from .backends.exporter import ExportContext

    model = None
    if spec.model_spec:
        import torch

        from .models import rebuild

        if spec.threads:
            torch.set_num_threads(int(spec.threads))
        model = rebuild(spec.model_spec, spec.source)
    from .batches import load

    calib = load(spec.calibration) if spec.calibration else None
    return ExportContext(
        model=model, model_name=spec.model_name, input_shape=tuple(spec.input_shape), num_classes=spec.num_classes,
        calibration=calib, max_batch=spec.max_batch, opt_batch=spec.opt_batch, model_spec=dict(spec.model_spec),
        batch_sizes={k: tuple(v) for k, v in spec.batch_sizes.items()}, preprocessing=dict(spec.preprocessing),
        options=load_impl(spec.options_class).from_dict(spec.options), requested=dict(spec.requested),
        threads=spec.threads, cache_root=spec.cache_root, log=lambda m: print(m, flush=True),
        input_names=tuple(spec.input_names), output_names=tuple(spec.output_names), layout=dict(spec.layout))


@contextlib.contextmanager
def scratch_cwd():
    """Converters write temporary files into the current directory (onnxruntime's int8 quantizer leaves
    ``sym_shape_infer_temp.onnx`` there): the export runs in a scratch folder, removed afterwards, so that
    nothing lands in the user's directory."""
    old = os.getcwd()
    tmp = tempfile.mkdtemp(prefix="infer-compare-export-")
    os.chdir(tmp)
    try:
        yield Path(tmp)
    finally:
        os.chdir(old)
        shutil.rmtree(tmp, ignore_errors=True)


def build(spec: ExportSpec) -> dict[str, Any]:
    """The export, as a JSON-ready result: ok with the file and its record, or the error and its kind."""
    from .backends import load_impl
    from .errors import BackendUnavailable, InferCompareError

    try:
        ctx = _context(spec)  # the user's model is rebuilt from the caller's directory (relative paths)
        source, out_dir = (os.path.abspath(spec.source) if spec.source else None), Path(spec.out_dir).resolve()
        with scratch_cwd():
            res = load_impl(spec.exporter)().export(ctx, source, out_dir, spec.precision)
        return {"ok": True, "path": os.path.abspath(res.path), "options": res.options, "notes": list(res.notes)}
    except BackendUnavailable as e:
        return {"ok": False, "kind": "unavailable", "error": e.reason, "hint": e.hint}
    except InferCompareError as e:
        return {"ok": False, "kind": "export", "error": str(e)}
    except Exception as e:
        msg = (str(e).strip().splitlines() or [""])[0]
        return {"ok": False, "kind": "crash", "error": f"{type(e).__name__}: {msg[:300]}",
                "traceback": "\n".join(traceback.format_exc().strip().splitlines()[-15:])}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    spec = ExportSpec.from_dict(json.loads(Path(argv[0]).read_text()))
    res = build(spec)
    tmp = argv[1] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, default=str)
    os.replace(tmp, argv[1])
    sys.stdout.flush()
    os._exit(0)  # some converters crash in their atexit handlers


if __name__ == "__main__":
    main()
