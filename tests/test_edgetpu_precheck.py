"""The static Edge TPU pre-check: the flatbuffer reader, the documented requirements, the prediction.

Hand-made TFLite files (written with the flatbuffers builder and the TFLite schema's object API
that ai-edge-litert ships) hold exactly the op, type or shape a check must reject, each beside a
variant that must pass; the int8 files that litert-torch builds here for LeNet-5 and MobileNet v2
are read, cross-checked against the LiteRT interpreter, and predicted. No edgetpu_compiler and
no Edge TPU were available: the predictions are compared with nothing but Coral's documentation.
"""

from __future__ import annotations

import collections
import struct

import numpy as np
import pytest

from infer_compare.backends.tflite import edgetpu_precheck as pc
from infer_compare.backends.tflite.tflite_file import BUILTIN_OPS, read_model

from .conftest import FAST

schema = pytest.importorskip("ai_edge_litert.schema_py_generated",
                             reason="ai-edge-litert (TFLite schema) needed")
flatbuffers = pytest.importorskip("flatbuffers")

TYPES = {"float32": 0, "int32": 2, "uint8": 3, "int8": 9}


def T(name, shape, dtype="int8", data=None, sig=None, scale=0.1, zp=0):  # noqa: N802 - a tensor spec
    return dict(name=name, shape=shape, dtype=dtype, data=data, sig=sig, scale=scale, zp=zp)


def C(name, values, dtype="int32", shape=None, scale=0.1, zp=0):  # noqa: N802 - a constant tensor spec
    arr = np.asarray(values, dtype=dtype)
    return T(name, list(shape or arr.shape), dtype, arr.tobytes(), scale=scale, zp=zp)


def _options(kind, **fields):
    obj = getattr(schema, kind + "T")()
    for k, v in fields.items():
        setattr(obj, k, v)
    return getattr(schema.BuiltinOptions, kind), obj


def build(tensors, ops, inputs, outputs, versions=None) -> bytes:
    """A one-subgraph TFLite flatbuffer. ops: (name, [input names], [output names], options or None)."""
    m = schema.ModelT()
    m.version, m.buffers, m.operatorCodes = 3, [schema.BufferT()], []
    index = {t["name"]: i for i, t in enumerate(tensors)}
    sg = schema.SubGraphT()
    sg.tensors, sg.operators = [], []
    for t in tensors:
        tt = schema.TensorT()
        tt.name, tt.shape, tt.type, tt.buffer = t["name"], t["shape"], TYPES[t["dtype"]], 0
        if t["sig"] is not None:
            tt.shapeSignature = t["sig"]
        if t["data"] is not None:
            buf = schema.BufferT()
            buf.data = np.frombuffer(t["data"], np.uint8)
            tt.buffer = len(m.buffers)
            m.buffers.append(buf)
        if t["dtype"] != "float32":
            q = schema.QuantizationParametersT()
            q.scale, q.zeroPoint = [float(t["scale"])], [int(t["zp"])]
            tt.quantization = q
        sg.tensors.append(tt)
    codes: dict[str, int] = {}
    for name, ins, outs, opts in ops:
        if name not in codes:
            oc = schema.OperatorCodeT()
            code = BUILTIN_OPS.index(name)
            oc.builtinCode, oc.deprecatedBuiltinCode = code, min(code, 127)
            oc.version = (versions or {}).get(name, 1)
            codes[name] = len(m.operatorCodes)
            m.operatorCodes.append(oc)
        op = schema.OperatorT()
        op.opcodeIndex = codes[name]
        op.inputs = [index[n] if n else -1 for n in ins]
        op.outputs = [index[n] for n in outs]
        if opts is not None:
            op.builtinOptionsType, op.builtinOptions = opts
        sg.operators.append(op)
    sg.inputs, sg.outputs = [index[n] for n in inputs], [index[n] for n in outputs]
    m.subgraphs = [sg]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def conv_pool(dilation=(1, 1), pool_act=0, sig=None, batch=1, x_dtype="int8", weights_const=True,
              conv_version=3) -> bytes:
    """x -> CONV_2D (3x3, SAME) -> MAX_POOL_2D (2x2): the all-good case, and one knob per check."""
    x = T("x", [batch, 8, 8, 3], x_dtype, sig=sig)
    w = (C("w", np.ones((4, 3, 3, 3)), "int8", scale=0.05) if weights_const
         else T("w", [4, 3, 3, 3], scale=0.05))
    tensors = [x, w, C("b", np.zeros(4), scale=0.005), T("y", [batch, 8, 8, 4], scale=0.2),
               T("z", [batch, 4, 4, 4], scale=0.2)]
    conv = _options("Conv2DOptions", padding=0, strideW=1, strideH=1, dilationWFactor=dilation[0],
                    dilationHFactor=dilation[1])
    pool = _options("Pool2DOptions", padding=1, strideW=2, strideH=2, filterWidth=2, filterHeight=2,
                    fusedActivationFunction=pool_act)
    ins = ["x"] if weights_const else ["x", "w"]
    return build(tensors, [("CONV_2D", ["x", "w", "b"], ["y"], conv), ("MAX_POOL_2D", ["y"], ["z"], pool)],
                 ins, ["z"], versions={"CONV_2D": conv_version})


def with_hard_swish() -> bytes:
    """CONV_2D -> HARD_SWISH (not in Coral's table) -> CONV_2D."""
    tensors = [T("x", [1, 8, 8, 3]), C("w", np.ones((4, 1, 1, 3)), "int8", scale=0.05),
               C("b", np.zeros(4), scale=0.005), T("y", [1, 8, 8, 4]), T("h", [1, 8, 8, 4]),
               C("w2", np.ones((2, 1, 1, 4)), "int8", scale=0.05), C("b2", np.zeros(2), scale=0.005),
               T("out", [1, 8, 8, 2])]
    conv = _options("Conv2DOptions", padding=0, strideW=1, strideH=1)
    return build(tensors, [("CONV_2D", ["x", "w", "b"], ["y"], conv), ("HARD_SWISH", ["y"], ["h"], None),
                           ("CONV_2D", ["h", "w2", "b2"], ["out"], conv)], ["x"], ["out"])


def float_first() -> bytes:
    """LOGISTIC on float32 (a supported op, on the wrong type) -> QUANTIZE -> CONV_2D."""
    tensors = [T("x", [1, 8, 8, 3], "float32"), T("f", [1, 8, 8, 3], "float32"),
               T("q", [1, 8, 8, 3], scale=1 / 256, zp=-128),
               C("w", np.ones((4, 1, 1, 3)), "int8", scale=0.05),
               C("b", np.zeros(4), scale=0.05 / 256), T("y", [1, 8, 8, 4])]
    conv = _options("Conv2DOptions", padding=0, strideW=1, strideH=1)
    return build(tensors, [("LOGISTIC", ["x"], ["f"], None), ("QUANTIZE", ["f"], ["q"], None),
                           ("CONV_2D", ["q", "w", "b"], ["y"], conv)], ["x"], ["y"])


def _run_in_litert(raw: bytes) -> np.ndarray:
    """The hand-made file is a real model: LiteRT loads and runs it."""
    interp = pytest.importorskip("ai_edge_litert.interpreter")
    it = interp.Interpreter(model_content=raw)
    it.allocate_tensors()
    d = it.get_input_details()[0]
    it.set_tensor(d["index"], np.ones(d["shape"], d["dtype"]))
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


# -- hand-made files ---------------------------------------------------------------------------

def test_good_file_maps_entirely_and_is_a_real_model():
    raw = conv_pool()
    assert _run_in_litert(raw).shape == (1, 4, 4, 4)
    m = read_model(raw)
    assert [(o.op, o.version) for o in m.operators] == [("CONV_2D", 3), ("MAX_POOL_2D", 1)]
    assert m.tensors[1].constant and m.tensors[1].type == "int8" and m.tensors[2].values() == [0, 0, 0, 0]
    pred = pc.precheck(raw)
    assert (pred["tpu_ops"], pred["total_ops"], pred["first_cpu_op"], pred["refused"]) == (2, 2, None, None)
    assert pred["summary"] == "2 of 2 ops would map to the Edge TPU"


@pytest.mark.parametrize("kwargs, index, reason", [
    (dict(dilation=(2, 1)), 0, "dilation differs in x and y (2 vs 1)"),
    (dict(pool_act=1), 1, "fused RELU activation"),
    (dict(sig=[-1, 8, 8, 3]), 0, "tensor 'x' has a dynamic size (shape signature [-1, 8, 8, 3])"),
    (dict(batch=2), 0, "only the 3 innermost dimensions may be larger than 1"),
    (dict(x_dtype="float32"), 0, "tensor 'x' is float32, not 8-bit quantized"),
    (dict(weights_const=False), 0, "its weights ('w') are not a compile-time constant"),
])
def test_each_documented_requirement_can_fail(kwargs, index, reason):
    pred = pc.precheck(conv_pool(**kwargs))
    first = pred["first_cpu_op"]
    assert first is not None and first["index"] == index and reason in first["reason"], pred["summary"]
    assert pred["tpu_ops"] == index and pred["cpu_ops"] == 2 - index
    assert pred["summary"].startswith(f"{index} of 2 ops would map to the Edge TPU; the first that "
                                      "would not is ")


def test_unsupported_op_ends_the_segment():
    raw = with_hard_swish()
    assert _run_in_litert(raw).shape == (1, 8, 8, 2)
    pred = pc.precheck(raw)
    assert pred["summary"] == ("1 of 3 ops would map to the Edge TPU; the first that would not is "
                               "HARD_SWISH (op 1) because HARD_SWISH is not in the Edge TPU's "
                               "supported-operations table")
    # the second CONV_2D is supported, but it comes after the first unmapped op: it runs on the CPU
    assert pred["ops"]["CONV_2D"] == {"count": 2, "tpu": 1, "cpu": 1}
    assert [p["op"] for p in pred["own_problems"]] == ["HARD_SWISH"]


def test_a_float_op_at_the_start_keeps_everything_on_the_cpu():
    raw = float_first()
    assert _run_in_litert(raw).shape == (1, 8, 8, 4)
    pred = pc.precheck(raw)
    assert pred["tpu_ops"] == 0 and pred["first_cpu_op"]["op"] == "LOGISTIC"
    assert "tensor 'x' is float32" in pred["first_cpu_op"]["reason"]
    assert {p["op"] for p in pred["own_problems"]} == {"LOGISTIC", "QUANTIZE"}  # QUANTIZE reads a float


def test_an_op_version_newer_than_compiler_16_refuses_the_file():
    pred = pc.precheck(conv_pool(conv_version=6))
    assert pred["refused"] and "CONV_2D version 6" in pred["refused"] and pred["tpu_ops"] == 0
    assert pred["summary"].startswith("0 of 2 ops would map to the Edge TPU: the compiler would "
                                      "refuse the file")
    assert pc.precheck(conv_pool(conv_version=5))["refused"] is None  # TF 2.4's CONV_2D v5: known
    tensors = [T("a", [1, 4]), T("b", [1, 4]), T("c", [1, 4])]
    unsure = pc.precheck(build(tensors, [("ADD", ["a", "b"], ["c"], None)], ["a", "b"], ["c"], {"ADD": 4}))
    assert unsure["tpu_ops"] == 1 and "uncertain: ADD version 4" in unsure["summary"]
    late = pc.precheck(build(tensors[:2], [("GELU", ["a"], ["b"], None)], ["a"], ["b"]))
    assert late["refused"] and "GELU" in late["refused"]


def _one_op(op, x, y, consts=(), opts=None, ins=None):
    tensors = [x, y, *consts]
    return pc.precheck(build(tensors,
                             [(op, ins or [x["name"]] + [c["name"] for c in consts], [y["name"]], opts)],
                             [x["name"]], [y["name"]]))


X4 = T("x", [1, 4, 4, 8])
LIMIT_CASES = {
    "pad xy": (True, "PAD", X4, T("y", [1, 6, 6, 8]), [C("p", [[0, 0], [1, 1], [1, 1], [0, 0]])], None),
    "pad batch": (False, "PAD", X4, T("y", [3, 4, 4, 8]), [C("p", [[1, 1], [0, 0], [0, 0], [0, 0]])],
                  "pads the batch"),
    "mean xy": (True, "MEAN", X4, T("y", [1, 8]), [C("a", [1, 2])], None),
    "mean batch": (False, "MEAN", X4, T("y", [4, 4, 8]), [C("a", [0])], "reduces the batch dimension"),
    "mean z of 8": (True, "MEAN", X4, T("y", [1, 4, 4]), [C("a", [3])], None),
    "mean z of 6": (False, "MEAN", T("x", [1, 4, 4, 6]), T("y", [1, 4, 4]),
                    [C("a", [-1])], "not a multiple of 4"),
    "slice stride 1": (True, "STRIDED_SLICE", X4, T("y", [1, 2, 2, 8]),
                       [C("s", [0, 0, 0, 0]), C("e", [1, 2, 2, 8]), C("st", [1, 1, 1, 1])], None),
    "slice stride 2": (False, "STRIDED_SLICE", X4, T("y", [1, 2, 2, 8]),
                       [C("s", [0, 0, 0, 0]), C("e", [1, 4, 4, 8]), C("st", [1, 2, 2, 1])],
                       "strides are [1, 2, 2, 1]"),
    "softmax 1-D": (True, "SOFTMAX", T("x", [1, 10]), T("y", [1, 10]), [], None),
    "softmax 2-D": (False, "SOFTMAX", T("x", [4, 10]), T("y", [4, 10]), [], "is not a 1-D tensor"),
    "softmax 20000": (False, "SOFTMAX", T("x", [1, 20000]), T("y", [1, 20000]), [], "at most 16,000"),
    "concat zero pad": (True, "CONCATENATION", X4, T("y", [1, 4, 4, 12]),
                        [C("k", np.full((1, 4, 4, 4), 3), "int8", zp=3)], None),
    "concat non-zero": (False, "CONCATENATION", X4, T("y", [1, 4, 4, 12]),
                        [C("k", np.full((1, 4, 4, 4), 5), "int8", zp=3)], "not all zeroes"),
    "fc 1-D out": (True, "FULLY_CONNECTED", T("x", [1, 16]), T("y", [1, 10]),
                   [C("w", np.ones((10, 16)), "int8"), C("b", np.zeros(10))], None),
    "fc 2-D out": (False, "FULLY_CONNECTED", T("x", [2, 16]), T("y", [2, 10]),
                   [C("w", np.ones((10, 16)), "int8"), C("b", np.zeros(10))], "is not one-dimensional"),
}


@pytest.mark.parametrize("case", sorted(LIMIT_CASES))
def test_operation_limits_from_coral_table(case):
    ok, op, x, y, consts, reason = LIMIT_CASES[case]
    opts = _options("ConcatenationOptions", axis=3) if op == "CONCATENATION" else None
    pred = _one_op(op, x, y, consts, opts)
    if ok:
        assert pred["tpu_ops"] == 1 and not pred["own_problems"], pred["summary"]
    else:
        assert pred["tpu_ops"] == 0 and reason in pred["first_cpu_op"]["reason"], pred["summary"]


def test_runtime_version_column():
    tensors = [T("x", [1, 4, 8]), T("y", [1, 8, 4]), C("perm", [0, 2, 1])]
    raw = build(tensors, [("TRANSPOSE", ["x", "perm"], ["y"], None)], ["x"], ["y"])
    assert pc.precheck(raw)["tpu_ops"] == 1  # compiler 16's default runtime (14) has TRANSPOSE
    old = pc.precheck(raw, runtime=13)
    assert old["tpu_ops"] == 0 and "needs Edge TPU runtime 14" in old["first_cpu_op"]["reason"]


def test_not_a_tflite_file(tmp_path):
    with pytest.raises(ValueError, match="TFL3"):
        read_model(b"\0" * 16)
    assert "could not read" in pc.precheck_summary(str(tmp_path / "missing.tflite"))
    assert pc.precheck_summary(None) == ""


def test_compare_note():
    pred = {"tpu_ops": 11, "total_ops": 11}
    assert pc.compare_note(pred, {"tpu_ops": 11, "total_ops": 11}) == \
        "pre-check predicted 11/11, compiler mapped 11/11"
    assert "they differ" in pc.compare_note(pred, {"tpu_ops": 9, "total_ops": 11})
    assert pc.compare_note(pred, None) == "pre-check predicted 11/11" and pc.compare_note(None, {}) is None


# -- the int8 files built here -----------------------------------------------------------------

def _int8_tflite(cache_dir, model: str) -> str:
    from infer_compare import compare
    from infer_compare.backends.tflite.export import TFLiteExporter

    av = TFLiteExporter.probe()
    if not av.available:
        pytest.skip(f"{av.reason} ({av.hint})")
    rep = compare(model, formats=["tflite"], precisions=["int8"], batch_sizes=[1], cache_dir=cache_dir,
                  calibration_samples=64, **FAST)
    rows = [r for r in rep.rows if r.backend == "tflite" and r.export is not None]
    assert rows, [(r.label, r.status, r.reason) for r in rep.rows]
    return rows[0].export.path


@pytest.fixture(scope="module")
def lenet_int8(cache_dir):
    return _int8_tflite(cache_dir, "lenet5")


@pytest.fixture(scope="module")
def mobilenet_int8(cache_dir):
    return _int8_tflite(cache_dir, "mobilenet_v2")


def _agrees_with_litert(path: str):
    """The reader sees the ops and tensor types that the LiteRT interpreter sees."""
    from infer_compare.backends.tflite.common import inspect_model

    m = read_model(path)
    info = inspect_model(path)
    assert len(m.operators) == info["n_ops"] and \
        dict(collections.Counter(o.op for o in m.operators)) == info["ops"]
    assert dict(collections.Counter(t.type for t in m.tensors)) == info["tensor_dtypes"]
    return m


@pytest.mark.slow
def test_lenet5_int8_prediction(lenet_int8):
    m = _agrees_with_litert(lenet_int8)
    pred = pc.precheck(lenet_int8)
    assert pred["refused"] is None and not pred["own_problems"], pred["summary"]
    assert pred["tpu_ops"] == pred["total_ops"] == len(m.operators)
    assert {"CONV_2D", "FULLY_CONNECTED"} <= set(pred["ops"])


@pytest.mark.slow
def test_mobilenet_v2_int8_prediction(mobilenet_int8):
    m = _agrees_with_litert(mobilenet_int8)
    pred = pc.precheck(mobilenet_int8)
    assert pred["refused"] is None and not pred["own_problems"], pred["summary"]
    assert pred["tpu_ops"] == pred["total_ops"] == len(m.operators)
    assert {"ADD", "CONV_2D", "DEPTHWISE_CONV_2D", "MEAN", "FULLY_CONNECTED"} <= set(pred["ops"])


def _patch(raw: bytes, what: str, index: int, fid: int, fmt: str, value: int) -> bytes:
    """The file with one scalar field changed in place (an op code's version, a tensor's type)."""
    from infer_compare.backends.tflite.tflite_file import _Table

    model = _Table(raw, struct.unpack_from("<I", raw, 0)[0])
    table = model.tables(1)[index] if what == "opcode" else model.tables(2)[0].tables(0)[index]
    off = table._field(fid)
    assert off, f"field {fid} is not stored in this {what}"
    out = bytearray(raw)
    struct.pack_into("<" + fmt, out, table.pos + off, value)
    return bytes(out)


@pytest.mark.slow
def test_the_checks_fail_on_an_altered_real_file(lenet_int8):
    """LeNet-5's real file, changed in one field: the pre-check must notice each change."""
    raw = open(lenet_int8, "rb").read()
    m = read_model(raw)
    conv = next(i for i, oc in enumerate(m.opcodes) if oc.name == "CONV_2D")
    pred = pc.precheck(_patch(raw, "opcode", conv, 2, "i", 6))
    assert pred["tpu_ops"] == 0 and "CONV_2D version 6" in pred["refused"]
    k = 3  # a mid-graph op: its output becomes float32
    out = m.operators[k].outputs[0]
    pred = pc.precheck(_patch(raw, "tensor", out, 1, "b", 0))
    assert pred["tpu_ops"] == k and "float32" in pred["first_cpu_op"]["reason"], pred["summary"]
