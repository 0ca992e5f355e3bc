"""The edge path with files made elsewhere (issue 38): a .tflite with a dynamic signature sized by --data or
--input-shape, pre-built artifacts that do not match the model (one line, exit 2, no traceback), converter
refusals remembered, int8 of a model with If subgraphs sorted, the int8 TFLite row with float outputs
labelled. Hand-made TFLite files (tests/test_edgetpu_precheck.py's builder) stand in for the registry's
files where a test must not depend on a download: the melspectrogram front end of openWakeWord has the same
signature ([-1, -1] allocated as [1, 1]) and was run the same way by hand
(benchmarks/results/field-models.md)."""

from __future__ import annotations

import numpy as np
import pytest

from infer_compare.base.errors import UsageError

from .conftest import FAST
from .test_edgetpu_precheck import C, T, build

interp = pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert needed")


def _dynamic_audio_file(tmp_path):
    """x float32 [1, 1] with signature [-1, -1] -> ABS -> MUL 2 -> y [-1, -1]: an audio front end's shape."""
    raw = build([T("x", [1, 1], "float32", sig=[-1, -1]), T("a", [1, 1], "float32", sig=[-1, -1]),
                 C("two", [2.0], "float32", shape=[1]), T("y", [1, 1], "float32", sig=[-1, -1])],
                [("ABS", ["x"], ["a"], None), ("MUL", ["a", "two"], ["y"], None)], ["x"], ["y"])
    p = tmp_path / "frontend.tflite"
    p.write_bytes(raw)
    return p


def _image_file(tmp_path, name, hw, outputs=1):
    """x float32 [1, hw, hw, 3] -> ABS (and NEG, RELU ... for more outputs)."""
    ops = ["ABS", "NEG", "RELU", "RELU6", "TANH"][:outputs]
    tensors = [T("x", [1, hw, hw, 3], "float32")] + [T(f"y{i}", [1, hw, hw, 3], "float32")
                                                     for i in range(outputs)]
    p = tmp_path / name
    p.write_bytes(build(tensors, [(op, ["x"], [f"y{i}"], None) for i, op in enumerate(ops)], ["x"],
                        [f"y{i}" for i in range(outputs)]))
    return p


def test_a_dynamic_signature_is_read_and_sized_by_the_data(tmp_path):
    from infer_compare.prepare.tflite_file import load_tflite

    path = str(_dynamic_audio_file(tmp_path))
    with pytest.raises(UsageError, match=r"dynamic dimension 1 \('\?'\) with no size: "
                                         r"give it with --input-shape x:1xN"):
        load_tflite(path)
    um = load_tflite(path, data_shapes={"": (1280,)})
    assert um.inputs[0].shape == ("batch", 1280)
    assert any("dynamic inputs (shape signature)" in n and "1280" in n for n in um.notes)
    assert load_tflite(path, input_shapes={None: (1, 640)}).inputs[0].shape == ("batch", 640)


def test_a_dynamic_tflite_model_runs_on_its_data(tmp_path, cache_dir):
    from infer_compare import compare

    data = tmp_path / "audio.npy"
    x = np.random.default_rng(0).standard_normal((6, 1280)).astype(np.float32)
    np.save(data, x)
    rep = compare(str(_dynamic_audio_file(tmp_path)), data={"data": str(data)}, backends=["tflite"],
                  batch_sizes=[1, 3], cache_dir=cache_dir, **FAST, max_time_s=0.2)
    rows = [r for r in rep.rows if r.backend == "tflite" and r.batch_size]
    assert {r.batch_size for r in rows} == {1, 3} and all(r.status == "ok" for r in rows), \
        [(r.status, r.reason) for r in rows]
    assert all(r.options.get("input_resized") for r in rows)  # sized from the data, said in the row


def test_the_runner_resizes_a_dynamic_file_to_what_it_is_fed(tmp_path):
    from infer_compare.backends.runner import RunOptions
    from infer_compare.backends.tflite.run import TFLiteRunner

    r = TFLiteRunner(str(_dynamic_audio_file(tmp_path)), "cpu", RunOptions(precision="fp32", batch_size=2))
    r.load()
    x = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32)
    got = r.to_numpy(r.run(r.prepare(x)))
    assert np.array_equal(got, 2 * np.abs(x))  # the values themselves, not just a shape


def test_an_artifact_that_does_not_match_the_model_is_one_line_and_exit_2(tmp_path, cache_dir, capsys):
    from infer_compare.cli import main

    model = _image_file(tmp_path, "model.tflite", 32)
    data = tmp_path / "x.npy"
    np.save(data, np.random.default_rng(0).random((4, 32, 32, 3), np.float32))
    base = ["--model", str(model), "--data", str(data), "--backends", "tflite", "--precisions", "fp32", "-b",
            "1", "--max-time", "0.2",
            "-o", str(tmp_path / "out")]
    cases = {"five.tflite": (_image_file(tmp_path, "five.tflite", 32, outputs=5),
                             "it has 5 output(s), the model 1"),
             "big.tflite": (_image_file(tmp_path, "big.tflite", 64),
                            "input 'x' is 1x64x64x3; the model's takes")}
    for path, said in cases.values():
        code = main([*base, "--artifact", str(path)])
        err = capsys.readouterr().err
        assert code == 2, err
        lines = [ln for ln in err.splitlines() if "error" in ln]
        assert len(lines) == 1 and said in lines[0] and path.name in lines[0], err
        assert "Traceback" not in err
    # a matching file runs
    assert main([*base, "--artifact", str(_image_file(tmp_path, "same.tflite", 32))]) == 0


def test_the_check_reads_onnx_and_accepts_nhwc_and_dynamic_sizes():
    from infer_compare.artifacts.given_check import Side, _input_problems, _output_problems

    sample = [("x", (3, 48, 192), "f")]
    assert not _input_problems([Side("a", (1, 48, 192, 3), "f")], sample)  # NHWC file, NCHW model
    assert not _input_problems([Side("a", (None, 3, None, None), "f")], sample)  # dynamic
    assert not _input_problems([Side("a", (1, 3, 48, 192), "q")], sample)  # quantized: takes real values
    assert "takes integers" in _input_problems([Side("a", (1, 3, 48, 192), "i")], sample)[0]
    assert "holds" not in " ".join(_output_problems([Side("y", (1, 2), "f")], [("o", (2,))]))
    assert "values per sample" in _output_problems([Side("y", (1, 5), "f")], [("o", (2,))])[0]


def test_the_check_reads_an_ir_in_either_attribute_order(tmp_path):
    from infer_compare.artifacts.given_check import Side, _ir

    for data in ('shape="?,1,32,32" element_type="f32"', 'element_type="f32" shape="?,1,32,32"'):
        p = tmp_path / "m.xml"
        p.write_text('<net><layers><layer id="0" name="input" type="Parameter" '
                     f'version="opset1">\n<data {data} /></layer></layers></net>')
        assert _ir(str(p)) == ([Side("", (None, 1, 32, 32), "f")], None)
    p.write_text("<net><layers></layers></net>")
    assert _ir(str(p)) == (None, None)  # nothing found: not checked, never "0 inputs"


def test_a_refusal_is_remembered_and_replayed(tmp_path):
    from infer_compare.artifacts.chain import ArtifactChain, ModelSource, Unbuilt
    from infer_compare.backends.exporter import ExportContext
    from infer_compare.base.cache import Cache
    from infer_compare.base.errors import ExportRefused
    from infer_compare.base.records import ExportRecord, ModelInfo

    calls = []

    class Refuses:
        @classmethod
        def cache_extras(cls, ctx, precision):
            return {"converter": "1.0"}

        def export(self, ctx, source, out, precision):
            calls.append(precision)
            raise ExportRefused("TFLite fp32 conversion failed: torch.export stopped at ONNX node "
                                "Slice_34 (Slice)")

    from infer_compare.catalog.formats import get_format

    info = ModelInfo("m", "user-onnx", "file", "m.onnx", "h", (3, 8, 8), 2)
    src = ExportRecord("onnx", "fp32", str(tmp_path / "m.onnx"), 1, 0.0, True, key="k")
    reasons = []
    for _ in range(2):
        chain = ArtifactChain(ExportContext(model=None, model_name="m", input_shape=(3, 8, 8), num_classes=2,
                                            calibration=None), Cache(tmp_path / "c"), ModelSource(info),
                              isolated=False)
        got = chain._build(get_format("tflite"), "fp32", Refuses, chain.ctx, src)
        assert isinstance(got, Unbuilt) and got.status == "export_failed"
        reasons.append(got.reason)
    assert calls == ["fp32"]  # converted once; the second run replays the reason
    assert "Slice_34 (Slice)" in reasons[1] and "remembered from" in reasons[1]
    chain = ArtifactChain(chain.ctx, Cache(tmp_path / "c", enabled=False), ModelSource(info), isolated=False)
    chain._build(get_format("tflite"), "fp32", Refuses, chain.ctx, src)
    assert calls == ["fp32", "fp32"]  # --no-cache tries again


def test_int8_of_a_model_with_if_subgraphs_is_sorted(tmp_path):
    onnx = pytest.importorskip("onnx")
    from infer_compare.backends.onnxruntime.export import _sort_subgraph_reads

    from .test_onnx_subgraph_sort import _model_with_if_before_its_producer

    p = tmp_path / "m.onnx"
    onnx.save(_model_with_if_before_its_producer(), str(p))
    with pytest.raises(Exception, match="topologically sorted"):
        onnx.checker.check_model(str(p), full_check=True)
    _sort_subgraph_reads(p)
    onnx.checker.check_model(str(p), full_check=True)


def test_an_int8_file_with_float_ends_is_labelled():
    from infer_compare.backends.tflite.bindings import Tensor
    from infer_compare.backends.tflite.run import _float_io

    i8 = Tensor(0, "x", "x", np.dtype("int8"), 0.1, 0, (1, 4))
    f32 = Tensor(1, "y", "y", np.dtype("float32"), 0.0, 0, (1, 2))
    assert _float_io("int8", [i8], [f32]) == ", float output"
    assert _float_io("int8", [f32], [f32]) == ", float input and output"
    assert _float_io("int8", [i8], [i8]) == "" and _float_io("fp32", [f32], [f32]) == ""


def _resize_slice_onnx(computed_starts: bool = False):
    """x [1, 3, 8, 8] -> Resize (constant scales x2) -> Slice (constant starts/ends/axes/steps, a negative
    step on W) -> y; with ``computed_starts`` the Slice's starts come from the data (ArgMax), as no folding
    can fix."""
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
             numpy_helper.from_array(np.array([], np.float32), "roi"),
             numpy_helper.from_array(np.array([1, 15], np.int64), "starts"),
             numpy_helper.from_array(np.array([9, -100], np.int64), "ends"),
             numpy_helper.from_array(np.array([2, 3], np.int64), "axes"),
             numpy_helper.from_array(np.array([2, -3], np.int64), "steps")]
    nodes = [helper.make_node("Resize", ["x", "roi", "scales"], ["r"], name="up/Resize", mode="nearest"),
             helper.make_node("Slice", ["r", "s", "ends", "axes", "steps"], ["y"], name="cut/Slice")]
    if computed_starts:
        nodes.insert(1, helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0))
        nodes.insert(2, helper.make_node("Cast", ["m"], ["mi"], to=TensorProto.INT64))
        nodes.insert(3, helper.make_node("Concat", ["mi1", "mi1"], ["s"], axis=0))
        nodes.insert(3, helper.make_node("Unsqueeze", ["mi", "zero"], ["mi1"]))
        inits.append(numpy_helper.from_array(np.array([0], np.int64), "zero"))
    else:
        nodes.insert(1, helper.make_node("Identity", ["starts"], ["s"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_constant_inputs_are_folded_so_torch_export_traces_them(tmp_path):
    """Resize reading its scales and Slice reading its starts at run time stopped torch.export (YOLOv8,
    YOLOX); folded, the module exports and computes what ONNX Runtime computes."""
    torch = pytest.importorskip("torch")
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnx2torch")
    ort = pytest.importorskip("onnxruntime")
    from infer_compare.backends.tflite.convert_onnx import onnx_module

    p = tmp_path / "m.onnx"
    onnx.save(_resize_slice_onnx(), str(p))
    gm = onnx_module(str(p))
    assert gm.folded_constant_inputs == {"Resize": 1, "Slice": 1}
    x = np.random.default_rng(0).random((1, 3, 8, 8), np.float32)
    want = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = torch.export.export(gm, (torch.from_numpy(x),)).module()(torch.from_numpy(x)).numpy()
    assert got.shape == want.shape and np.allclose(got, want)


def test_a_node_torch_export_cannot_trace_is_named(tmp_path):
    torch = pytest.importorskip("torch")
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnx2torch")
    from infer_compare.backends.tflite.convert_constants import stopped_at
    from infer_compare.backends.tflite.convert_onnx import onnx_module

    p = tmp_path / "m.onnx"
    onnx.save(_resize_slice_onnx(computed_starts=True), str(p))
    gm = onnx_module(str(p))
    assert gm.folded_constant_inputs == {"Resize": 1}  # the Slice reads computed starts: left as it is
    with pytest.raises(Exception) as e:
        torch.export.export(gm, (torch.ones(1, 3, 8, 8),))
    named = stopped_at(e.value, gm)
    assert named is not None and named.endswith("(Slice)") and "cut" in named, (named, str(e.value)[:300])


def test_the_tensorrt_hint_names_cuda_python():
    from infer_compare.catalog import deps

    assert "cuda-python" in deps.hint("tensorrt") and "python3-libnvinfer" in deps.hint("tensorrt")


def test_a_stateful_file_is_said(tmp_path):
    """A file with resource variables (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE) gets its one line; a file
    without gets none."""
    from infer_compare.backends.tflite.common import resource_variables

    stateful = tmp_path / "state.tflite"
    stateful.write_bytes(build([T("x", [1, 4], "float32"), T("h", [], "int32"), T("v", [1, 4], "float32"),
                                T("y", [1, 4], "float32")],
                               [("VAR_HANDLE", [], ["h"], None), ("READ_VARIABLE", ["h"], ["v"], None),
                                ("ADD", ["x", "v"], ["y"], None), ("ASSIGN_VARIABLE", ["h", "y"], [], None)],
                               ["x"], ["y"]))
    line = resource_variables(str(stateful))
    assert line.startswith("stateful file: resource variables (ASSIGN_VARIABLE, READ_VARIABLE, VAR_HANDLE)")
    assert resource_variables(str(_dynamic_audio_file(tmp_path))) == ""
