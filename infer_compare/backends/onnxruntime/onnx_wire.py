"""Reading the parts of an ONNX file that the executed-precision inspection needs, without the
``onnx`` package: a torch-free, converter-free device (a bundle's ``run``) then inspects ONNX Runtime's
optimized graph as the workstation does, instead of reporting "not inspected".

``read_model(path)`` returns duck-typed objects with the fields of ``onnx.ModelProto`` that
``backends/onnxruntime/graph.summarize`` reads: ``graph.node[i].{op_type, domain, input, output,
attribute[j].{name, i}}``, ``graph.initializer[i].{name, data_type}``, ``graph.input[i].{name,
type.tensor_type.elem_type}``. Decoded straight from the protobuf wire format (field numbers from
onnx/onnx.proto3); other fields, tensor payloads included, are skipped, never copied.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import SimpleNamespace

# onnx.proto3 field numbers
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_INPUT = 1, 5, 11
_NODE_INPUT, _NODE_OUTPUT, _NODE_OP_TYPE, _NODE_ATTRIBUTE, _NODE_DOMAIN = 1, 2, 4, 5, 7
_ATTR_NAME, _ATTR_I = 1, 3
_TENSOR_DIMS, _TENSOR_DATA_TYPE, _TENSOR_INT32_DATA, _TENSOR_NAME, _TENSOR_RAW_DATA = 1, 2, 5, 8, 9
_INT8_TYPES = (2, 3)  # TensorProto.UINT8, TensorProto.INT8
_VALUE_NAME, _VALUE_TYPE, _TYPE_TENSOR, _TENSOR_ELEM_TYPE = 1, 2, 1, 1


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise WireError("truncated or overlong varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def fields(buf: memoryview) -> Iterator[tuple[int, int | memoryview]]:
    """(field number, value): an int for varints and fixed-width fields, a memoryview for bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, pos = _varint(buf, pos)
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            val, pos = int.from_bytes(buf[pos:pos + width], "little"), pos + width
        elif wire == 2:
            n, pos = _varint(buf, pos)
            if pos + n > len(buf):
                raise WireError("length-delimited field runs past the end")
            val, pos = buf[pos:pos + n], pos + n
        else:
            raise WireError(f"unsupported wire type {wire}")
        yield num, val


def _text(v) -> str:
    return bytes(v).decode("utf-8", errors="replace")


def _node(buf: memoryview) -> SimpleNamespace:
    n = SimpleNamespace(op_type="", domain="", input=[], output=[], attribute=[])
    for num, v in fields(buf):
        if num == _NODE_INPUT:
            n.input.append(_text(v))
        elif num == _NODE_OUTPUT:
            n.output.append(_text(v))
        elif num == _NODE_OP_TYPE:
            n.op_type = _text(v)
        elif num == _NODE_DOMAIN:
            n.domain = _text(v)
        elif num == _NODE_ATTRIBUTE:
            a = SimpleNamespace(name="", i=0)
            for anum, av in fields(v):
                if anum == _ATTR_NAME:
                    a.name = _text(av)
                elif anum == _ATTR_I:
                    a.i = av - (1 << 64) if av >= 1 << 63 else av  # int64 as a varint
            n.attribute.append(a)
    return n


def _packed(v) -> list[int]:
    """A repeated integer field: one varint, or a packed run of them."""
    if isinstance(v, int):
        return [v]
    out, pos = [], 0
    while pos < len(v):
        x, pos = _varint(v, pos)
        out.append(x)
    return out


def _initializer(buf: memoryview) -> SimpleNamespace:
    t = SimpleNamespace(name="", data_type=0, dims=[], raw=None)
    ints: list[int] = []
    for num, v in fields(buf):
        if num == _TENSOR_DATA_TYPE:
            t.data_type = v
        elif num == _TENSOR_NAME:
            t.name = _text(v)
        elif num == _TENSOR_DIMS:
            t.dims.extend(_packed(v))
        elif num == _TENSOR_RAW_DATA:
            t.raw = v
        elif num == _TENSOR_INT32_DATA:
            ints.extend(_packed(v))
    if t.data_type not in _INT8_TYPES:
        t.raw = None  # only the int8 payloads are kept (views into the file's bytes, not copies)
    elif t.raw is None and ints:
        t.raw = bytes((x - (1 << 64) if x >= 1 << 63 else x) & 0xFF for x in ints)
    return t


def _value_info(buf: memoryview) -> SimpleNamespace:
    elem = 0
    name = ""
    for num, v in fields(buf):
        if num == _VALUE_NAME:
            name = _text(v)
        elif num == _VALUE_TYPE:
            for tnum, tv in fields(v):
                if tnum == _TYPE_TENSOR:
                    elem = next((e for enum, e in fields(tv) if enum == _TENSOR_ELEM_TYPE), 0)
    return SimpleNamespace(name=name, type=SimpleNamespace(tensor_type=SimpleNamespace(elem_type=elem)))


def parse_model(data: bytes) -> SimpleNamespace:
    graph = SimpleNamespace(node=[], initializer=[], input=[])
    for num, v in fields(memoryview(data)):
        if num != _MODEL_GRAPH:
            continue
        for gnum, gv in fields(v):
            if gnum == _GRAPH_NODE:
                graph.node.append(_node(gv))
            elif gnum == _GRAPH_INITIALIZER:
                graph.initializer.append(_initializer(gv))
            elif gnum == _GRAPH_INPUT:
                graph.input.append(_value_info(gv))
    return SimpleNamespace(graph=graph)


def read_model(path: str | os.PathLike) -> SimpleNamespace:
    """The graph of the ONNX file at ``path`` (see the module docstring). Raises WireError or OSError."""
    with open(path, "rb") as f:
        return parse_model(f.read())
