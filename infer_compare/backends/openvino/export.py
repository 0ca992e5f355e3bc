"""ONNX -> OpenVINO IR (``ov.convert_model`` + ``ov.save_model``).

fp32: weights kept in fp32 (``compress_to_fp16=False``).
fp16: weights compressed to fp16 (OpenVINO's default when saving); the CPU
      decompresses them and runs at the precision the runner's hint asks for.
int8: NNCF post-training quantization of the fp32 IR on the real calibration images.
bf16 is not an artifact: it is the fp32 IR run with a bf16 inference hint.
"""

from __future__ import annotations

import contextlib
import io
import logging
from pathlib import Path

from infer_compare.backends.exporter import ExportContext, Exporter, ExportResult
from infer_compare.base.batches import count, each, part
from infer_compare.base.errors import BackendUnavailable, ExportError
from infer_compare.base.layout import Layout
from infer_compare.base.records import Availability
from infer_compare.catalog import deps
from infer_compare.models.onnx_heads import output_tails


class OpenVinoExporter(Exporter):
    format = "openvino"

    @classmethod
    def probe(cls) -> Availability:
        if not deps.has("openvino"):
            return Availability(False, "OpenVINO is not installed", deps.hint("openvino"))
        return Availability(True, version=deps.version("openvino"),
                            details={"nncf": deps.version("nncf") or "not installed (no int8)"})

    @classmethod
    def declines(cls, ctx: ExportContext, precision: str) -> BackendUnavailable | None:
        """int8 without NNCF: said in the parent, before an export process imports the model for nothing."""
        if precision == "int8" and not deps.has("nncf"):
            return BackendUnavailable("Python module 'nncf' is not installed (needed for "
                                      "OpenVINO int8 quantization)",
                                      deps.hint("nncf"))
        return None

    @classmethod
    def cache_extras(cls, ctx: ExportContext, precision: str) -> dict:
        # 2: a detector's tail left in float
        extra = {"openvino": deps.version("openvino"), "exporter_rev": 2}
        if precision == "int8":
            extra.update(nncf=deps.version("nncf"), calibration_n=int(count(ctx.calibration)),
                         subset_size=int(count(ctx.calibration)))
        return extra

    def export(self, ctx: ExportContext, source: str | None, out_dir: Path, precision: str) -> ExportResult:
        import openvino as ov

        if source is None:
            raise ExportError("OpenVINO IR is built from the ONNX artifact, which is missing")
        model = _convert(ov, source)
        xml = out_dir / "model.xml"
        opts: dict = {"source": "onnx", "input_shape": str(model.inputs[0].partial_shape)}
        notes: list[str] = []
        if precision == "fp32":
            ov.save_model(model, str(xml), compress_to_fp16=False)
            opts["weights"] = "fp32"
        elif precision == "fp16":
            ov.save_model(model, str(xml), compress_to_fp16=True)
            opts["weights"] = "fp16 (compress_to_fp16=True)"
            notes.append("fp16-compressed weights; the execution precision is the runner's hint")
        elif precision == "int8":
            nncf = deps.require("nncf", "OpenVINO int8 quantization")
            import numpy as np

            # one input: an array per item; several: {input name: array} per item, each in its own dtype, laid
            # along its batch axis (a state [2, batch, 128], a scalar: base/layout.py)
            lay = Layout.from_dict(ctx.layout)
            calib = [lay.to_model(each(part(ctx.calibration, i, i + 1), np.ascontiguousarray))
                     for i in range(count(ctx.calibration))]
            ctx.log(f"NNCF int8 post-training quantization on {len(calib)} calibration inputs")
            # an output concatenating probabilities with other values (a detector's head): its tail stays
            # float
            tails, mixed = output_tails(source)
            ignored = nncf.IgnoredScope(names=tails, validate=False) if tails else None
            if tails:
                notes.append(f"left in float so that one output's parts keep their own scales ({mixed}): "
                             f"{len(tails)} node(s) of its decoding tail, {', '.join(tails[:4])}"
                             + (" ..." if len(tails) > 4 else ""))
                opts["mixed_scale_outputs"] = {"why": mixed, "nodes": tails}
            logging.getLogger("nncf").setLevel(logging.ERROR)
            # nncf imports torch, whose cpp_extension logs "No CUDA runtime is found" on CPU-only machines
            logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
            with contextlib.redirect_stdout(io.StringIO()):
                # overflow_fix FIRST_LAYER (NNCF's default, set explicitly so the record is true): half the
                # weight range in the first layer, NNCF's advice for CPUs without VNNI (AVX2, AVX-512), whose
                # 8-bit instructions can saturate; ENABLE (every layer) costs accuracy elsewhere.
                q = nncf.quantize(model, nncf.Dataset(calib), subset_size=len(calib), ignored_scope=ignored,
                                  advanced_parameters=nncf.AdvancedQuantizationParameters(
                                      overflow_fix=nncf.OverflowFix.FIRST_LAYER))
            ov.save_model(q, str(xml), compress_to_fp16=False)
            opts.update(weights="int8", quantizer=f"nncf {deps.version('nncf')}",
                        preset="performance (default)",
                        overflow_fix="FIRST_LAYER (7-bit weights in the first layer, for CPUs without VNNI)",
                        calibration_inputs=len(calib))
        else:
            raise ExportError(f"OpenVINO IR precisions are fp32, fp16 and int8, not {precision}")
        return ExportResult(str(xml), opts, notes)


def _convert(ov, source: str):
    """ov.convert_model; a graph its ONNX frontend cannot convert is an ExportError saying why."""
    try:
        return ov.convert_model(source)
    except Exception as e:
        why = frontend_failure(e)
        if why is None:
            raise
        raise ExportError(why) from None


def frontend_failure(e: BaseException) -> str | None:
    """For an error of OpenVINO's ONNX frontend, one line naming the ops it could not convert and the first
    reason (its message's first line only says which check failed); None for any other error."""
    import re

    text = str(e)
    failed = re.search(r"Conversion is failed for: ([^\n]+)", text)
    if not failed:
        return None
    skip = ("Check ", "FrontEnd API", "Model wasn't", "--", "[ONNX", "While validating", "Summary",
            "Exception from")
    why = next((ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(skip)), "")
    return (f"OpenVINO's ONNX frontend cannot convert {failed.group(1).strip()}"
            + (f" ({why[:160]})" if why else ""))
