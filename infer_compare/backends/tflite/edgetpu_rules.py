"""The Edge TPU compiler's documented requirements, as data and small checks.

``SUPPORTED``: Coral's supported-operations table (coral.ai/docs/edgetpu/models-intro,
"Supported operations"), keyed by TFLite builtin name: the Edge TPU runtime version the
operation needs (0 = all) and the documented limitation. ``limit_problem`` checks the
limitations that a file shows statically.

``COMPILER16_MAX_VERSION``: the highest version of each builtin that edgetpu_compiler
16.0 (CL 384591198, mid-2021) can parse. It is derived from TensorFlow's
tensorflow/lite/tools/versioning/runtime_version.cc (the TF release that introduced
each op version): versions introduced up to TF 2.5.0 are taken as known to it, those of
2.6.0 as uncertain, later ones as unknown. That cut is consistent with the refusals
reported against compiler 16.0.384591198 in google-coral/edgetpu issues: CONV_2D version 6
(TF 2.9, #631), QUANTIZE version 3 (TF 2.7, #879), TRANSPOSE_CONV version 4 (#845),
EXP version 2 (libedgetpu #71).
"""

from __future__ import annotations

from collections.abc import Callable

from infer_compare.backends.tflite.tflite_file import BUILTIN_OPS, Operator, Tensor, TFLiteModel

RUNTIME = 14  # the Edge TPU runtime version that compiler 16 compiles for by default

_NO_ACT = "No fused activation function."
_SAME_DIL = "Must use the same dilation in x and y dimensions."
_RESIZE = ("Input/output is a 3-dimensional tensor. Depending on input/output size, this operation "
           "may not be mapped to the Edge TPU to avoid loss in precision.")
_LSTM = "Unidirectional LSTM only."
SUPPORTED: dict[str, tuple[int, str]] = {
    "ADD": (0, ""), "AVERAGE_POOL_2D": (0, _NO_ACT),
    "CONCATENATION": (0, _NO_ACT + " If any input is a compile-time constant tensor, "
                                   "there must be only 2 inputs, and this constant tensor must be all zeroes "
                                   "(effectively, a zero-padding op)."),
    "CONV_2D": (0, _SAME_DIL), "DEPTHWISE_CONV_2D": (0, _SAME_DIL), "EXPAND_DIMS": (13, ""),
    "FULLY_CONNECTED": (0, "Only the default format is supported for fully-connected weights. "
                           "Output tensor is one-dimensional."),
    "L2_NORMALIZATION": (0, ""), "LOGISTIC": (0, ""), "LSTM": (14, _LSTM),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": (14, _LSTM), "MAXIMUM": (0, ""), "MAX_POOL_2D": (0, _NO_ACT),
    "MEAN": (0, "No reduction in batch dimension. If a z-reduction, the z-dimension must be multiple of 4."),
    "MINIMUM": (0, ""), "MUL": (0, ""), "PACK": (13, "No packing in batch dimension."),
    "PAD": (0, "No padding in batch dimension."),
    "PRELU": (13, "Alpha must be 1-dimensional (only the innermost dimension can be >1 size)."),
    "QUANTIZE": (13, ""), "REDUCE_MAX": (14, "Cannot operate on the batch dimension."),
    "REDUCE_MIN": (14, "Cannot operate on the batch dimension."),
    "RELU": (0, ""), "RELU6": (0, ""), "RELU_N1_TO_1": (0, ""),
    "RESHAPE": (0, "Certain reshapes might not be mapped for large tensor sizes."),
    "RESIZE_BILINEAR": (0, _RESIZE), "RESIZE_NEAREST_NEIGHBOR": (0, _RESIZE), "RSQRT": (14, ""),
    "SLICE": (0, ""), "SOFTMAX": (0, "Supports only 1-D input tensor with a max of 16,000 elements."),
    "SPACE_TO_DEPTH": (0, ""), "SPLIT": (0, "No splitting in batch dimension."), "SQUEEZE": (0, ""),
    "STRIDED_SLICE": (0, "Supported only when all strides are equal to 1 (that is, effectively a Stride op), "
                         "and with ellipsis-axis-mask == 0, and new-axis-max == 0."),
    "SUB": (0, ""), "SUM": (13, "Cannot operate on the batch dimension."), "SQUARED_DIFFERENCE": (14, ""),
    "TANH": (0, ""), "TRANSPOSE": (14, ""), "TRANSPOSE_CONV": (13, ""),
}
# Documented limitations that depend on the compiler's internals, not on what the file shows.
UNCHECKABLE = {
    "RESHAPE": "certain reshapes might not be mapped for large tensor sizes (not checkable statically)",
    "RESIZE_BILINEAR": "may not be mapped, depending on input/output size (not checkable statically)",
    "RESIZE_NEAREST_NEIGHBOR": "may not be mapped, depending on input/output size (not checkable statically)",
}

# Highest version known to compiler 16 (introduced up to TF 2.5.0, runtime_version.cc).
COMPILER16_MAX_VERSION: dict[str, int] = {k: int(v) for k, v in (kv.split(":") for kv in """
ABS:3 ADD:3 ADD_N:1 ARG_MAX:2 ARG_MIN:2 AVERAGE_POOL_2D:3 BATCH_MATMUL:4 BATCH_TO_SPACE_ND:3
BIDIRECTIONAL_SEQUENCE_LSTM:3 BIDIRECTIONAL_SEQUENCE_RNN:3 BROADCAST_TO:3 CALL_ONCE:1 CAST:1 CEIL:1
COMPLEX_ABS:1 CONCATENATION:3 CONV_2D:5 CONV_3D:1 COS:1 CUMSUM:1 DENSIFY:1 DEPTHWISE_CONV_2D:6
DEPTH_TO_SPACE:2 DEQUANTIZE:4 DIV:2 ELU:1 EMBEDDING_LOOKUP:3 EMBEDDING_LOOKUP_SPARSE:1 EQUAL:3 EXP:1
EXPAND_DIMS:1 FAKE_QUANT:2 FILL:3 FLOOR:1 FLOOR_DIV:2 FLOOR_MOD:1 FULLY_CONNECTED:9 GATHER:5 GATHER_ND:3
GREATER:2 GREATER_EQUAL:2 HARD_SWISH:1 HASHTABLE:1 HASHTABLE_FIND:1 HASHTABLE_IMPORT:1 HASHTABLE_LOOKUP:1
HASHTABLE_SIZE:1 IF:1 IMAG:1 L2_NORMALIZATION:2 L2_POOL_2D:1 LEAKY_RELU:2 LESS:2 LESS_EQUAL:2
LOCAL_RESPONSE_NORMALIZATION:1 LOG:1 LOGICAL_AND:1 LOGICAL_NOT:1 LOGICAL_OR:1 LOGISTIC:3 LOG_SOFTMAX:2
LSH_PROJECTION:1 LSTM:4 MATRIX_DIAG:1 MATRIX_SET_DIAG:1 MAXIMUM:4 MAX_POOL_2D:3 MEAN:3 MINIMUM:4
MIRROR_PAD:2 MUL:4 NEG:1 NON_MAX_SUPPRESSION_V4:1 NON_MAX_SUPPRESSION_V5:1 NOT_EQUAL:3 ONE_HOT:1 PACK:3
PAD:3 PADV2:3 POW:1 PRELU:1 QUANTIZE:2 RANGE:1 RANK:1 REAL:1 REDUCE_ANY:1 REDUCE_MAX:3 REDUCE_MIN:3
REDUCE_PROD:1 RELU:3 RELU6:3 RELU_N1_TO_1:1 RESHAPE:1 RESIZE_BILINEAR:4 RESIZE_NEAREST_NEIGHBOR:4
REVERSE_SEQUENCE:1 REVERSE_V2:3 RFFT2D:1 RNN:3 ROUND:1 RSQRT:2 SCATTER_ND:1 SEGMENT_SUM:1 SELECT:2
SELECT_V2:1 SHAPE:1 SIN:1 SKIP_GRAM:1 SLICE:5 SOFTMAX:3 SPACE_TO_BATCH_ND:3 SPACE_TO_DEPTH:2
SPARSE_TO_DENSE:3 SPLIT:4 SPLIT_V:2 SQRT:1 SQUARE:1 SQUARED_DIFFERENCE:2 SQUEEZE:2 STRIDED_SLICE:5 SUB:5
SUM:2 SVDF:4 TANH:3 TILE:2 TOPK_V2:2 TRANSPOSE:5 TRANSPOSE_CONV:3 UNIDIRECTIONAL_SEQUENCE_LSTM:3
UNIDIRECTIONAL_SEQUENCE_RNN:3 UNIQUE:1 UNPACK:4 WHERE:1 ZEROS_LIKE:1
""".split())}
# Introduced in TF 2.6.0: compiler 16 may or may not know them.
COMPILER16_UNSURE = {("ABS", 4), ("ADD", 4), ("MUL", 5), ("PAD", 4), ("PADV2", 4), ("STRIDED_SLICE", 6),
                     ("REDUCE_PROD", 2), ("REDUCE_ALL", 1), ("CONV_3D_TRANSPOSE", 1), ("VAR_HANDLE", 1),
                     ("READ_VARIABLE", 1), ("ASSIGN_VARIABLE", 1), ("BROADCAST_ARGS", 1)}
_LAST_KNOWN_CODE = BUILTIN_OPS.index("BROADCAST_ARGS")  # builtin codes after it came with TF 2.8 and later


def version_problem(name: str, version: int) -> tuple[str, str]:
    """('ok' | 'unsure' | 'refused' | 'unchecked', why) for one operator code."""
    if (name, version) in COMPILER16_UNSURE:
        return "unsure", f"{name} version {version} came with TF 2.6; compiler 16 may not parse it"
    known = COMPILER16_MAX_VERSION.get(name)
    if known is not None:
        if version <= known:
            return "ok", ""
        return "refused", (f"{name} version {version} is newer than the versions it can parse (up "
                           f"to {known}): \"Didn't find op for builtin opcode '{name}' version '{version}'\"")
    if name in BUILTIN_OPS and BUILTIN_OPS.index(name) > _LAST_KNOWN_CODE:
        return "refused", f"{name} came with TF 2.8 or later, after compiler 16"
    return "unchecked", ""


# -- per-operation limitations that the file shows -------------------------------------------

def _opt(op: Operator, fid: int, fmt: str, default: int) -> int:
    return default if op.options is None else op.options.scalar(fid, fmt, default)


def _t(model: TFLiteModel, op: Operator, k: int, outputs: bool = False) -> Tensor | None:
    idx = op.outputs if outputs else op.inputs
    return model.tensors[idx[k]] if k < len(idx) and 0 <= idx[k] < len(model.tensors) else None


def _axes(model: TFLiteModel, op: Operator, k: int, rank: int) -> list[int] | None:
    t = _t(model, op, k)
    vals = t.values() if t is not None else None
    return None if vals is None else [a + rank if a < 0 else a for a in vals]


def _fused(op: Operator, fid: int) -> str | None:
    act = _opt(op, fid, "b", 0)
    names = {1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
    return f"it has a fused {names.get(act, act)} activation (none is allowed)" if act else None


def _dilation(op: Operator, w_fid: int) -> str | None:
    dw, dh = _opt(op, w_fid, "i", 1), _opt(op, w_fid + 1, "i", 1)
    return f"its dilation differs in x and y ({dw} vs {dh})" if dw != dh else None


def _params_constant(model: TFLiteModel, op: Operator, bias: int = 2) -> str | None:
    for k, what in ((1, "weights"), (bias, "bias")):
        t = _t(model, op, k)
        if t is not None and not t.constant:
            return f"its {what} ('{t.name}') are not a compile-time constant"
    return None


def _concat(model: TFLiteModel, op: Operator) -> str | None:
    if why := _fused(op, 1):
        return why
    consts = [t for k in range(len(op.inputs)) if (t := _t(model, op, k)) is not None and t.constant]
    if not consts:
        return None
    if len(op.inputs) != 2:
        return f"it has a constant input among {len(op.inputs)} inputs (only 2 inputs allowed then)"
    zp = consts[0].zero_point[0] if consts[0].zero_point else 0
    if any(v != zp for v in consts[0].values() or [1]):
        return "its constant input is not all zeroes (only a zero-padding concatenation is allowed)"
    return None


def _fully_connected(model: TFLiteModel, op: Operator) -> str | None:
    if _opt(op, 1, "b", 0) != 0:
        return "its weights are not in the default format"
    out = _t(model, op, 0, outputs=True)
    if out is not None and any(d > 1 for d in out.shape[:-1]):
        return f"its output {out.shape} is not one-dimensional"
    return _params_constant(model, op)


def _reduce(model: TFLiteModel, op: Operator) -> str | None:
    x = _t(model, op, 0)
    if x is None:
        return None
    axes = _axes(model, op, 1, len(x.shape))
    if axes is None:
        return "its reduction axes are not a compile-time constant"
    if 0 in axes and len(x.shape) > 1:
        return f"it reduces the batch dimension (axes {axes})"
    if op.op == "MEAN" and len(x.shape) - 1 in axes and x.shape[-1] % 4:
        return f"it reduces the z-dimension, of size {x.shape[-1]}, which is not a multiple of 4"
    return None


def _pad(model: TFLiteModel, op: Operator) -> str | None:
    p = _t(model, op, 1)
    vals = p.values() if p is not None else None
    if vals is None:
        return "its paddings are not a compile-time constant"
    return f"it pads the batch dimension (paddings {vals[:2]})" if any(vals[:2]) else None


def _softmax(model: TFLiteModel, op: Operator) -> str | None:
    x = _t(model, op, 0)
    if x is None:
        return None
    if any(d > 1 for d in x.shape[:-1]):
        return f"its input {x.shape} is not a 1-D tensor"
    return (f"its input has {x.shape[-1]} elements (at most 16,000)"
            if x.shape and x.shape[-1] > 16000 else None)


def _split(model: TFLiteModel, op: Operator) -> str | None:
    x = _t(model, op, 1)
    axes = _axes(model, op, 0, len(x.shape)) if x is not None else None
    if axes is None:
        return "its split axis is not a compile-time constant"
    return "it splits the batch dimension" if 0 in axes else None


def _strided_slice(model: TFLiteModel, op: Operator) -> str | None:
    s = _t(model, op, 3)
    strides = s.values() if s is not None else None
    if strides is None or any(v != 1 for v in strides):
        return f"its strides are {strides if strides is not None else 'not constant'} (all must be 1)"
    if _opt(op, 2, "i", 0) or _opt(op, 3, "i", 0):
        return "its ellipsis or new-axis mask is set (both must be 0)"
    return None


def _prelu(model: TFLiteModel, op: Operator) -> str | None:
    a = _t(model, op, 1)
    return (f"its alpha {a.shape} is not 1-dimensional"
            if a is not None and any(d > 1 for d in a.shape[:-1]) else None)


_LIMITS: dict[str, Callable[[TFLiteModel, Operator], str | None]] = {
    "AVERAGE_POOL_2D": lambda m, op: _fused(op, 5), "MAX_POOL_2D": lambda m, op: _fused(op, 5),
    "CONCATENATION": _concat,
    "CONV_2D": lambda m, op: _dilation(op, 4) or _params_constant(m, op),
    "DEPTHWISE_CONV_2D": lambda m, op: _dilation(op, 5) or _params_constant(m, op),
    "TRANSPOSE_CONV": lambda m, op: _params_constant(m, op, bias=3),  # inputs: shape, weights, input, bias
    "FULLY_CONNECTED": _fully_connected,
    "MEAN": _reduce, "SUM": _reduce, "REDUCE_MAX": _reduce, "REDUCE_MIN": _reduce,
    "PAD": _pad,
    "PACK": lambda m, op: "it packs along the batch dimension" if _opt(op, 1, "i", 0) == 0 else None,
    "SOFTMAX": _softmax, "SPLIT": _split, "STRIDED_SLICE": _strided_slice, "PRELU": _prelu,
}


def limit_problem(model: TFLiteModel, op: Operator) -> str | None:
    """The documented limitation of this operation that the file breaks, if any."""
    check = _LIMITS.get(op.op)
    return check(model, op) if check else None
