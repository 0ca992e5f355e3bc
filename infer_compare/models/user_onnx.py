"""The user's ONNX file: checked with ``onnx.checker`` (full check), described from its graph
(inputs, outputs, element types, external-data sidecars), and its reference outputs from
ONNX Runtime's CPU provider on the original file. Imported only for ONNX models; see
``user.py`` for the public API."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from infer_compare.base.errors import UsageError
from infer_compare.base.layout import batch_axes
from infer_compare.catalog import deps
from infer_compare.models.user import (
    TensorSpec,
    UserModel,
    first_line,
    fmt_shape,
    resolve_inputs,
    sha256_files,
    static_batch_of,
)


def _tensors(graph) -> Iterator[Any]:
    """Every TensorProto of a graph: initializers and attribute tensors, subgraphs included."""
    yield from graph.initializer
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            if a.HasField("g"):
                yield from _tensors(a.g)
            for g in a.graphs:
                yield from _tensors(g)


def _sidecars(model, path: str) -> list[str]:
    """The external-data files the model names, checked to exist inside its folder."""
    from onnx import TensorProto

    base = os.path.dirname(path)
    names = set()
    for t in _tensors(model.graph):
        if t.data_location == TensorProto.EXTERNAL:
            loc = {e.key: e.value for e in t.external_data}.get("location", "")
            names.add(loc)
    out = []
    for loc in sorted(names):
        full = os.path.realpath(os.path.join(base, loc))
        if not loc or os.path.commonpath([full, os.path.realpath(base)]) != os.path.realpath(base):
            raise UsageError(f"{path}: external data location {loc!r} is outside the model's folder")
        if not os.path.isfile(full):
            raise UsageError(f"{path}: its external data file {loc} is missing (expected next to the model)")
        out.append(full)
    return out


def _dtype(elem_type: int, where: str) -> str:
    import onnx

    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).name
    except (KeyError, TypeError, ValueError):
        name = (onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values()
                else elem_type)
        raise UsageError(f"{where} has element type {name}, which has no numpy equivalent") from None


def _declared(vi, where: str) -> tuple[tuple[Any, ...] | None, str]:
    """(shape with int / dim_param / "?" per axis, or None without a shape; dtype) of a ValueInfo."""
    kind = vi.type.WhichOneof("value")
    if kind != "tensor_type":
        raise UsageError(f"{where} is a {kind or 'value of unknown type'}, not a tensor; only tensors are "
                         "supported")
    tt = vi.type.tensor_type
    dtype = _dtype(tt.elem_type, where)
    if not tt.HasField("shape"):
        return None, dtype
    dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else (d.dim_param or "?")
                 for d in tt.shape.dim)
    return dims, dtype


def _output_spec(vi, dynamic_batch: bool, axis: int | None) -> TensorSpec:
    shape, dtype = _declared(vi, f"output '{vi.name}'")
    if shape is not None and dynamic_batch and axis is not None and len(shape) > axis and \
            isinstance(shape[axis], str):
        shape = shape[:axis] + ("batch",) + shape[axis + 1:]
    return TensorSpec(vi.name, shape, dtype, axis)


def _check(path: str) -> None:
    onnx = deps.require("onnx", "reading an ONNX model")
    try:
        onnx.checker.check_model(path, full_check=True)
    except Exception as e:
        raise UsageError(f"{path}: not a valid ONNX file: {first_line(e)}") from None


def _notes(model, files: list[str], inputs: tuple[TensorSpec, ...], outputs: tuple[TensorSpec, ...],
           declared: list) -> list[str]:
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
    made = f", made by {model.producer_name} {model.producer_version}".rstrip() if model.producer_name else ""
    data = f", external data: {', '.join(os.path.basename(f) for f in files[1:])}" if files[1:] else ""
    notes = [f"ONNX file (IR {model.ir_version}, opset {opsets}{made}{data})",
             f"reference: ONNX Runtime {deps.version('onnxruntime') or '?'} CPU FP32 on the original file"]
    if any(t.dtype in ("float16", "bfloat16") for t in inputs + outputs):
        notes.append("the model takes or gives float16 tensors: the reference is what ONNX Runtime computes "
                     "on them")
    for s, (_, shape, _) in zip(inputs, declared, strict=True):
        if shape is None or any(isinstance(d, str) for i, d in enumerate(shape) if i != s.batch_axis):
            notes.append(f"input '{s.name}': shape {fmt_shape(s.shape)}, dynamic dimensions sized by "
                         "--input-shape or --data")
    return notes


def load_onnx(path: str, input_shapes: Mapping[str | None, tuple[int, ...]] | None,
              data_shapes: Mapping[str, tuple[int, ...]] | None = None) -> UserModel:
    """An ONNX file (with its external data, if any) -> UserModel; every problem a UsageError."""
    _check(path)
    import onnx

    model = onnx.load(path, load_external_data=False)
    files = [path] + _sidecars(model, path)
    what = f"ONNX model {os.path.basename(path)}"
    weights = {t.name for t in model.graph.initializer}
    graph_inputs = [vi for vi in model.graph.input if vi.name not in weights]
    if not graph_inputs:
        raise UsageError(f"{what} has no inputs")
    declared = [(vi.name, *_declared(vi, f"input '{vi.name}'")) for vi in graph_inputs]
    out_declared = [(vi.name, _declared(vi, f"output '{vi.name}'")[0]) for vi in model.graph.output]
    inputs = resolve_inputs(declared, input_shapes, what, out_declared, data_shapes)
    dynamic = any(s.shape and "batch" in s.shape for s in inputs)
    _, out_axes = batch_axes([(n, s) for n, s, _ in declared], out_declared)
    outputs = tuple(_output_spec(vi, dynamic, out_axes[vi.name]) for vi in model.graph.output)
    notes = _notes(model, files, inputs, outputs, declared)
    return UserModel("onnx", path, sha256_files(files), inputs, outputs, static_batch_of(inputs), None, notes)


def _ort_reason(e: BaseException) -> str:
    """ONNX Runtime's message without its source location and C++ signature."""
    text = re.sub(r"[^\s:]*onnxruntime_src/\S+:\d+ [\w:~<>]+\([^)]*\)\s*", " ", first_line(e, 2000))
    return text[:300]


def onnx_runner(model: UserModel) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """One ONNX Runtime CPU session on the original file (basic, exact graph optimizations only)."""
    ort = deps.require("onnxruntime", "the ONNX Runtime reference of an ONNX model")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(model.source, so, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise UsageError(f"ONNX Runtime cannot load {model.source}: {_ort_reason(e)}") from None
    names = [o.name for o in sess.get_outputs()]

    def run(feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        try:
            return dict(zip(names, sess.run(names, feed), strict=True))
        except Exception as e:
            raise UsageError(f"ONNX Runtime fails on {model.name}: {_ort_reason(e)}") from None

    return run


# operators of a file that is already quantized: integer kernels, dynamic quantization, QDQ pairs
QUANTIZED_OPS = ("ConvInteger", "MatMulInteger", "DynamicQuantizeLinear", "DynamicQuantizeLSTM",
                 "DynamicQuantizeMatMul", "QLinearConv", "QLinearMatMul", "QLinearAdd", "QLinearMul",
                 "QuantizeLinear", "DequantizeLinear", "MatMulIntegerToFloat", "QAttention", "QGemm")


def quantized_ops(path: str) -> dict[str, int]:
    """{op type: count} of the quantization operators in the file's main graph (empty for a float file)."""
    import onnx

    counts: dict[str, int] = {}
    for node in onnx.load(path, load_external_data=False).graph.node:
        if node.op_type in QUANTIZED_OPS:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))
