"""The fp16 and int8 ONNX files (converted from the fp32 ONNX with ONNX Runtime's tools)
and the rows that run them: ONNX Runtime CPU int8 / fp16, OpenVINO on the QDQ file.
LeNet-5 is trained on the digits (conftest), so its accuracy is a real figure."""

from __future__ import annotations

import subprocess
from collections import Counter

import numpy as np
import pytest

from infer_compare.base.records import OK, SKIPPED

from .conftest import FAST, PY, python_env

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")


@pytest.fixture(scope="module")
def report(cache_dir):
    from infer_compare import compare

    return compare("lenet5", backends=["onnxruntime", "openvino"], formats=["onnx"], devices=["cpu"],
                   batch_sizes=[1, 4], precisions=["fp32", "fp16", "int8"], cache_dir=cache_dir,
                   parity_every_batch=True, **FAST)


def _rows(rep, backend, precision):
    return [r for r in rep.rows if r.backend == backend and r.format == "onnx" and r.precision == precision
            and r.device == "cpu"]


def _ok(rep, backend, precision):
    rows = _rows(rep, backend, precision)
    assert rows, f"no {backend} onnx {precision} row"
    for r in rows:
        assert r.status == OK, (r.label, r.status, r.reason)
    return rows


def test_ort_int8_row_has_parity_and_accuracy_within_one_point(report):
    """What the tool promises on every CPU: the int8 tolerances of formats.TOLERANCES (mean and worst-sample
    cosine, top-1 agreement) and, for the trained LeNet-5, accuracy within one point of fp32."""
    from infer_compare.catalog.formats import TOLERANCES

    fp32 = {r.batch_size: r for r in _ok(report, "onnxruntime", "fp32")}
    for r in _ok(report, "onnxruntime", "int8"):
        assert r.parity is not None and r.parity.passed and r.parity.n == 450, r.parity
        assert abs(r.parity.accuracy - fp32[r.batch_size].parity.accuracy) <= 0.01, r.parity.accuracy
        assert r.parity.top1_agreement >= TOLERANCES["int8"].min_top1


def test_int8_recipe_follows_this_cpu(report):
    """The documented behaviour per ISA: on an x86 CPU whose U8S8 kernels can saturate (no VNNI, no AMX) the
    default (auto) recipe writes 7-bit weights (reduce_range); elsewhere full 8-bit weights. The file itself
    says which, and the row says what this CPU's kernels do with it."""
    from infer_compare.backends.onnxruntime.graph import int8_recipe
    from infer_compare.host.cpu_int8 import describe

    cpu = describe()
    r = _ok(report, "onnxruntime", "int8")[0]
    assert r.export.options["reduce_range"] is cpu.u8s8_saturates
    assert r.export.options["reduce_range_reason"].startswith("auto: "
                                                              + ("on" if cpu.u8s8_saturates else "off"))
    recipe = int8_recipe(onnx.load(r.export.path))
    assert recipe["scheme"] == "U8S8" and recipe["weight_bits"] == (7 if cpu.u8s8_saturates else 8)
    for r in _ok(report, "onnxruntime", "int8"):
        s = r.options["int8"]
        assert s["executed_scheme"] == "U8S8" and s["weight_bits"] == recipe["weight_bits"] and \
            s["cpu_int8_path"] == cpu.isa
        assert f"({recipe['scheme']}, {recipe['weight_bits']}-bit weights, {cpu.isa})" in r.exec_precision
        # the auto recipe never leaves a saturating file here
        assert ("can saturate" in s["kernels"]) is False


def test_ort_int8_row_states_the_integer_kernels_that_ran(report):
    for r in _ok(report, "onnxruntime", "int8"):
        g = r.extra["executed_graph"]
        n_int = sum(g.get("integer", {}).values())
        assert g["integer"].get("QLinearConv", 0) == 2  # LeNet's two convolutions run as integer kernels
        assert r.exec_precision.startswith(f"int8: {n_int} of {g['nodes']} nodes integer (U8S8, ")
        assert any("integer" in n and "Q/DQ" in n for n in r.notes)
        assert any(n.startswith("int8 on this CPU: executed as U8S8 with") for n in r.notes)


def test_openvino_int8_rows_name_their_kernels(report):
    """OpenVINO names the kernel of each layer (primitiveType): the row says which instruction set its int8
    kernels use and the precision of the layers left unquantized."""
    from infer_compare.backends.openvino.run import int8_kernel_isa

    for r in _ok(report, "openvino", "int8"):
        kernels = r.extra["int8_kernels"]
        assert kernels and all(k.endswith("_I8") for k in kernels), kernels
        isa = int8_kernel_isa(kernels)
        assert r.options["int8"]["kernels_isa"] == (isa or "not named by OpenVINO")
        assert r.options["int8"]["unquantized_ops_precision"] in ("fp32", "bf16", "fp16")
        if isa:
            assert r.exec_precision.endswith(f"({isa})")


def test_int8_file_contains_qdq_and_runs_as_integer_kernels(report, tmp_path):
    import onnxruntime as ort

    from infer_compare.backends.onnxruntime.graph import summarize

    r = _ok(report, "onnxruntime", "int8")[0]
    m = onnx.load(r.export.path)
    ops = Counter(n.op_type for n in m.graph.node)
    assert ops["QuantizeLinear"] > 0 and ops["DequantizeLinear"] > 0
    int8_weights = [t for t in m.graph.initializer if t.data_type == onnx.TensorProto.INT8
                    and len(t.dims) == 4]
    assert len(int8_weights) == 2  # per-channel int8 convolution weights
    assert r.export.options["format"] == "QDQ" and r.export.options["calibration"] == "MinMax"
    # the QDQ file itself is float compute between Q/DQ pairs; ONNX Runtime fuses them into integer kernels
    assert summarize(m).count("integer") == 0
    so = ort.SessionOptions()
    opt = str(tmp_path / "optimized.onnx")
    so.optimized_model_filepath = opt
    ort.InferenceSession(r.export.path, so, providers=["CPUExecutionProvider"])
    assert summarize(onnx.load(opt)).by_class["integer"]["QLinearConv"] == 2


def test_fp16_file_has_fp16_weights_and_fp32_io(report):
    rows = _ok(report, "onnxruntime", "fp16")
    m = onnx.load(rows[0].export.path)
    floats = Counter(onnx.helper.tensor_dtype_to_np_dtype(t.data_type).name for t in m.graph.initializer
                     if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16))
    assert floats == Counter({"float16": floats["float16"]}) and floats["float16"] >= 10
    assert [i.type.tensor_type.elem_type for i in m.graph.input] == [onnx.TensorProto.FLOAT]
    assert [o.type.tensor_type.elem_type for o in m.graph.output] == [onnx.TensorProto.FLOAT]
    assert rows[0].export.options["keep_io_types"] is True and \
        "float16" in rows[0].export.options["converter"]
    onnx.checker.check_model(m, full_check=True)  # topologically sorted after the conversion
    for r in rows:  # runs on the CPU, and the row says what it ran in
        assert r.exec_precision in ("fp32", "fp16") or r.exec_precision.startswith("fp16+fp32")
        assert r.parity.passed and r.parity.cosine_min > 0.9999
        assert "executed_graph" in r.extra


def test_openvino_runs_the_qdq_file_as_a_second_int8_route(report):
    from infer_compare.backends.openvino.run import OpenVinoRunner

    av = OpenVinoRunner.probe("cpu")
    if not av.available:
        pytest.skip(av.reason)
    for r in _ok(report, "openvino", "int8"):
        assert r.exec_precision.startswith("int8+") and "layers int8" in r.exec_precision
        assert any("second int8 route" in n for n in r.notes)
        assert r.parity.passed and r.parity.accuracy > 0.95
        assert r.extra["executed_layers"]["int8"].get("Convolution", 0) >= 1
    for p in ("fp32", "fp16"):
        for r in _rows(report, "openvino", p):
            assert r.status == SKIPPED and "int8 (QDQ) ONNX file" in r.reason


def _int8_scales(path) -> dict[str, float]:
    from onnx import numpy_helper

    m = onnx.load(path)
    return {t.name: float(numpy_helper.to_array(t)) for t in m.graph.initializer
            if t.name.endswith("_scale") and not t.dims}


def test_entropy_calibration_is_selectable_and_changes_the_cache_key(report, cache_dir):
    from infer_compare import compare

    rep = compare("lenet5", backends=["onnxruntime"], formats=["onnx"], precisions=["int8"], devices=["cpu"],
                  batch_sizes=[1], cache_dir=cache_dir,
                  runner_options={"onnxruntime": {"int8_calibration": "Entropy"}}, **FAST)
    ent = _ok(rep, "onnxruntime", "int8")[0]
    mm = _ok(report, "onnxruntime", "int8")[0]
    assert ent.export.options["calibration"] == "Entropy" and ent.export.key != mm.export.key
    assert ent.export.path != mm.export.path
    # real entropy calibration: some activation ranges are clipped below MinMax's (ORT's own 128/128-bin
    # default would leave a single candidate threshold, i.e. the MinMax ranges)
    a, b = _int8_scales(mm.export.path), _int8_scales(ent.export.path)
    assert a.keys() == b.keys() and any(b[k] < a[k] * 0.99 for k in a)
    assert abs(ent.parity.accuracy - mm.parity.accuracy) <= 0.01


def test_cache_key_follows_the_declared_options():
    from infer_compare.backends.exporter import ExportContext
    from infer_compare.backends.onnxruntime.export import OnnxInt8Exporter
    from infer_compare.backends.onnxruntime.options import OrtOptions

    calib = np.zeros((4, 1, 32, 32), np.float32)

    def key(**kw):
        ctx = ExportContext(None, "m", (1, 32, 32), 10, calib, options=OrtOptions(**kw))
        return OnnxInt8Exporter.cache_extras(ctx, "int8")

    assert key() != key(int8_calibration="Entropy") != key(int8_calibration="Percentile")
    assert key() != key(int8_scheme="S8S8")
    assert key() == key(io_binding=False)  # a session option does not change the file


def test_unknown_calibration_method_is_a_usage_error(cache_dir):
    from infer_compare import compare
    from infer_compare.base.errors import UsageError

    with pytest.raises(UsageError, match="int8_calibration must be one of MinMax, Entropy, Percentile"):
        compare("lenet5", formats=["onnx"], cache_dir=cache_dir,
                runner_options={"onnxruntime": {"int8_calibration": "KL"}})
    p = subprocess.run([PY, "-m", "infer_compare.cli", "--model", "lenet5", "--formats", "onnx",
                        "--onnx-int8-calibration", "KL", "--cache-dir", str(cache_dir)],
                       capture_output=True, text=True, env=python_env(), timeout=120)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "KL" in lines[0] and "Traceback" not in p.stderr


def test_pytorch_onnx_exporter_no_longer_writes_fp16():
    from infer_compare.backends.pytorch.export_onnx import OnnxExporter
    from infer_compare.base.errors import ExportError
    from infer_compare.catalog.formats import FORMATS, build_chain

    assert build_chain("onnx", "fp16") == [("pytorch", "fp32"), ("onnx", "fp32"), ("onnx", "fp16")]
    assert build_chain("onnx", "int8") == [("pytorch", "fp32"), ("onnx", "fp32"), ("onnx", "int8")]
    assert FORMATS["onnx"].exporter_for("fp16").endswith("OnnxFp16Exporter")
    with pytest.raises(ExportError, match="converted from it"):
        OnnxExporter().export(type("C", (), {"model": object(), "calibration": np.zeros((1, 1, 32, 32))})(),
                              None, None, "fp16")


def test_graph_classes_follow_the_element_types():
    from onnx import TensorProto, helper

    from infer_compare.backends.onnxruntime.graph import summarize

    init = [helper.make_tensor("s", TensorProto.FLOAT, [], [0.1]),
            helper.make_tensor("z", TensorProto.UINT8, [], [0]),
            helper.make_tensor("w", TensorProto.INT8, [2, 2], [1, 2, 3, 4])]
    nodes = [  # deliberately out of order: the converters append nodes, the summary sorts them
        helper.make_node("Relu", ["h"], ["h2"]),
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("Transpose", ["q"], ["qt"]),
        # no y_scale
        helper.make_node("QGemm", ["qt", "s", "z", "w", "s", "z"], ["f"], domain="com.microsoft"),
        helper.make_node("Relu", ["f"], ["r"]),
        helper.make_node("Cast", ["r"], ["h"], to=TensorProto.FLOAT16),
        helper.make_node("Shape", ["h2"], ["shape"]),
        helper.make_node("Gather", ["shape", "z"], ["dim"]),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                          [helper.make_tensor_value_info("dim", TensorProto.INT64, [])], init)
    s = summarize(helper.make_model(g))
    assert s.total == 8
    assert dict(s.by_class["integer"]) == {"Transpose": 1, "QGemm": 1}
    assert dict(s.by_class["quantize"]) == {"QuantizeLinear": 1} and dict(s.by_class["cast"]) == {"Cast": 1}
    assert dict(s.by_class["fp32"]) == {"Relu": 1} and dict(s.by_class["fp16"]) == {"Relu": 1}
    assert dict(s.by_class["other"]) == {"Shape": 1, "Gather": 1}


@pytest.mark.parametrize("prec,classes,label", [
    ("int8", {"integer": {"QLinearConv": 3}, "quantize": {"QuantizeLinear": 1}, "fp32": {"ReduceMean": 1}},
     "int8: 3 of 5 nodes integer"),
    ("int8", {"quantize": {"QuantizeLinear": 1}, "fp32": {"Conv": 2}}, "fp32: no integer kernel"),
    ("fp16", {"fp32": {"Conv": 2}, "cast": {"Cast": 1}}, "fp32"),
    ("fp16", {"fp16": {"Conv": 2}, "cast": {"Cast": 2}}, "fp16"),
    ("fp16", {"fp16": {"Conv": 2}, "fp32": {"Resize": 1}}, "fp16+fp32 (2 of 3 nodes fp16)"),
])
def test_exec_precision_labels(prec, classes, label):
    from infer_compare.backends.onnxruntime.graph import GraphSummary
    from infer_compare.backends.onnxruntime.run import OnnxRuntimeRunner
    from infer_compare.backends.runner import RunOptions

    r = OnnxRuntimeRunner("unused.onnx", "cpu", RunOptions(precision=prec))
    r._extra = {}
    g = GraphSummary(sum(sum(c.values()) for c in classes.values()),
                     {k: Counter(v) for k, v in classes.items()})
    r._describe(g, "test graph")
    assert r.exec_precision == label
    assert r._extra["executed_graph"]["nodes"] == g.total and r.notes
