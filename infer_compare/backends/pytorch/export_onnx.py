"""PyTorch -> ONNX with ``torch.onnx.export``: the fp32 file (``external_data=False``),
a dynamic batch axis, checked with ``onnx.checker`` (full check). The fp16 and int8 ONNX
files are converted from it (backends/onnxruntime/export.py), not exported again.

The dynamo-based exporter (torch >= 2.5 default) is tried first; where it is absent
or fails (older torch, e.g. JetPack builds) the TorchScript exporter is used, and
the artifact's manifest says which one wrote it.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

from infer_compare.backends.exporter import ExportContext, Exporter, ExportResult
from infer_compare.base.batches import is_multi
from infer_compare.base.errors import ExportError
from infer_compare.base.records import Availability
from infer_compare.catalog import deps
from infer_compare.catalog.formats import ONNX_INPUT_NAME as INPUT_NAME
from infer_compare.catalog.formats import ONNX_OUTPUT_NAME as OUTPUT_NAME

OPSET = 18  # TorchScript fallback; the dynamo exporter picks its own (20 with torch 2.14)


class OnnxExporter(Exporter):
    format = "onnx"

    @classmethod
    def probe(cls) -> Availability:
        for m in ("torch", "onnx"):
            if not deps.has(m):
                return Availability(False, f"'{m}' is not installed (ONNX export needs torch and onnx)",
                                    deps.hint(m))
        return Availability(True, version=f"torch {deps.version('torch')}, onnx {deps.version('onnx')}")

    @classmethod
    def cache_extras(cls, ctx: ExportContext, precision: str) -> dict:
        return {"torch": deps.version("torch"), "onnx": deps.version("onnx"),
                "onnxscript": deps.version("onnxscript"), "max_batch": _dim_max(ctx), "exporter_rev": 2}

    def export(self, ctx: ExportContext, source: str | None, out_dir: Path, precision: str) -> ExportResult:
        import onnx

        model = ctx.model
        if model is None:
            raise ExportError("ONNX export needs the PyTorch model")
        if precision != "fp32":
            raise ExportError(f"the PyTorch ONNX exporter writes the fp32 file, not {precision} (fp16 and "
                              "int8 are converted from it: backends/onnxruntime/export.py)")
        xs, names = _examples(ctx)
        path = out_dir / "model.onnx"
        notes: list[str] = []
        used = None
        errors = []
        if deps.has("onnxscript"):
            try:
                _export_dynamo(model, xs, path, _dim_max(ctx), names)
                used = "dynamo"
            except Exception as e:  # fall back below
                errors.append(f"dynamo exporter: {type(e).__name__}: "
                              f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}")
                for p in out_dir.iterdir():
                    p.unlink()
        if used is None:
            try:
                _export_torchscript(model, xs, path, names)
                used = "torchscript"
                if errors:
                    notes.append(f"the dynamo exporter failed ({errors[0][:300]}); the TorchScript exporter "
                                 "wrote this file")
            except Exception as e:
                msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise ExportError("; ".join(errors + ["TorchScript exporter: "
                                                      f"{type(e).__name__}: {msg}"])) from e
        try:
            onnx.checker.check_model(str(path), full_check=True)
        except Exception as e:
            raise ExportError(f"onnx.checker rejected the exported model: {str(e).splitlines()[0]}") from e
        m = onnx.load(str(path), load_external_data=False)
        opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None)
        io = ({"input": INPUT_NAME, "output": OUTPUT_NAME, "dtype": "float32"} if not ctx.input_names else
              {"inputs": list(names[0]), "outputs": list(names[1]),
               "dtypes": [str(x.dtype).replace("torch.", "")
                                                                               for x in xs]})
        return ExportResult(str(path), {"exporter": used, "opset": opset, "external_data": False,
                                        "dynamic_batch": True, **io}, notes)


def _dim_max(ctx: ExportContext) -> int:
    return max(1024, int(ctx.max_batch))


Names = tuple[list[str], list[str]]


def _fresh(torch, a):
    """One sample of ``a`` as a fresh tensor with canonical strides: a numpy view like digits[:, None] has an
    odd stride on its size-1 channel axis, which makes torch.export's dynamic batch fail ("Invalid ranges
    [2:1]"). Floats become float32; integer inputs (ids) keep their dtype."""
    import numpy as np

    a = np.asarray(a[:1])
    a = a.astype(np.float32) if a.dtype.kind == "f" else a
    x = torch.zeros(a.shape, dtype=torch.from_numpy(a).dtype)
    x.copy_(torch.from_numpy(a))
    return x


def _examples(ctx: ExportContext) -> tuple[tuple, Names]:
    """(example inputs, (input names, output names)): one input "input" -> "logits", as always; a model with
    several inputs or outputs keeps its own names (ctx.input_names, ctx.output_names)."""
    import torch

    if not ctx.input_names:
        return (_fresh(torch, ctx.calibration),), ([INPUT_NAME], [OUTPUT_NAME])
    calib = ctx.calibration if is_multi(ctx.calibration) else {ctx.input_names[0]: ctx.calibration}
    return tuple(_fresh(torch, calib[n])
                 for n in ctx.input_names), (list(ctx.input_names), list(ctx.output_names))


def _export_dynamo(model, xs: tuple, path: Path, max_batch: int, names: Names) -> None:
    import torch

    batch = torch.export.Dim("batch", min=1, max=max_batch)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, xs, str(path), dynamo=True, external_data=False,
                          input_names=names[0], output_names=names[1],
                          dynamic_shapes=tuple({0: batch} for _ in xs))


def _export_torchscript(model, xs: tuple, path: Path, names: Names) -> None:
    import inspect

    import torch

    kw = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kw["dynamo"] = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, xs, str(path), input_names=names[0], output_names=names[1],
                          dynamic_axes={n: {0: "batch"} for n in names[0] + names[1]},
                          opset_version=OPSET, do_constant_folding=True, **kw)
