"""A small, dependency-free reader of the TFLite flatbuffer (what the Edge TPU pre-check needs).

Reads the operator codes (builtin name, version, custom name), the main subgraph's
tensors (type, shape, shape signature, buffer, quantization), its operators in
execution order (opcode, inputs, outputs, builtin options table) and the constant
buffers, following tensorflow/lite/schema/schema.fbs (field ids as in that file).
Only ``struct`` is used, so the pre-check also runs where no TFLite package is
installed. Raises ValueError on a file that is not a TFLite flatbuffer.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# BuiltinOperator enum of schema.fbs, in code order (0 = ADD ... 209 = STABLEHLO_CASE).
BUILTIN_OPS = """
ADD AVERAGE_POOL_2D CONCATENATION CONV_2D DEPTHWISE_CONV_2D DEPTH_TO_SPACE DEQUANTIZE EMBEDDING_LOOKUP FLOOR
FULLY_CONNECTED HASHTABLE_LOOKUP L2_NORMALIZATION L2_POOL_2D LOCAL_RESPONSE_NORMALIZATION LOGISTIC
LSH_PROJECTION LSTM MAX_POOL_2D MUL RELU RELU_N1_TO_1 RELU6 RESHAPE RESIZE_BILINEAR RNN SOFTMAX SPACE_TO_DEPTH
SVDF TANH CONCAT_EMBEDDINGS SKIP_GRAM CALL CUSTOM EMBEDDING_LOOKUP_SPARSE PAD UNIDIRECTIONAL_SEQUENCE_RNN
GATHER BATCH_TO_SPACE_ND SPACE_TO_BATCH_ND TRANSPOSE MEAN SUB DIV SQUEEZE UNIDIRECTIONAL_SEQUENCE_LSTM
STRIDED_SLICE BIDIRECTIONAL_SEQUENCE_RNN EXP TOPK_V2 SPLIT LOG_SOFTMAX DELEGATE BIDIRECTIONAL_SEQUENCE_LSTM
CAST PRELU MAXIMUM ARG_MAX MINIMUM LESS NEG PADV2 GREATER GREATER_EQUAL LESS_EQUAL SELECT SLICE SIN
TRANSPOSE_CONV SPARSE_TO_DENSE TILE EXPAND_DIMS EQUAL NOT_EQUAL LOG SUM SQRT RSQRT SHAPE POW ARG_MIN
FAKE_QUANT REDUCE_PROD REDUCE_MAX PACK LOGICAL_OR ONE_HOT LOGICAL_AND LOGICAL_NOT UNPACK REDUCE_MIN FLOOR_DIV
REDUCE_ANY SQUARE ZEROS_LIKE FILL FLOOR_MOD RANGE RESIZE_NEAREST_NEIGHBOR LEAKY_RELU SQUARED_DIFFERENCE
MIRROR_PAD ABS SPLIT_V UNIQUE CEIL REVERSE_V2 ADD_N GATHER_ND COS WHERE RANK ELU REVERSE_SEQUENCE MATRIX_DIAG
QUANTIZE MATRIX_SET_DIAG ROUND HARD_SWISH IF WHILE NON_MAX_SUPPRESSION_V4 NON_MAX_SUPPRESSION_V5 SCATTER_ND
SELECT_V2 DENSIFY SEGMENT_SUM BATCH_MATMUL PLACEHOLDER_FOR_GREATER_OP_CODES CUMSUM CALL_ONCE BROADCAST_TO
RFFT2D CONV_3D IMAG REAL COMPLEX_ABS HASHTABLE HASHTABLE_FIND HASHTABLE_IMPORT HASHTABLE_SIZE REDUCE_ALL
CONV_3D_TRANSPOSE VAR_HANDLE READ_VARIABLE ASSIGN_VARIABLE BROADCAST_ARGS RANDOM_STANDARD_NORMAL BUCKETIZE
RANDOM_UNIFORM MULTINOMIAL GELU DYNAMIC_UPDATE_SLICE RELU_0_TO_1 UNSORTED_SEGMENT_PROD UNSORTED_SEGMENT_MAX
UNSORTED_SEGMENT_SUM ATAN2 UNSORTED_SEGMENT_MIN SIGN BITCAST BITWISE_XOR RIGHT_SHIFT STABLEHLO_LOGISTIC
STABLEHLO_ADD STABLEHLO_DIVIDE STABLEHLO_MULTIPLY STABLEHLO_MAXIMUM STABLEHLO_RESHAPE STABLEHLO_CLAMP
STABLEHLO_CONCATENATE STABLEHLO_BROADCAST_IN_DIM STABLEHLO_CONVOLUTION STABLEHLO_SLICE STABLEHLO_CUSTOM_CALL
STABLEHLO_REDUCE STABLEHLO_ABS STABLEHLO_AND STABLEHLO_COSINE STABLEHLO_EXPONENTIAL STABLEHLO_FLOOR
STABLEHLO_LOG STABLEHLO_MINIMUM STABLEHLO_NEGATE STABLEHLO_OR STABLEHLO_POWER STABLEHLO_REMAINDER
STABLEHLO_RSQRT STABLEHLO_SELECT STABLEHLO_SUBTRACT STABLEHLO_TANH STABLEHLO_SCATTER STABLEHLO_COMPARE
STABLEHLO_CONVERT STABLEHLO_DYNAMIC_SLICE STABLEHLO_DYNAMIC_UPDATE_SLICE STABLEHLO_PAD STABLEHLO_IOTA
STABLEHLO_DOT_GENERAL STABLEHLO_REDUCE_WINDOW STABLEHLO_SORT STABLEHLO_WHILE STABLEHLO_GATHER
STABLEHLO_TRANSPOSE DILATE STABLEHLO_RNG_BIT_GENERATOR REDUCE_WINDOW STABLEHLO_COMPOSITE STABLEHLO_SHIFT_LEFT
STABLEHLO_CBRT STABLEHLO_CASE
""".split()

# TensorType enum of schema.fbs.
TENSOR_TYPES = ("float32 float16 int32 uint8 int64 string bool int16 complex64 int8 float64 "
                "complex128 uint64 resource variant uint32 uint16 int4 bfloat16 int2 uint4 "
                "float8_e4m3fn float8_e5m2").split()
_NUMPY_CODES = {"int8": "b", "uint8": "B", "int16": "h", "int32": "i", "int64": "q", "float32": "f"}


class _Table:
    """One flatbuffer table: fields by id through its vtable (little-endian)."""

    def __init__(self, buf: bytes, pos: int):
        self.buf, self.pos = buf, pos
        self.vt = pos - struct.unpack_from("<i", buf, pos)[0]
        self.vt_len = struct.unpack_from("<H", buf, self.vt)[0]

    def _field(self, fid: int) -> int:
        o = 4 + 2 * fid
        return struct.unpack_from("<H", self.buf, self.vt + o)[0] if o < self.vt_len else 0

    def scalar(self, fid: int, fmt: str, default: Any = 0) -> Any:
        off = self._field(fid)
        return struct.unpack_from("<" + fmt, self.buf, self.pos + off)[0] if off else default

    def _indirect(self, fid: int) -> int | None:
        off = self._field(fid)
        if not off:
            return None
        at = self.pos + off
        return at + struct.unpack_from("<I", self.buf, at)[0]

    def table(self, fid: int) -> _Table | None:
        at = self._indirect(fid)
        return None if at is None else _Table(self.buf, at)

    def _vector(self, fid: int) -> tuple[int, int]:
        at = self._indirect(fid)
        if at is None:
            return 0, 0
        return at + 4, struct.unpack_from("<I", self.buf, at)[0]

    def scalars(self, fid: int, fmt: str) -> list:
        start, n = self._vector(fid)
        return list(struct.unpack_from(f"<{n}{fmt}", self.buf, start)) if n else []

    def tables(self, fid: int) -> list[_Table]:
        start, n = self._vector(fid)
        return [_Table(self.buf, start + 4 * i + struct.unpack_from("<I", self.buf, start + 4 * i)[0])
                for i in range(n)]

    def bytes(self, fid: int) -> bytes:
        start, n = self._vector(fid)
        return bytes(self.buf[start:start + n])

    def string(self, fid: int) -> str | None:
        at = self._indirect(fid)
        if at is None:
            return None
        n = struct.unpack_from("<I", self.buf, at)[0]
        return bytes(self.buf[at + 4:at + 4 + n]).decode("utf-8", "replace")


@dataclass
class OpCode:
    name: str  # builtin name, or CUSTOM
    version: int
    custom: str | None = None


@dataclass
class Tensor:
    index: int
    name: str
    type: str  # numpy-style name: int8, uint8, int32, float32, ...
    shape: list[int]
    shape_signature: list[int]  # -1 marks a dynamic dimension (empty when the file has none)
    buffer: int
    data: bytes = b""  # the constant's bytes (empty for activations)
    scale: list[float] = field(default_factory=list)
    zero_point: list[int] = field(default_factory=list)

    @property
    def constant(self) -> bool:
        return bool(self.data)

    def values(self) -> list | None:
        """The constant's values as Python numbers (None when not constant or of another type)."""
        code = _NUMPY_CODES.get(self.type)
        if not self.data or code is None:
            return None
        n = len(self.data) // struct.calcsize(code)
        return list(struct.unpack_from(f"<{n}{code}", self.data))


@dataclass
class Operator:
    index: int
    op: str
    version: int
    inputs: list[int]
    outputs: list[int]
    options: _Table | None  # builtin options table (fields by schema id), None when absent
    custom: str | None = None


@dataclass
class TFLiteModel:
    opcodes: list[OpCode]
    tensors: list[Tensor]
    operators: list[Operator]
    inputs: list[int]
    outputs: list[int]
    n_subgraphs: int
    metadata: dict[str, bytes] = field(default_factory=dict)


def _opcode(t: _Table) -> OpCode:
    deprecated = t.scalar(0, "b", 0)
    code = max(int(deprecated), int(t.scalar(3, "i", 0)))  # builtin_code, or the old int8 field below 127
    name = BUILTIN_OPS[code] if 0 <= code < len(BUILTIN_OPS) else f"BUILTIN_{code}"
    return OpCode(name, int(t.scalar(2, "i", 1)), t.string(1))


def _buffer_data(t: _Table, raw: bytes) -> bytes:
    data = t.bytes(0)
    if data:
        return data
    offset, size = t.scalar(1, "Q", 0), t.scalar(2, "Q", 0)  # data stored after the flatbuffer (>2 GB files)
    return bytes(raw[offset:offset + size]) if offset > 1 and size else b""


def _tensor(i: int, t: _Table, buffers: list[bytes]) -> Tensor:
    ttype = t.scalar(1, "b", 0)
    buf = int(t.scalar(2, "I", 0))
    q = t.table(4)
    return Tensor(
        index=i, name=t.string(3) or f"t{i}",
        type=TENSOR_TYPES[ttype] if 0 <= ttype < len(TENSOR_TYPES) else f"type{ttype}",
        shape=t.scalars(0, "i"), shape_signature=t.scalars(7, "i"), buffer=buf,
        data=buffers[buf] if 0 < buf < len(buffers) else b"",
        scale=q.scalars(2, "f") if q else [], zero_point=q.scalars(3, "q") if q else [],
    )


def read_model(source: str | Path | bytes) -> TFLiteModel:
    """Parse a .tflite file (path or bytes): operator codes and the main subgraph (subgraph 0)."""
    raw = source if isinstance(source, (bytes, bytearray)) else Path(source).read_bytes()
    if len(raw) < 8 or raw[4:8] != b"TFL3":
        raise ValueError("not a TFLite flatbuffer (no 'TFL3' identifier)")
    try:
        model = _Table(raw, struct.unpack_from("<I", raw, 0)[0])
        opcodes = [_opcode(t) for t in model.tables(1)]
        buffers = [_buffer_data(t, raw) for t in model.tables(4)]
        subgraphs = model.tables(2)
        if not subgraphs:
            raise ValueError("the TFLite file has no subgraph")
        sg = subgraphs[0]
        tensors = [_tensor(i, t, buffers) for i, t in enumerate(sg.tables(0))]
        ops = []
        for i, t in enumerate(sg.tables(3)):
            oc = opcodes[int(t.scalar(0, "I", 0))]
            ops.append(Operator(i, oc.name, oc.version, t.scalars(1, "i"), t.scalars(2, "i"),
                                t.table(4), oc.custom))
        metadata = {}
        for m in model.tables(6):
            b = int(m.scalar(1, "I", 0))
            metadata[m.string(0) or ""] = buffers[b] if 0 <= b < len(buffers) else b""
    except (struct.error, IndexError) as e:
        raise ValueError(f"malformed TFLite flatbuffer: {e}") from e
    return TFLiteModel(opcodes, tensors, ops, sg.scalars(1, "i"), sg.scalars(2, "i"),
                       len(subgraphs), metadata)
