"""Parity by what an output means (issue 24 c): output kinds inferred or given with --output-kind,
dense maps judged on mask agreement and errors relative to their scale, cosine only where the reference
is not near zero, rows at float rounding level never failing; torchvision's LRASPP segmentation model
(random weights) end to end on ONNX Runtime and OpenVINO."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

from infer_compare.base.records import ParityResult
from infer_compare.catalog.formats import TOLERANCES
from infer_compare.parity.kinds import (
    MAP,
    REGRESSION,
    SCORES,
    check_output_kinds,
    infer_kind,
    parse_output_kinds,
)
from infer_compare.parity.outputs import compare_kind, compare_outputs

FAST = ["--device", "cpu", "-b", "1", "--min-time", "0", "--min-iters", "2", "--warmup", "1", "--max-time",
        "0.2", "--parity-samples", "4", "-q"]


def _sigmoid_map(n=8, seed=0):
    """A text-detector-like probability map: almost all zeros, one blob in half the samples."""
    rng = np.random.default_rng(seed)
    ref = (rng.random((n, 1, 32, 32)) * 1e-9).astype(np.float32)
    for i in range(0, n, 2):
        ref[i, 0, 4:12, 6:20] = 0.97
    return ref


def test_kinds_inferred_from_shape_and_values():
    assert infer_kind(np.zeros((4, 10))) == SCORES
    assert infer_kind(np.zeros((4, 1))) == REGRESSION
    assert infer_kind(np.zeros((4, 21, 16, 16))) == MAP
    assert infer_kind(np.full((4, 32, 32), 0.2)) == MAP  # [N, H, W] probabilities
    assert infer_kind(np.full((4, 32, 32), 7.0)) == REGRESSION  # [N, boxes, values]: not probabilities
    assert infer_kind(np.zeros((4, 100, 4))) == REGRESSION


def test_almost_all_zero_map_with_rounding_errors_passes():
    """The issue's case: max abs error ~7e-6, cosine of the near-zero samples meaningless: fp32 passes."""
    ref = _sigmoid_map()
    out = ref + np.random.default_rng(1).normal(0, 2e-6, ref.shape).astype(np.float32)
    old = compare_kind(ref, out, TOLERANCES["fp32"], SCORES)  # judged as before: by cosine, it fails
    assert not old.passed and old.cosine_min < 0.5
    p = compare_kind(ref, out, TOLERANCES["fp32"])
    assert p.kind == MAP and p.passed, p.failures
    assert p.cosine_skipped == 4 and "left out on 4 of 8" in p.note
    assert p.mask_iou == 1.0 and p.top1_agreement is None
    assert p.metric and p.margin is not None and p.margin > 0


def test_rounding_level_never_fails_and_is_named():
    ref = np.random.default_rng(0).normal(0, 5, (4, 100, 4)).astype(np.float32)
    out = ref.copy()
    out[0, 0, 0] += np.float32(1e-6)  # about 5e-8 of the scale
    p = compare_kind(ref, out, TOLERANCES["fp32"], judge=True)
    assert p.passed and "rounding level" in p.metric and p.metric_limit == pytest.approx(5e-6)


def test_a_wrong_map_fails_on_mask_agreement_with_the_margin():
    ref = _sigmoid_map()
    out = ref.copy()
    out[0, 0, 4:12, 6:13] = 0.1  # half the blob lost
    p = compare_kind(ref, out, TOLERANCES["fp16"])
    assert not p.passed and p.kind == MAP
    assert any(f.startswith("mask IoU") and "off by" in f for f in p.failures), p.failures
    assert p.mask_iou == pytest.approx((1 + 1 + 1 + 1 + 1 + 1 + 1 + 0.5) / 8)
    assert p.margin < 0 and p.metric  # the deciding metric, failed by that much


def test_segmentation_logits_use_the_argmax_mask():
    rng = np.random.default_rng(0)
    ref = rng.normal(0, 3, (2, 5, 16, 16)).astype(np.float32)
    same = compare_kind(ref, ref + 1e-4, TOLERANCES["fp16"])
    assert same.passed and same.mask_iou == 1.0
    flipped = ref.copy()
    flipped[:, [0, 1]] = flipped[:, [1, 0]]  # two classes swapped
    bad = compare_kind(ref, flipped, TOLERANCES["fp16"])
    assert not bad.passed and bad.mask_iou < 0.9


def test_class_scores_keep_their_rules():
    ref = np.random.default_rng(0).normal(0, 3, (16, 10)).astype(np.float32)
    p = compare_kind(ref, ref + 0.01, TOLERANCES["fp32"])
    assert p.kind == SCORES and p.top1_agreement == 1.0 and not p.passed  # max rel error over fp32's 1e-3
    assert p.metric == "max abs error / max |reference|" and p.margin < 0


def test_several_outputs_with_given_kinds():
    rng = np.random.default_rng(0)
    ref = {"logits": rng.normal(0, 3, (6, 10)), "heat": _sigmoid_map(6)}
    got = compare_outputs(ref, {"logits": ref["logits"], "heat": ref["heat"] + 3e-6}, TOLERANCES["fp32"])
    assert got.passed and [p.kind for p in got.outputs] == [SCORES, MAP]
    forced = compare_outputs(ref, dict(ref), TOLERANCES["fp32"], kinds={"logits": REGRESSION})
    assert forced.outputs[0].kind == REGRESSION and forced.top1_agreement is None


def test_old_results_files_still_load():
    d = {"n": 4, "max_abs": 0.0, "mean_abs": 0.0, "rel_max": 0.0, "cosine_mean": 1.0, "cosine_min": 1.0,
         "top1_agreement": 1.0, "top5_agreement": None}
    p = ParityResult.from_dict(d)
    assert p.kind == "" and p.metric == "" and p.margin is None and p.cosine_skipped == 0


def test_output_kind_flags_are_checked():
    from infer_compare.base.errors import UsageError

    assert parse_output_kinds(["out=map", "boxes=boxes", "p=probabilities"]) == {"out": MAP,
                                                                                 "boxes": REGRESSION,
                                                                                 "p": MAP}
    for bad in ("out", "=map", "out=sausage"):
        with pytest.raises(UsageError, match="--output-kind"):
            parse_output_kinds([bad])
    with pytest.raises(UsageError, match="has no output 'nope'"):
        check_output_kinds({"nope": MAP}, {"out": (4, 21, 8, 8)})
    with pytest.raises(UsageError, match="does not fit"):
        check_output_kinds({"out": SCORES}, {"out": (4, 21, 8, 8)})


# ------------------------------------------------------------- torchvision's LRASPP, end to end


@pytest.fixture(scope="module")
def lraspp(tmp_path_factory):
    torch = pytest.importorskip("torch")
    tv = pytest.importorskip("torchvision")
    pytest.importorskip("onnxruntime")
    m = tv.models.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None).eval()

    class Out(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)["out"]

    path = tmp_path_factory.mktemp("lraspp") / "lraspp.onnx"
    kw = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.manual_seed(0)
    torch.onnx.export(Out(m), (torch.zeros(1, 3, 64, 64),), str(path), input_names=["x"],
                      output_names=["out"], dynamic_axes={"x": {0: "batch"}, "out": {0: "batch"}},
                      opset_version=17, **kw)
    return path


def test_lraspp_dense_map_rows_pass_by_mask_agreement(lraspp, cache_dir, tmp_path):
    from infer_compare.cli import main

    code = main(["--model", str(lraspp), "--backends", "onnxruntime,openvino", "--precisions", "fp32", *FAST,
                 "-o", str(tmp_path)])
    d = json.loads((tmp_path / "results.json").read_text())
    rows = [r for r in d["rows"] if r["status"] in ("ok", "parity_failed")]
    # 1: OpenVINO's skipped onnx fp32 row (it runs only the QDQ file)
    assert code in (0, 1) and len(rows) == 2, code
    assert all(r["status"] == "ok" for r in rows), [r["reason"] for r in rows]
    for r in rows:
        p = r["parity"]
        assert p["kind"] == "map" and p["mask_iou"] >= 0.99 and p["top1_agreement"] is None and p["metric"]
    md = (tmp_path / "results.md").read_text()
    assert "## Parity by output" in md and "map, judged by" in md
    assert any("judged as map" in n for n in d["model"]["notes"] + d.get("notes", []))


def test_output_kind_usage_errors_exit_2(lraspp, cache_dir, tmp_path, capsys):
    from infer_compare.cli import main

    for flag, says in (("nope=map", "has no output 'nope'"), ("out=scores", "does not fit"),
                       ("out=sausage", "unknown kind")):
        code = main(["--model", str(lraspp), "--backends", "onnxruntime", "--precisions", "fp32", *FAST,
                     "-o", str(tmp_path / flag.replace("=", "_")), "--output-kind", flag])
        err = capsys.readouterr().err
        assert code == 2 and says in err, err
    code = main(["--model", str(lraspp), "--backends", "onnxruntime", "--precisions", "fp32", *FAST,
                 "-o", str(tmp_path / "ok"), "--output-kind", "out=regression"])
    d = json.loads((tmp_path / "ok" / "results.json").read_text())
    assert code == 0 and {r["parity"]["kind"] for r in d["rows"] if r.get("parity")} == {"regression"}


def sigmoid_map_model(path) -> None:
    """A text-detector-like head: 3x3 Conv with a bias of -14, Sigmoid, [N, H, W]: almost all zeros."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = (np.random.default_rng(0).random((1, 3, 3, 3)) * 0.4).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["logit"], name="head", pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["logit"], ["p"], name="sigmoid"),
             helper.make_node("Squeeze", ["p", "axis"], ["prob"], name="squeeze")]
    g = helper.make_graph(nodes, "det",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 32, 32])],
                          [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["batch", 32, 32])],
                          [numpy_helper.from_array(w, "w"),
                           numpy_helper.from_array(np.array([-14.0], np.float32), "b"),
                           numpy_helper.from_array(np.array([1], np.int64), "axis")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))


def test_sigmoid_map_rows_pass_where_the_numbers_agree(cache_dir, tmp_path):
    pytest.importorskip("onnxruntime")
    from infer_compare.cli import main

    sigmoid_map_model(tmp_path / "det.onnx")
    code = main(["--model", str(tmp_path / "det.onnx"), "--backends", "onnxruntime,openvino", "--precisions",
                 "fp32,fp16", *FAST[:-3], "-q", "-o", str(tmp_path / "out")])
    d = json.loads((tmp_path / "out" / "results.json").read_text())
    rows = [r for r in d["rows"] if r.get("parity")]
    assert code in (0, 1) and len(rows) >= 2 and all(r["status"] == "ok" for r in rows), \
        [r["reason"] for r in rows]
    for r in rows:
        p = r["parity"]  # the photos leave most samples' maps near zero: their cosine is left out
        assert p["kind"] == "map" and p["cosine_skipped"] > 0 and p["mask_iou"] == 1.0 and \
            p["top5_agreement"] is None
