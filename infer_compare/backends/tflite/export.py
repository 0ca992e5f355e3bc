"""PyTorch -> TFLite (LiteRT flatbuffer), NHWC input, batch 1, fp32 / fp16 / full-integer int8.

The conversion runs in a child process (``tflite_convert``: litert-torch, PT2E int8
with full-integer annotations, ai-edge-quantizer for fp16 weights); see that module
for the route and docs/tflite-edgetpu.md for why it was chosen over onnx2tf.

The int8 file is meant to be *full-integer* (int8 input/output, only int8/int32 tensors,
no DEQUANTIZE, no float op): that is what ``edgetpu_compiler`` accepts. After the
conversion the file is inspected (:func:`.common.inspect_model`); a file the converter
left with float parts (a final Softmax, a Dequantize) is kept for the LiteRT CPU rows and
said so in its notes and its ``full_integer`` record; the Edge TPU exporter refuses it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from infer_compare import models
from infer_compare.backends.exporter import ExportContext, Exporter, ExportResult
from infer_compare.backends.tflite import common
from infer_compare.backends.tflite.bindings import write_io_map
from infer_compare.backends.tflite.convert_check import DIVERGED
from infer_compare.backends.tflite.options import TFLiteOptions
from infer_compare.base.batches import each, is_multi, save
from infer_compare.base.errors import BackendUnavailable, ExportError, ExportRefused
from infer_compare.base.records import Availability
from infer_compare.catalog import deps, device_kinds
from infer_compare.host import launch

CONVERTER_HINT = ("pip install litert-torch ai-edge-litert  (the TFLite converter; it needs torch and brings "
                  "ai-edge-quantizer)")
ONNX_HINT = "pip install 'infer-compare[tflite-onnx]'  (onnx2torch: ONNX -> PyTorch, then litert-torch)"
# 2: io_map (several inputs and outputs), the ONNX route; 3: ONNX made static first; 4: <file>.io.json
EXPORTER_REV = 6
# 5: constant inputs of Reshape/Slice/Resize folded (convert_constants.py); int8 files with float parts kept
# 6: weights made contiguous before converting (a layer could get another's weight: convert_check.py), float
# files    checked against their module
# Full-integer int8 of models above this size is built only on request (or for an Edge TPU):
# ResNet-50 (25.6 M parameters) took 339 s wall, 1.5 GB peak here (2 shared cores, load ~5).
LARGE_INT8_PARAMS = 10_000_000
OPT_IN_ENV = "INFER_COMPARE_TFLITE_INT8"


class TFLiteExporter(Exporter):
    format = "tflite"

    @classmethod
    def probe(cls) -> Availability:
        for mod in ("torch", "litert_torch", "ai_edge_litert"):
            if not deps.has(mod):
                return Availability(False, f"'{mod}' is not installed (TFLite export uses litert-torch)",
                                    CONVERTER_HINT)
        return Availability(True, version=f"litert-torch {deps.version('litert-torch')}",
                            details={"ai_edge_quantizer": deps.version("ai-edge-quantizer")})

    @classmethod
    def cache_extras(cls, ctx: ExportContext, precision: str) -> dict:
        extra = {"litert_torch": deps.version("litert-torch"), "torch": deps.version("torch"),
                 "ai_edge_litert": deps.version("ai-edge-litert"), "exporter_rev": EXPORTER_REV}
        if ctx.model is None:  # an ONNX root: onnx2torch converts it first
            extra["onnx2torch"] = deps.version("onnx2torch")
        if precision == "fp16":
            extra["ai_edge_quantizer"] = deps.version("ai-edge-quantizer")
        if precision == "int8":
            extra["calibration_n"] = int(len(ctx.calibration))
            extra["observer"] = ctx.options_as(TFLiteOptions).int8_observer
        return extra

    @classmethod
    def declines(cls, ctx: ExportContext, precision: str) -> BackendUnavailable | None:
        """A large model's int8 conversion, not asked for: refused here, before an export process starts."""
        if precision != "int8" or ctx.model is None:
            return None
        try:
            _check_int8_opt_in(ctx)
        except BackendUnavailable as e:
            return e
        return None

    def export(self, ctx: ExportContext, source: str | None, out_dir: Path, precision: str) -> ExportResult:
        if precision not in ("fp32", "fp16", "int8"):
            raise ExportError(f"TFLite precisions are fp32, fp16 and int8, not {precision}")
        if ctx.model is None and not _is_onnx(source):
            raise ExportError("TFLite export needs the PyTorch model or an ONNX file")
        if precision == "fp16" and not deps.has("ai_edge_quantizer"):
            raise BackendUnavailable("'ai_edge_quantizer' is not installed (TFLite fp16 weights)",
                                     CONVERTER_HINT)
        if _is_onnx(source) and not deps.has("onnx2torch"):
            raise BackendUnavailable("'onnx2torch' is not installed (TFLite from an ONNX model)",
                                     deps.installable(ONNX_HINT))
        if precision == "int8":
            _check_int8_opt_in(ctx, _onnx_params(source) if ctx.model is None else None)
        path = out_dir / "model.tflite"
        res = _convert_in_child(ctx, source, out_dir / ".work", path, precision)
        return _describe(path, precision, res)


def _is_onnx(source: str | None) -> bool:
    return bool(source) and str(source).lower().endswith(".onnx")


def _child_spec(ctx: ExportContext, source: str | None, work: Path, path: Path, precision: str) -> dict:
    """What the converter child needs: the model (an ONNX file, a rebuild spec or the saved module) and
    the calibration inputs (.npy for one input, .npz by name for several)."""
    import numpy as np

    spec: dict = {"out": str(path), "precision": precision, "threads": ctx.threads,
                  "observer": ctx.options_as(TFLiteOptions).int8_observer, "module": str(work / "module.pt"),
                  "input_names": list(ctx.input_names), "output_names": list(ctx.output_names)}
    if _is_onnx(source):
        spec["onnx"] = str(source)
        if not spec["input_names"]:
            import onnx

            graph = onnx.load(str(source), load_external_data=False).graph
            inits = {i.name for i in graph.initializer}
            spec["input_names"] = [i.name for i in graph.input if i.name not in inits]
    else:
        import torch

        rebuild = {"spec": ctx.model_spec, "path": source} if ctx.model_spec and source else None
        arch = None if rebuild else _architecture(ctx)
        # rebuilt in the child from the registry + this state dict, else the pickled module
        if rebuild is None:
            torch.save(ctx.model.state_dict() if arch is not None else ctx.model, work / "module.pt")
        spec.update(architecture=arch, rebuild=rebuild)
    calib = work / ("calibration.npz" if is_multi(ctx.calibration) else "calibration.npy")
    save(calib, each(ctx.calibration,
                     lambda a: np.ascontiguousarray(a, dtype=np.float32) if a.dtype.kind == "f"
                     else np.ascontiguousarray(a)))
    spec["calibration"] = str(calib)
    return spec


def _convert_in_child(ctx: ExportContext, source: str | None, work: Path, path: Path, precision: str) -> dict:
    """Run the conversion in a child process (convert.py); its result record."""
    import shutil

    work.mkdir(parents=True, exist_ok=True)
    try:
        (work / "spec.json").write_text(json.dumps(_child_spec(ctx, source, work, path, precision)))
        how = "onnx2torch + litert-torch" if _is_onnx(source) else "litert-torch"
        ctx.log(f"TFLite {precision}: converting with {how} in a child process"
                + (f" ({len(ctx.calibration)} calibration inputs)" if precision == "int8" else ""))
        timeout = float(ctx.options_as(TFLiteOptions).convert_timeout_s)
        log = work / "output.txt"
        try:
            rc, timed_out = launch.run("infer_compare.backends.tflite.convert", [str(work / "spec.json")],
                                       timeout, log, env={"TF_CPP_MIN_LOG_LEVEL": "2"}, cwd=str(work))
        except launch.ChildNotStarted as e:
            raise ExportError(f"TFLite {precision} conversion: {e}") from None
        if timed_out:
            raise ExportError(f"TFLite {precision} conversion timed out after {timeout:.0f} s")
        result_file = Path(str(path) + ".json")
        res = json.loads(result_file.read_text()) if result_file.exists() else {}
        result_file.unlink(missing_ok=True)
        if res.get("ok") is False:  # the converter's own refusal: the same for this file and these versions
            raise ExportRefused(f"TFLite {precision} conversion failed: {res.get('error')}")
        if rc != 0 or not res or not path.exists():
            lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
            errs = [ln for ln in lines if "Error" in ln or "error" in ln]
            tail = "\n".join((errs[-3:] if errs else []) + lines[-8:])
            raise ExportError(f"TFLite {precision} conversion failed ({launch.describe_exit(rc)}): {tail}")
        return res
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _describe(path: Path, precision: str, res: dict) -> ExportResult:
    """The file's inspection in the manifest; int8 must be full-integer."""
    info = common.inspect_model(str(path))
    opts = dict(res.get("options", {}))
    opts.update(converter_times_s=res.get("times_s", {}), converter_wall_s=res.get("wall_s"),
                converter_peak_rss_mb=res.get("peak_rss_mb"), ops=info["ops"],
                tensor_dtypes=info["tensor_dtypes"], io=info["io"], full_integer=info["full_integer"])
    notes = [f"converter child: {res.get('wall_s')} s wall, peak RSS {res.get('peak_rss_mb')} MB"]

    write_io_map(str(path), opts.get("io_map") or {})
    if precision == "int8":
        notes.append(_int8_note(info))
    if precision == "fp16":
        notes.append("fp16 weights, dequantized to fp32 when the interpreter loads the file; compute is fp32")
    notes += _check_notes(opts)
    return ExportResult(str(path), opts, notes)


def _check_notes(opts: dict) -> list[str]:
    """What the float file's check against its module found (convert_check.py), where the file is off."""
    off = opts.get("off_its_module")
    if not isinstance(off, int | float) or off <= DIVERGED:
        return []
    return [f"the converted file is off its own PyTorch module by {off:.3g} of the largest output on the "
            "conversion sample: the conversion's error (litert-torch's lowering or TFLite's kernels), not "
            "the data's (backends/tflite/convert_check.py)"]


def _int8_note(info: dict) -> str:
    """What the int8 file is: full-integer (what the Edge TPU compiler takes), or int8 with float parts (the
    converter left a Softmax, a Dequantize... in float), which LiteRT runs on the CPU and the Edge TPU
    refuses."""
    if info["full_integer"]:
        return "full-integer: int8 in/out, only int8/int32 tensors, no DEQUANTIZE, no float op"
    io = info.get("io") or {}
    side = [f"{k} {', '.join(sorted({d['dtype'] for d in io.get(k, [])}))}" for k in ("inputs", "outputs")]
    return ("int8 with float parts, not full-integer (" + "; ".join(info["problems"])
            + f"; {', '.join(side)}): LiteRT runs it on the CPU as it is; "
              "the Edge TPU needs a full-integer file and is not built from it")


def _architecture(ctx: ExportContext) -> dict | None:
    """The registry spec of the model when it rebuilds ``ctx.model``'s architecture, else None."""
    try:
        spec = models.resolve(ctx.model_name).as_dict()
        keys = set(models.build_architecture(spec).state_dict())
    except Exception:
        return None
    return spec if keys == set(ctx.model.state_dict()) else None


def _onnx_params(source: str | None) -> int:
    """The number of weights of an ONNX file (its initializers' elements; external data not read)."""
    import onnx

    graph = onnx.load(str(source), load_external_data=False).graph
    total = 0
    for t in graph.initializer:
        n = 1
        for d in t.dims:
            n *= int(d)
        total += n
    return total


def _check_int8_opt_in(ctx: ExportContext, n: int | None = None) -> None:
    """Large models' int8 conversion is opt-in: asked for explicitly, or an Edge TPU is present."""
    if n is None:
        n = sum(int(p.numel()) for p in ctx.model.parameters())
    if n <= LARGE_INT8_PARAMS:
        return
    req = ctx.requested or {}
    # --formats tflite or --backends tflite
    named = set(req.get("formats") or ()) | set(req.get("backends") or ())
    asked = "int8" in (req.get("precisions") or ()) and bool({"tflite", "edgetpu"} & named)
    if asked or ctx.options_as(TFLiteOptions).int8 or os.environ.get(OPT_IN_ENV, "") not in ("", "0"):
        return

    if device_kinds.edgetpu_devices():
        return
    raise BackendUnavailable(
        f"full-integer int8 TFLite of {ctx.model_name} ({n / 1e6:.1f} M parameters) is built only on "
        "request: it takes minutes (ResNet-50: 339 s, 1.5 GB peak on 2 shared cores)",
        f"ask for it: --backends tflite --precisions int8 (or --formats tflite, or set {OPT_IN_ENV}=1); "
        "it is built automatically when a Coral Edge TPU is present")
