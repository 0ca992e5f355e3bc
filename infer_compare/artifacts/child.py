"""Exports run isolated like measuring cells: ``python -m infer_compare.artifacts.child SPEC
RESULT`` builds one artifact in a fresh process, so that a converter's native crash
or hang becomes an ``export_failed`` row (artifacts/chain.py) instead of taking the
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

from infer_compare.base.errors import BackendUnavailable, ExportRefused, InferCompareError
from infer_compare.base.records import Record


@dataclass(frozen=True)
class ExportSpec(Record):
    exporter: str  # "module:Class"
    precision: str
    source: str | None
    out_dir: str
    # set when the module must be rebuilt from `source`
    model_spec: dict[str, Any] = field(default_factory=dict)
    calibration: str | None = None  # .npy, or .npz for several inputs
    options_class: str = "infer_compare.catalog.options:NoOptions"
    options: dict[str, Any] = field(default_factory=dict)
    # the rest of the ExportContext (ExportContext.sent)
    context: dict[str, Any] = field(default_factory=dict)


def _context(spec: ExportSpec):
    """The ExportContext the parent had, with the module rebuilt here when the export starts from the
    weights."""
    # deferred: the export child's start stays light without them (+7 modules)
    from infer_compare.backends.exporter import ExportContext
    from infer_compare.base.batches import load
    from infer_compare.catalog.runtimes import load_impl

    model = None
    if spec.model_spec:
        import torch

        # deferred: the export child's start stays light without it (+7 modules)
        from infer_compare.models import rebuild

        if spec.context.get("threads"):
            torch.set_num_threads(int(spec.context["threads"]))
        model = rebuild(spec.model_spec, spec.source)
    return ExportContext.received(
        spec.context, model=model, calibration=load(spec.calibration) if spec.calibration else None,
        model_spec=dict(spec.model_spec), options=load_impl(spec.options_class).from_dict(spec.options),
        log=lambda m: print(m, flush=True))


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
    # deferred: the export child's start stays light without it (+2 modules)
    from infer_compare.catalog.runtimes import load_impl

    try:
        ctx = _context(spec)  # the user's model is rebuilt from the caller's directory (relative paths)
        source, out_dir = (os.path.abspath(spec.source)
                           if spec.source else None), Path(spec.out_dir).resolve()
        with scratch_cwd():
            res = load_impl(spec.exporter)().export(ctx, source, out_dir, spec.precision)
        return {"ok": True, "path": os.path.abspath(res.path), "options": res.options,
                "notes": list(res.notes)}
    except BackendUnavailable as e:
        return {"ok": False, "kind": "unavailable", "error": e.reason, "hint": e.hint}
    except ExportRefused as e:
        return {"ok": False, "kind": "refused", "error": str(e)}
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
