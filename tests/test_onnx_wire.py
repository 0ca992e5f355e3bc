"""issue 23 point 9: the executed-precision inspection without the onnx package. onnx_wire reads
an ONNX file's graph as onnx.load does, for what graph.summarize reads; the summaries must agree
on ONNX Runtime's optimized graphs of the fp32, fp16 and int8 LeNet-5 files."""

from __future__ import annotations

import pytest

from infer_compare.backends.onnxruntime.onnx_wire import WireError, parse_model, read_model

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def onnx_files(cache_dir, tmp_path_factory):
    from infer_compare.bundle import export_bundle

    out = tmp_path_factory.mktemp("wire") / "b"
    man = export_bundle("lenet5", out, formats=["onnx"], precisions=["fp32", "fp16", "int8"],
                        cache_dir=cache_dir)
    return {a["precision"]: out / a["path"] for a in man["artifacts"] if a["format"] == "onnx"}


def _optimized(src, tmp_path):
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / f"opt-{src.stem}.onnx")
    ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
    return so.optimized_model_filepath


@pytest.mark.parametrize("prec", ["fp32", "fp16", "int8"])
def test_summary_without_onnx_matches_onnx_load(onnx_files, prec, tmp_path):
    from infer_compare.backends.onnxruntime.graph import summarize

    for path in (onnx_files[prec], _optimized(onnx_files[prec], tmp_path)):
        ref, got = onnx.load(str(path), load_external_data=False), read_model(path)
        assert [n.op_type for n in got.graph.node] == [n.op_type for n in ref.graph.node]
        assert [list(n.input) for n in got.graph.node] == [list(n.input) for n in ref.graph.node]
        assert [(t.name, t.data_type) for t in got.graph.initializer] == \
            [(t.name, t.data_type) for t in ref.graph.initializer]
        assert [(v.name, v.type.tensor_type.elem_type) for v in got.graph.input] == \
            [(v.name, v.type.tensor_type.elem_type) for v in ref.graph.input]
        a, b = summarize(got), summarize(ref)
        assert (a.total, a.by_class) == (b.total, b.by_class) and a.total > 0


def test_cast_attribute_and_garbage():
    from onnx import TensorProto, helper

    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT16)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1])])
    got = parse_model(helper.make_model(g).SerializeToString())
    (n,) = got.graph.node
    assert (n.op_type, n.attribute[0].name, n.attribute[0].i) == ("Cast", "to", TensorProto.FLOAT16)
    with pytest.raises(WireError):
        parse_model(b"\x3a\xff\xff\xff\xff\x0f")  # graph field longer than the data


_HIDE_ONNX = '''import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name == "onnx" or name.startswith("onnx."):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)")
sys.meta_path.insert(0, _Block())
'''


@pytest.mark.slow
def test_bundle_run_without_onnx_inspects_the_executed_precision(onnx_files, tmp_path):
    """The fp16 file on the CPU provider runs in fp32 (no fp16 kernels): a device without the onnx package
    must say so as the workstation does, not "fp16 (not inspected)"."""
    import subprocess

    from .conftest import PY, ROOT, python_env

    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(_HIDE_ONNX)
    env = python_env()
    env["PYTHONPATH"] = f"{hide}:{ROOT}"
    bundle = onnx_files["fp16"].parents[2]
    code = ("from infer_compare.bundle import run_bundle; import importlib.util as u\n"
            "try:\n    assert u.find_spec('onnx') is None\nexcept ImportError:\n    pass\n"
            f"rep = run_bundle({str(bundle)!r}, backends=['onnxruntime'], precisions=['fp16'], "
            "devices=['cpu'], batch_sizes=[1], min_time_s=0.02, max_time_s=0.05)\n"
            "print('EXEC', [r.exec_precision for r in rep.rows])")
    out = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "EXEC ['fp32']" in out.stdout, out.stdout[-500:]
