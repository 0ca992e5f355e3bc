"""A failed fp16 or int8 ONNX row names the first node whose output diverges from the fp32 graph
(issue 24 d), with the remedy; --onnx-fp16-keep-fp32 applies it; the search never takes the row down."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from infer_compare.parity import divergence  # noqa: E402

FAST = ["--backends", "onnxruntime", "--device", "cpu", "-b", "1", "--min-time", "0", "--min-iters", "2",
        "--warmup", "1", "--max-time", "0.2", "--parity-samples", "4", "-q"]


def cancelling_model(path) -> None:
    """x -> Concat(x, x) -> 1x1 Conv whose weights 1e5 and -99999 cancel to x in fp32, but both clamp to
    +-65504 in fp16 (and quantize to +-127 steps of the same scale in int8): 0 -> ReduceMean."""
    from onnx import TensorProto, helper, numpy_helper

    w = np.zeros((3, 6, 1, 1), np.float32)
    for o in range(3):
        w[o, o], w[o, o + 3] = 1e5, -99999.0
    nodes = [helper.make_node("Concat", ["x", "x"], ["twice"], name="twice", axis=1),
             helper.make_node("Conv", ["twice", "w"], ["cancelled"], name="cancelling_conv"),
             helper.make_node("ReduceMean", ["cancelled"], ["y"], name="pool", axes=[2, 3], keepdims=0)]
    g = helper.make_graph(nodes, "cancel",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
                          [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(path))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("cancel") / "cancel.onnx"
    cancelling_model(path)
    return path


def _rows(out) -> list[dict]:
    return json.loads((out / "results.json").read_text())["rows"]


def test_failed_fp16_and_int8_rows_name_the_first_diverging_node(model, cache_dir, tmp_path):
    from infer_compare.cli import main

    code = main(["--model", str(model), "--precisions", "fp16,int8", *FAST, "-o", str(tmp_path)])
    rows = {r["precision"]: r for r in _rows(tmp_path) if r["status"] != "skipped"}
    assert code == 1 and {r["status"] for r in rows.values()} == {"parity_failed"}, rows
    for r in rows.values():
        assert "first diverging node: cancelling_conv (Conv), relative error 1 >" in r["reason"], r["reason"]
        d = r["extra"]["first_divergence"]
        assert (d["node"], d["op"], d["output"]) == ("cancelling_conv", "Conv", "cancelled") and \
            d["error"] > 0.5
        assert d["compared"] == 2  # twice, cancelled: the tensors both graphs have, in topological order
    assert "--onnx-fp16-keep-fp32 Conv" in rows["fp16"]["reason"]
    assert "--onnx-int8-exclude cancelling_conv" in rows["int8"]["reason"]
    md = (tmp_path / "results.md").read_text()
    assert "## Parity by output" in md and "first diverging node: cancelling_conv (Conv)" in md


def test_the_remedy_keeps_the_op_in_fp32_and_the_row_passes(model, cache_dir, tmp_path):
    from infer_compare.cli import main

    code = main(["--model", str(model), "--precisions", "fp16", *FAST, "-o", str(tmp_path),
                 "--onnx-fp16-keep-fp32", "Conv"])
    (r,) = [r for r in _rows(tmp_path) if r["precision"] == "fp16"]
    assert code == 0 and r["status"] == "ok", r["reason"]
    assert r["export"]["options"]["keep_fp32"] == ["Conv"] and "first_divergence" not in r["extra"]
    inits = {i.name: i.data_type for i in onnx.load(r["export"]["path"]).graph.initializer}
    assert inits["w"] == onnx.TensorProto.FLOAT  # the Conv's weights stay float32, unclamped


@pytest.mark.parametrize("exclude", ["cancelling_conv", "Conv"])  # by node name or by op type
def test_the_int8_remedy_leaves_the_node_unquantized(model, cache_dir, tmp_path, exclude):
    from infer_compare.cli import main

    main(["--model", str(model), "--precisions", "int8", *FAST, "-o", str(tmp_path), "--onnx-int8-exclude",
          exclude])
    (r,) = [r for r in _rows(tmp_path) if r["precision"] == "int8"]
    assert r["status"] in ("ok", "parity_failed"), r["reason"]
    assert r["export"]["options"]["excluded"] == {"asked": [exclude], "nodes": ["cancelling_conv"]}
    m = onnx.load(r["export"]["path"])
    conv = next(n for n in m.graph.node if n.op_type == "Conv")
    made = {o: n.op_type for n in m.graph.node for o in n.output}
    assert made.get(conv.input[1]) != "DequantizeLinear"  # its weights stay float, not int8 behind a DQ
    assert "--onnx-int8-exclude cancelling_conv" not in (r.get("reason") or "")


def test_an_int8_exclusion_that_matches_nothing_fails_the_export_saying_so(model, cache_dir, tmp_path):
    from infer_compare.cli import main

    main(["--model", str(model), "--precisions", "int8", *FAST, "-o", str(tmp_path),
          "--onnx-int8-exclude", "Nope"])
    (r,) = [r for r in _rows(tmp_path) if r["precision"] == "int8"]
    assert r["status"] == "export_failed" and "--onnx-int8-exclude Nope: no node" in r["reason"], r["reason"]


def test_identical_graphs_have_no_diverging_node(model):
    x = np.random.default_rng(0).normal(0, 1, (2, 3, 16, 16)).astype(np.float32)
    found = divergence.search(str(model), str(model), {"x": x}, 0.05)
    assert found == {"node": None, "compared": 3}
    assert "no node output" in divergence.describe(found, "fp16", 0.05)


def test_a_search_that_fails_leaves_the_row_its_reason(model, tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx file")
    art = SimpleNamespace(path=str(broken), source=str(model))
    prep = SimpleNamespace(ds=SimpleNamespace(eval=np.zeros((2, 3, 16, 16), np.float32)))
    text, d = divergence.explain(art, prep, "fp16", 5e-2)
    assert text.startswith("(first diverging node not found: ") and d["node"] is None
    with pytest.raises(RuntimeError, match="took more than"):
        divergence.run_child(str(model), str(model), {"x": np.zeros((1, 3, 16, 16), np.float32)}, 0.05,
                             timeout_s=0.01)


def test_openvino_on_the_qdq_file_names_it_too(model, cache_dir, tmp_path):
    pytest.importorskip("openvino")
    from infer_compare.cli import main

    args = [a if a != "onnxruntime" else "openvino" for a in FAST]
    main(["--model", str(model), "--formats", "onnx", "--precisions", "int8", *args, "-o", str(tmp_path)])
    (r,) = [r for r in _rows(tmp_path) if r["backend"] == "openvino" and r["precision"] == "int8"]
    assert r["status"] == "parity_failed" and "first diverging node: cancelling_conv (Conv)" in r["reason"]


def test_a_constant_fp16_cannot_hold_gets_no_false_remedy():
    """Measured on PaddleOCR's detector: keeping Constant (or its consumer) in fp32 did not change the row,
    so the reason says no remedy is known rather than offering one that does nothing."""
    from infer_compare.parity.divergence import remedy

    text = remedy("fp16", "Constant", "batch_norm_0.w_2")
    assert "--onnx-fp16-keep-fp32" not in text and "none known" in text
    assert "--onnx-fp16-keep-fp32 Conv" in remedy("fp16", "Conv", "c1")


def test_a_node_already_excluded_is_not_offered_again():
    found = {"node": "p2o.Clip.0", "op": "Clip", "error": 0.45}
    assert "--onnx-int8-exclude p2o.Clip.0" in divergence.describe(found, "int8", 0.1)
    text = divergence.describe(found, "int8", 0.1, excluded=("p2o.Clip.0",))
    assert "already left unquantized" in text and "--onnx-int8-exclude p2o.Clip.0" not in text
