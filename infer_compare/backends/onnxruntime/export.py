"""ONNX fp16 and int8 (QDQ) files, converted from the fp32 ONNX file with ONNX Runtime's
own tools, so that every runtime reads the reduced precision from one artifact.

fp16: ``onnxruntime.transformers.float16.convert_float_to_float16`` with
      ``keep_io_types=True`` (fp32 input and output, the deployment norm: a Cast at each
      edge), then a topological sort that counts what If/Loop subgraphs read from outside
      (the converter appends its Casts at the end; subgraphs.py) and
      ``onnx.checker``. Weights outside fp16's range are clamped by the converter; the
      manifest counts them.
int8: static QDQ quantization (``onnxruntime.quantization``; the steps in quantize.py):
      ``quant_pre_process`` (symbolic shape inference, ONNX Runtime's basic graph
      optimisation such as BatchNorm folding, ONNX shape inference), then calibration on
      the real calibration images (``ctx.calibration``, the same ones NNCF and TFLite
      use), one batch per ``collect_data`` call so that the histogram methods never hold
      every activation of every image, then ``quantize_static`` (QDQ format, per-channel
      symmetric int8 weights) from those ranges. Calibration: MinMax (default), Entropy
      (2048-bin histograms, 128 quantized bins as in TensorRT's entropy calibrator; ONNX
      Runtime's own default of 128/128 bins leaves a single candidate threshold, i.e.
      MinMax) or Percentile (99.999, 2048 bins). Types: U8S8 or S8S8 (options.py).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import tempfile
from pathlib import Path
from typing import Any

from infer_compare.backends.exporter import ExportContext, Exporter, ExportResult
from infer_compare.backends.onnxruntime.graph import qdq_coverage, summarize
from infer_compare.backends.onnxruntime.int8_prep import excluded_nodes, fix_sizes, mixed_scale_tails
from infer_compare.backends.onnxruntime.options import OrtOptions
from infer_compare.backends.onnxruntime.quantize import (
    CALIB_BATCH,
    calibrate,
    calibration_extra,
    pre_process,
    quantize,
    quiet,
    scratch_cwd,
)
from infer_compare.backends.onnxruntime.subgraphs import sort_nodes
from infer_compare.base.batches import count
from infer_compare.base.errors import BackendUnavailable, ExportError
from infer_compare.base.records import Availability
from infer_compare.catalog import deps
from infer_compare.catalog.formats import TRT_INT8
from infer_compare.host.cpu_int8 import describe as describe_cpu
from infer_compare.host.cpu_int8 import reduce_range_for

EXPORTER_REV = 3  # 3: reduce_range in the recipe; scratch files in a temporary directory
# 2: the sort counts what If/Loop subgraphs read from outside (int8 files unchanged: not rebuilt)
FP16_REV = 2
INT8_REV = 3  # 2: an output concatenating parts of different scales keeps its decoding tail in float
# 3: If/Loop subgraphs' outer reads sorted as in fp16 (issue 38)
FP16_MAX, FP16_MIN_POSITIVE = 65504.0, 5.96e-08  # the converter's clamping limits (its defaults)


class _FromOnnx(Exporter):
    """Shared probe and cache key of the converters of the fp32 ONNX file."""

    format = "onnx"

    @classmethod
    def probe(cls) -> Availability:
        for m in ("onnx", "onnxruntime"):
            if not deps.has(m):
                return Availability(False, f"'{m}' is not installed (the fp16 and int8 ONNX files are "
                                           "converted with ONNX Runtime's tools)", deps.hint(m))
        return Availability(True, version=f"onnxruntime {deps.version('onnxruntime')}, "
                                          f"onnx {deps.version('onnx')}")

    @classmethod
    def cache_extras(cls, ctx: ExportContext, precision: str) -> dict[str, Any]:
        return {"onnxruntime": deps.version("onnxruntime"), "onnx": deps.version("onnx"),
                "exporter_rev": EXPORTER_REV}


def _need_source(source: str | None, what: str) -> str:
    if source is None:
        raise ExportError(f"the {what} ONNX file is built from the fp32 ONNX file, which is missing")
    return source


def _check(path: Path, what: str) -> None:
    import onnx

    try:
        onnx.checker.check_model(str(path), full_check=True)
    except Exception as e:
        raise ExportError(f"onnx.checker rejected the {what} ONNX file: "
                          f"{str(e).strip().splitlines()[0]}") from e


class OnnxFp16Exporter(_FromOnnx):
    """fp32 ONNX -> fp16 ONNX (fp32 input and output)."""

    @classmethod
    def cache_extras(cls, ctx: ExportContext, precision: str) -> dict[str, Any]:
        keep = _keep_fp32(ctx)
        return {**super().cache_extras(ctx, precision), "fp16_rev": FP16_REV,
                **({"keep_fp32": keep} if keep else {})}

    def export(self, ctx: ExportContext, source: str | None, out_dir: Path, precision: str) -> ExportResult:
        import onnx

        if precision != "fp16":
            raise ExportError(f"the fp16 converter builds fp16, not {precision}")
        src = onnx.load(_need_source(source, "fp16"))
        clamped = _out_of_fp16_range(src)
        f16 = deps.require("onnxruntime.transformers.float16", "the fp16 ONNX conversion")
        from onnxruntime.transformers.onnx_model import OnnxModel

        keep = _keep_fp32(ctx)
        blocked = {"op_block_list": [*f16.DEFAULT_OP_BLOCK_LIST, *keep]} if keep else {}
        m16 = OnnxModel(f16.convert_float_to_float16(src, keep_io_types=True, **blocked))
        sort_nodes(m16.model.graph)  # subgraph-aware: If/Loop branches read the converter's input Casts
        path = out_dir / "model.onnx"
        onnx.save(m16.model, str(path))
        _check(path, "fp16")
        inits: dict[str, int] = {}
        for t in m16.model.graph.initializer:
            name = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).name
            inits[name] = inits.get(name, 0) + 1
        s = summarize(m16.model)
        opts = {"converter": f"onnxruntime.transformers.float16 (onnxruntime {deps.version('onnxruntime')})",
                "keep_io_types": True, "io": "float32 input and output (a Cast at each edge)",
                "initializers": inits, "nodes_fp16": s.count("fp16"), "nodes_fp32": s.count("fp32"),
                "nodes": s.total, "weights_clamped_to_fp16_range": clamped,
                **({"keep_fp32": keep} if keep else {})}
        notes = ["converted from the fp32 ONNX file (not re-exported from model.half()): "
                 f"{s.count('fp16')} of {s.total} nodes compute in fp16, {s.count('cast')} Casts, "
                 "input and output stay float32"]
        if any(clamped.values()):
            notes.append(f"the converter clamped {clamped['above_65504']} weight values above fp16's largest "
                         f"value to 65504 and raised {clamped['below_5.96e-8']} below its smallest "
                         "subnormal to 5.96e-8")
        return ExportResult(str(path), opts, notes)


def _keep_fp32(ctx: ExportContext) -> list[str]:
    """--onnx-fp16-keep-fp32: the op types the fp16 file keeps in fp32, sorted and unique."""
    return _csv(ctx.options_as(OrtOptions).fp16_keep_fp32)


def _out_of_fp16_range(model) -> dict[str, int]:
    """How many float32 weight values the converter clamps: above fp16's largest value (to
    65504) and below its smallest subnormal (to 5.96e-8, not to zero)."""
    import numpy as np
    from onnx import numpy_helper

    big = tiny = 0
    for t in model.graph.initializer:
        if t.data_type != 1:
            continue
        a = np.abs(numpy_helper.to_array(t))
        big += int(np.count_nonzero(a > FP16_MAX))
        tiny += int(np.count_nonzero((a > 0) & (a < FP16_MIN_POSITIVE)))
    return {"above_65504": big, "below_5.96e-8": tiny}


class OnnxInt8Exporter(_FromOnnx):
    """fp32 ONNX -> int8 QDQ ONNX, statically calibrated on the calibration images."""

    @classmethod
    def cache_extras(cls, ctx: ExportContext, precision: str) -> dict[str, Any]:
        o = _recipe(ctx, precision)
        recipe = {"calibration": o.int8_calibration, "scheme": o.int8_scheme, "per_channel": True,
                  "calibration_batch": CALIB_BATCH, **calibration_extra(o.int8_calibration),
                  "reduce_range": _reduce_range(o)[0], **({"exclude": _csv(o.int8_exclude)}
                                                          if o.int8_exclude else {})}
        return {**super().cache_extras(ctx, precision), "recipe": recipe, "int8_rev": INT8_REV,
                "calibration_n": int(count(ctx.calibration)) if ctx.calibration is not None else 0}

    def export(self, ctx: ExportContext, source: str | None, out_dir: Path, precision: str) -> ExportResult:
        import onnx

        if precision not in ("int8", TRT_INT8):
            raise ExportError(f"the QDQ quantizer builds int8, not {precision}")
        src = os.path.abspath(_need_source(source, "int8"))
        out_dir = Path(os.path.abspath(out_dir))
        if ctx.calibration is None or not count(ctx.calibration):
            raise ExportError("int8 quantization needs calibration images, and there are none")
        q = deps.require("onnxruntime.quantization", "ONNX int8 quantization")
        if "calibration_cache_path" not in inspect.signature(q.quantize_static).parameters:
            raise BackendUnavailable(f"onnxruntime {deps.version('onnxruntime')} cannot quantize from "
                                     "computed ranges (quantize_static has no calibration_cache_path)",
                                     "pip install -c constraints.txt 'onnxruntime>=1.31'")
        o = _recipe(ctx, precision)
        reduce, why = _reduce_range(o)
        if precision == TRT_INT8:
            why = ("off: the TensorRT form (symmetric int8 Q/DQ with full 8-bit weights; "
                   "GPUs accumulate in int32)")
        bits = 7 if reduce else 8
        path = out_dir / "model.onnx"
        with tempfile.TemporaryDirectory(prefix="ort-qdq-") as tmp:
            pre = Path(tmp) / "pre.onnx"
            ctx.log(f"ONNX int8: quant_pre_process, {o.int8_calibration} calibration on "
                    f"{count(ctx.calibration)} images, QDQ {o.int8_scheme}, {bits}-bit weights")
            with quiet(), scratch_cwd(tmp):
                fixed = fix_sizes(src, ctx.calibration, Path(tmp) / "sized.onnx")
                pre_how = pre_process(q, fixed[0], pre)
                ranges = calibrate(q, pre, ctx.calibration, o.int8_calibration, Path(tmp), ctx.layout)
                excluded = excluded_nodes(pre, _csv(o.int8_exclude))
                # a detector's head: its parts keep their scales
                tails, mixed = mixed_scale_tails(pre, ranges)
                quantize(q, pre, path, ranges, o, Path(tmp), reduce,
                          [*excluded, *(t for t in tails if t not in excluded)])
        _sort_subgraph_reads(path)
        _check(path, "int8")
        model = onnx.load(str(path))
        wrapped, left = qdq_coverage(model)
        s = summarize(model)
        act = "uint8 asymmetric" if o.int8_scheme == "U8S8" else "int8 symmetric (zero point 0)"
        opts = {"quantizer": f"onnxruntime.quantization (onnxruntime {deps.version('onnxruntime')})",
                "pre_process": pre_how, "before_quantizing": fixed[1],
                "format": "QDQ", "scheme": o.int8_scheme,
                "activations": act, "weights": f"int8 per-channel symmetric, {bits}-bit range",
                "reduce_range": reduce, "reduce_range_reason": why, "built_on_cpu": describe_cpu().to_dict(),
                "calibration": o.int8_calibration,
                "calibration_settings": calibration_extra(o.int8_calibration),
                "calibration_inputs": int(count(ctx.calibration)), "calibration_batch": CALIB_BATCH,
                "quantize_nodes": dict(s.by_class.get("quantize", {})),
                "quantized_ops": dict(wrapped), "float_ops": dict(left),
                **({"excluded": {"asked": _csv(o.int8_exclude), "nodes": excluded}}
                   if o.int8_exclude else {})}
        notes = [f"QDQ {o.int8_scheme} ({act} activations, int8 per-channel {bits}-bit weights), "
                 f"{o.int8_calibration} calibration on {count(ctx.calibration)} images; ops wrapped in Q/DQ: "
                 f"{_fmt(wrapped)}; left in float: {_fmt(left) or 'none'}", f"reduce_range {why}"]
        notes += _tail_note(opts, tails, mixed) + _prep_notes(o.int8_exclude, excluded, fixed[1])
        return ExportResult(str(path), opts, notes)


def _sort_subgraph_reads(path: Path) -> None:
    """The quantizer inserts its Q/DQ pairs where If/Loop branches read a tensor from outside without ordering
    the If after them (silero's op15 decoder: "Nodes in a graph must be topologically sorted"): the same
    subgraph-aware sort as the fp16 file. A file without subgraphs is left as written."""
    import onnx

    model = onnx.load(str(path))
    if not any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for n in model.graph.node
               for a in n.attribute):
        return
    sort_nodes(model.graph)
    onnx.save(model, str(path))


def _fmt(c) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def _tail_note(opts: dict[str, Any], tails: list[str], mixed: str) -> list[str]:
    """The record and the note of a decoding tail left in float (models/onnx_heads.py); [] without one."""
    if not tails:
        return []
    opts["mixed_scale_outputs"] = {"why": mixed, "nodes": tails}
    return [f"left in float so that one output's parts keep their own scales ({mixed}): {len(tails)} "
            f"node(s) of its decoding tail, {', '.join(tails[:4])}{' ...' if len(tails) > 4 else ''}"]


def _recipe(ctx: ExportContext, precision: str) -> OrtOptions:
    """The int8 options of this file: the user's for the CPU rows' file; for the TensorRT form (TRT_INT8),
    symmetric int8 activations and full 8-bit weights, with the user's calibration method."""
    o = ctx.options_as(OrtOptions)
    if precision == TRT_INT8:
        return dataclasses.replace(o, int8_scheme="S8S8", int8_reduce_range="off")
    return o


def _reduce_range(o: OrtOptions) -> tuple[bool, str]:
    """7-bit weights or not, for the CPU this file is built on (host/cpu_int8.py), unless the option says."""
    return reduce_range_for(o.int8_reduce_range, o.int8_scheme, describe_cpu())


def _csv(text: str) -> list[str]:
    """A comma-separated option as a sorted, unique list."""
    return sorted({x.strip() for x in str(text or "").split(",") if x.strip()})


def _prep_notes(asked: str, excluded: list[str], before: dict[str, Any]) -> list[str]:
    """What was done to the file before quantizing it: nodes left out on request, sizes fixed, opset
    converted."""
    notes = []
    if excluded:
        notes.append(f"left unquantized (--onnx-int8-exclude {asked}): {len(excluded)} node(s), "
                     + ", ".join(excluded[:5]) + (" ..." if len(excluded) > 5 else ""))
    if before.get("sizes"):
        notes.append("dynamic sizes fixed to the measured ones before quantizing (symbolic shape inference "
                     "needs them): " + ", ".join(f"{k} {v}" for k, v in before["sizes"].items()))
    if before.get("opset"):
        notes.append(f"opset converted {before['opset']} before quantizing (per-channel int8 weights need "
                     "DequantizeLinear's axis)")
    return notes
