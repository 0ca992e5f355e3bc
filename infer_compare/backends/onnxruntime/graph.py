"""What an ONNX graph computes in, node by node: used on the graph that ONNX Runtime
actually runs (the session's optimized model) and on the artifacts themselves.

Each node gets one class from the element type of the tensor it computes on:
``integer`` (an integer kernel such as QLinearConv, QGemm, MatMulInteger, ConvInteger,
or any op moving int8/uint8 tensors), ``quantize`` (QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear: the float/int8 boundaries), ``cast``, ``fp16``, ``bf16``,
``fp32`` (float compute), ``other`` (Shape/Size, shape arithmetic on int64/bool, or unknown
types).
Types are propagated from the graph inputs and initializers, because ONNX Runtime's
saved optimized model carries stale value_info and its contrib ops have no ONNX shape
inference.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# onnx.TensorProto element types
FLOAT, UINT8, INT8, INT32, INT64, FLOAT16, BFLOAT16, BOOL = 1, 2, 3, 6, 7, 10, 16, 9
_INT8 = (UINT8, INT8)
_FLOATS = {FLOAT: "fp32", FLOAT16: "fp16", BFLOAT16: "bf16"}

QUANTIZE_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})
# integer kernels whose inputs are not all int8 tensors (MatMulIntegerToFloat reads float scales)
INTEGER_OPS = frozenset({"MatMulInteger", "ConvInteger", "MatMulIntegerToFloat", "DynamicQuantizeMatMul",
                         "QGemm", "QAttention", "QEmbedLayerNormalization", "DynamicQuantizeLSTM"})
_METADATA = frozenset({"Shape", "Size"})  # read a tensor's shape, not its values
_FLOAT_OUT = frozenset({"MatMulIntegerToFloat", "DynamicQuantizeMatMul", "DynamicQuantizeLSTM"})


def is_integer_kernel(op: str) -> bool:
    return op.startswith("QLinear") or op in INTEGER_OPS


@dataclass
class GraphSummary:
    """Node counts per class, and per class the op types with their counts."""

    total: int = 0
    by_class: dict[str, Counter] = field(default_factory=dict)

    def count(self, cls: str) -> int:
        return sum(self.by_class.get(cls, Counter()).values())

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.total,
                **{c: dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))
                   for c, ops in self.by_class.items()}}

    def describe(self, cls: str) -> str:
        ops = self.by_class.get(cls)
        if not ops:
            return "none"
        return ", ".join(f"{op} {n}" for op, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))


def _out_type(node, tin: list[int | None]) -> int | None:
    op = node.op_type
    if op == "Cast":
        return next((a.i for a in node.attribute if a.name == "to"), None)
    if op == "DequantizeLinear":
        return tin[1] if len(tin) > 1 else FLOAT  # the scale's type
    if op in ("QuantizeLinear", "DynamicQuantizeLinear"):
        return tin[2] if len(tin) > 2 and tin[2] is not None else UINT8  # the zero point's type
    if op in ("MatMulInteger", "ConvInteger"):
        return INT32
    if op in _FLOAT_OUT or (op == "QGemm" and (len(node.input) < 8 or not node.input[7])):
        return FLOAT  # QGemm without y_scale writes float
    if op in ("Shape", "Size"):
        return INT64
    return next((t for t in tin if t is not None), None)


def _classify(op: str, tin: list[int | None]) -> str:
    if op in QUANTIZE_OPS:
        return "quantize"
    if op == "Cast":
        return "cast"
    if is_integer_kernel(op):
        return "integer"
    if op in _METADATA:
        return "other"
    data = tin[0] if tin else None
    if data in _INT8:
        return "integer"
    return _FLOATS.get(data, "other")  # type: ignore[arg-type]


def _topological(nodes, available: set[str]) -> list:
    """The nodes in an order where each comes after its inputs' producers (Kahn, by passes);
    what cannot be placed (a missing input) keeps its place at the end."""
    order, pending, avail = [], list(nodes), set(available)
    while pending:
        rest = []
        for n in pending:
            if all(not i or i in avail for i in n.input):
                order.append(n)
                avail.update(n.output)
            else:
                rest.append(n)
        if len(rest) == len(pending):
            return order + rest
        pending = rest
    return order


def summarize(model) -> GraphSummary:
    """GraphSummary of the main graph of an onnx.ModelProto."""
    g = model.graph
    types: dict[str, int | None] = {}
    for t in g.initializer:
        types[t.name] = t.data_type
    for vi in g.input:
        types[vi.name] = vi.type.tensor_type.elem_type or None
    out = GraphSummary()
    for node in _topological(g.node, set(types)):
        tin = [types.get(n) if n else None for n in node.input]
        t = _out_type(node, tin)
        for o in node.output:
            types[o] = t
        out.by_class.setdefault(_classify(node.op_type, tin), Counter())[node.op_type] += 1
        out.total += 1
    return out


def qdq_coverage(model) -> tuple[Counter, Counter]:
    """(op types fed by a DequantizeLinear, op types of the other compute nodes) in a QDQ
    file: the ops the quantizer wrapped in Q/DQ pairs, and those it left in float."""
    dq_out = {o for n in model.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    wrapped: Counter = Counter()
    left: Counter = Counter()
    for n in model.graph.node:
        if n.op_type in QUANTIZE_OPS:
            continue
        (wrapped if any(i in dq_out for i in n.input) else left)[n.op_type] += 1
    return wrapped, left


def _int8_values(t):
    """The values of an int8 initializer: of an onnx TensorProto, or of onnx_wire's (its ``raw`` bytes)."""
    import numpy as np

    if hasattr(t, "raw"):  # onnx_wire: no onnx package on this machine
        return np.frombuffer(bytes(t.raw or b""), np.int8)
    from onnx import numpy_helper

    return numpy_helper.to_array(t)


def int8_recipe(model) -> dict:
    """What an int8 ONNX graph (the QDQ file, or the session's optimized graph) carries: the activation scheme
    (uint8 zero points: U8S8; int8: S8S8) and the weights' range (all within [-64, 64]: 7-bit, as
    ``reduce_range`` writes them; else 8-bit). Read from the file, so a file built elsewhere says the truth;
    ``model`` is an onnx ModelProto or onnx_wire's reading of the file (a device without the onnx package)."""
    zp_types, peak, n_weights = set(), 0, 0
    inits = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type in ("QuantizeLinear", "QLinearConv",
                            "QLinearMatMul", "QGemm") and len(node.input) > 2:
            zp = inits.get(node.input[2])
            if zp is not None:
                zp_types.add(zp.data_type)
    for t in model.graph.initializer:
        if t.data_type == INT8 and len(t.dims) >= 2:
            n_weights += 1
            peak = max(peak, int(abs(_int8_values(t).astype("int16")).max(initial=0)))
    scheme = ("U8S8" if UINT8 in zp_types else "S8S8" if INT8 in zp_types else "unknown")
    return {"scheme": scheme, "weight_bits": (7 if peak <= 64 else 8) if n_weights else None,
            "weight_peak": peak, "int8_weight_tensors": n_weights}
