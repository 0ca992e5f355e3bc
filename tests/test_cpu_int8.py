"""The CPU facts that change int8 results (host/cpu_int8.py), read the same way on every machine:
each CPU class from its flags, the reduce_range recipe it gets, what a QDQ file carries
(graph.int8_recipe), which TFLite ops XNNPACK takes, and OpenVINO's kernel names."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from infer_compare.backends.openvino.run import int8_kernel_isa
from infer_compare.backends.tflite.delegation import delegation
from infer_compare.host.cpu_int8 import describe, reduce_range_for

AVX2 = {"sse4_2", "avx", "avx2", "fma", "f16c"}
AVX512 = AVX2 | {"avx512f", "avx512bw", "avx512vl", "avx512dq"}
CASES = [  # (machine, flags, isa, saturates)
    ("x86_64", AVX2, "AVX2 (no VNNI)", True),
    ("x86_64", AVX512, "AVX-512 (no VNNI)", True),
    ("x86_64", AVX512 | {"avx512_vnni"}, "AVX-512 VNNI", False),
    ("x86_64", AVX2 | {"avx_vnni"}, "AVX-VNNI", False),
    ("x86_64", AVX512 | {"avx512_vnni", "amx_tile", "amx_int8", "amx_bf16"}, "AMX-INT8", False),
    ("aarch64", {"fp", "asimd", "asimddp"}, "NEON dot product", False),
    ("aarch64", {"fp", "asimd"}, "NEON", False),
]


@pytest.mark.parametrize("machine,flags,isa,saturates", CASES)
def test_each_cpu_class_is_named_with_its_saturation(machine, flags, isa, saturates):
    cpu = describe(machine, flags)
    assert (cpu.isa, cpu.u8s8_saturates) == (isa, saturates)
    rr, why = reduce_range_for("auto", "U8S8", cpu)
    assert rr is saturates and why.startswith(f"auto: {'on' if saturates else 'off'}") and isa in why
    # ONNX Runtime runs S8S8 as U8S8 on x86: the same rule
    assert reduce_range_for("auto", "S8S8", cpu)[0] is saturates
    assert reduce_range_for("on", "S8S8", cpu)[0] is True and reduce_range_for("off", "U8S8", cpu)[0] is False


def test_kernel_sentence_warns_only_where_8bit_weights_can_saturate():
    avx2, vnni = describe("x86_64", AVX2), describe("x86_64", AVX512 | {"avx512_vnni"})
    assert "can saturate" in avx2.ort_kernel("U8S8", 8) and \
        "--onnx-int8-reduce-range on" in avx2.ort_kernel("U8S8", 8)
    assert "keep the int16 pair sums from saturating" in avx2.ort_kernel("U8S8", 7)
    assert "no saturation" in vnni.ort_kernel("U8S8", 8)
    assert "int8 activations kept" in vnni.ort_kernel("S8S8", 8)
    assert "SDOT/UDOT, int32 accumulation" in describe("aarch64", {"asimd", "asimddp"}).ort_kernel("S8S8", 8)


def test_this_machine_is_described_from_its_own_flags():
    from infer_compare.host.env import cpu_info

    cpu = describe()
    _name, flags = cpu_info()
    assert cpu.isa != "" and set(cpu.flags) <= set(flags) | {"asimddp", "i8mm"}


def _tiny_qdq(tmp_path, scheme: str, reduce_range: bool):
    """A two-conv ONNX network quantized with ONNX Runtime's own tools."""
    onnx = pytest.importorskip("onnx")
    q = pytest.importorskip("onnxruntime.quantization")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.normal(size=(4, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.normal(size=(2, 4, 1, 1)).astype(np.float32), "w2")
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Conv", ["r", "w2"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 6, 6])], [w1, w2])
    src, out = tmp_path / "f32.onnx", tmp_path / f"q-{scheme}-{reduce_range}.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(src))

    class Reader:
        def __init__(self):
            self.it = iter([{"x": rng.normal(size=(1, 3, 8, 8)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.it, None)

    act = q.QuantType.QUInt8 if scheme == "U8S8" else q.QuantType.QInt8
    q.quantize_static(str(src), str(out), Reader(), quant_format=q.QuantFormat.QDQ, per_channel=True,
                      reduce_range=reduce_range, activation_type=act, weight_type=q.QuantType.QInt8,
                      extra_options={"ActivationSymmetric": scheme == "S8S8", "WeightSymmetric": True})
    return onnx.load(str(out))


@pytest.mark.parametrize("scheme,reduce_range", [("U8S8", False), ("U8S8", True), ("S8S8", False)])
def test_int8_recipe_is_read_from_the_file(tmp_path, scheme, reduce_range):
    from infer_compare.backends.onnxruntime.graph import int8_recipe
    from infer_compare.backends.onnxruntime.onnx_wire import parse_model

    model = _tiny_qdq(tmp_path, scheme, reduce_range)
    r = int8_recipe(model)
    assert r["scheme"] == scheme and r["int8_weight_tensors"] == 2
    assert r["weight_bits"] == (7 if reduce_range else 8)
    assert r["weight_peak"] == (64 if reduce_range else 127)
    # a device without the onnx package reads the same from the wire format (raw_data)
    assert int8_recipe(parse_model(model.SerializeToString())) == r


def test_int8_recipe_from_the_wire_reads_int32_data_too():
    """An int8 tensor stored in int32_data (helper.make_tensor without raw) gives the same range."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from infer_compare.backends.onnxruntime.graph import int8_recipe
    from infer_compare.backends.onnxruntime.onnx_wire import parse_model

    w = helper.make_tensor("w", TensorProto.INT8, [2, 2], [-100, 3, 64, -7])
    zp = helper.make_tensor("zp", TensorProto.UINT8, [], [128])
    node = helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"])
    g = helper.make_graph([node], "g", [], [], [w, zp])
    model = helper.make_model(g)
    assert int8_recipe(parse_model(model.SerializeToString())) == int8_recipe(model) == {
        "scheme": "U8S8", "weight_bits": 8, "weight_peak": 100, "int8_weight_tensors": 1}


class _FakeInterpreter:
    def __init__(self, ops):
        self.ops = ops

    def _get_ops_details(self):
        return self.ops


def _op(i, name, ins, outs):
    return {"index": i, "op_name": name, "inputs": np.array(ins), "outputs": np.array(outs)}


def test_delegation_walks_each_partition_back_to_its_inputs():
    # conv -> pool -> quantize -> conv -> fc; XNNPACK took conv (0) and quantize+conv+fc (2, 3, 4), not the
    # pool (1)
    ops = [_op(0, "CONV_2D", [0, 10, 11], [1]), _op(1, "AVERAGE_POOL_2D", [1], [2]),
           _op(2, "QUANTIZE", [2], [3]), _op(3, "CONV_2D", [3, 12, 13], [4]),
           _op(4, "FULLY_CONNECTED", [4, 14], [5]),
           _op(5, "DELEGATE", [0, 10, 11], [1]), _op(6, "DELEGATE", [2, 12, 13, 14], [5])]
    d = delegation(_FakeInterpreter(ops))
    assert d.partitions == 2 and d.builtin == Counter({"AVERAGE_POOL_2D": 1})
    assert d.delegated == Counter({"CONV_2D": 2, "QUANTIZE": 1, "FULLY_CONNECTED": 1})
    assert "XNNPACK runs 4 of 5 ops in 2 partition(s)" in d.summary()
    none = delegation(_FakeInterpreter(ops[:5]))
    assert none.partitions == 0 and sum(none.builtin.values()) == 5 and "no op delegated" in none.summary()


def test_delegation_of_an_interpreter_that_lists_no_ops_is_unknown():
    assert delegation(object()) is None


@pytest.mark.parametrize("names,isa", [
    (["jit_avx2_I8", "jit_gemm_I8"], "AVX2 (no VNNI)"),
    (["brgconv_avx512_core_vnni_I8"], "AVX-512 VNNI"),
    (["brgconv_avx512_core_amx_I8", "brgemm_avx512_core_vnni_I8"], "AMX"),
    (["jit_gemm_I8"], ""),
])
def test_openvino_kernel_names_give_their_instruction_set(names, isa):
    assert int8_kernel_isa(Counter(names)) == isa
