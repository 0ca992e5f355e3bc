"""Detection heads spread over several outputs (parity/det_groups.py): SSD-style boxes + scores and the
post-NMS layout (boxes, scores, classes), found from shapes and values, and judged on detections."""

from __future__ import annotations

import numpy as np
import pytest

from infer_compare.base.errors import UsageError
from infer_compare.catalog.formats import TOLERANCES
from infer_compare.parity.det_groups import find_groups
from infer_compare.parity.outputs import compare_outputs

from .conftest import FAST


def tol(p: str = "fp16"):
    return TOLERANCES[p]


def ssd_outputs(n: int = 3, anchors: int = 400, classes: int = 3, softmax: bool = True, seed: int = 0):
    """{boxes [n, A, 4] corners in pixels, scores [n, A, C]}: a few confident objects per sample, the rest
    background."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 280, (n, anchors, 2))
    wh = rng.uniform(10, 40, (n, anchors, 2))
    boxes = np.concatenate([xy, xy + wh], -1).astype(np.float32)
    logits = rng.normal(0, 1, (n, anchors, classes)) - (0 if softmax else 4.0)
    logits[..., 0] += 7.0 if softmax else -7.0  # background wins on most anchors
    for i in range(n):
        for j in rng.choice(anchors, 6, replace=False):
            logits[i, j, int(rng.integers(1, classes))] += 9.0  # an object
    if softmax:
        e = np.exp(logits - logits.max(-1, keepdims=True))
        scores = e / e.sum(-1, keepdims=True)
    else:
        scores = 1 / (1 + np.exp(-logits))
    return {"boxes": boxes, "scores": scores.astype(np.float32)}


def post_nms_outputs(n: int = 3, k: int = 100, seed: int = 0):
    """{boxes [n, K, 4] (y1, x1, y2, x2 in 0-1, as TFLite_Detection_PostProcess gives them), scores [n, K]
    sorted, classes [n, K], num [n]}: 8 detections per sample, the rest padding."""
    rng = np.random.default_rng(seed)
    boxes, scores, classes = np.zeros((n, k, 4)), np.zeros((n, k)), np.zeros((n, k))
    for i in range(n):
        yx = rng.uniform(0, 0.8, (8, 2))
        boxes[i, :8] = np.concatenate([yx, yx + rng.uniform(0.05, 0.2, (8, 2))], -1)
        scores[i, :8] = np.sort(rng.uniform(0.3, 0.95, 8))[::-1]
        classes[i, :8] = rng.integers(0, 80, 8)
    return {"boxes": boxes.astype(np.float32), "scores": scores.astype(np.float32),
            "classes": classes.astype(np.float32), "num": np.full((n,), 8.0, np.float32)}


def test_ssd_pairs_are_found_softmax_or_not():
    g = find_groups(ssd_outputs())
    assert [(x.head.fmt, x.names) for x in g] == [("ssd", ("boxes", "scores"))]
    g = find_groups(ssd_outputs(softmax=False))
    assert [(x.head.fmt, x.names) for x in g] == [("ssd-nobg", ("boxes", "scores"))]


def test_centre_size_boxes_and_logits_are_not_taken_for_a_head():
    out = ssd_outputs()
    b = out["boxes"]
    centre = np.concatenate([(b[..., :2] + b[..., 2:]) / 2, b[..., 2:] - b[..., :2]], -1)  # cx, cy, w, h
    assert find_groups({"boxes": centre, "scores": out["scores"]}) == []
    # logits: raw heads, not judged so
    assert find_groups({"boxes": b, "scores": np.log(out["scores"])}) == []
    # the user's word
    assert find_groups({"boxes": b, "scores": out["scores"]}, {"scores": "regression"}) == []


def test_post_nms_outputs_are_found_and_the_count_is_left_alone():
    g = find_groups(post_nms_outputs())
    assert [(x.head.fmt, x.names) for x in g] == [("post-nms", ("boxes", "scores", "classes"))]


def test_an_ssd_row_that_loses_half_its_detections_fails_on_them():
    ref = ssd_outputs()
    same = compare_outputs(ref, {k: v.copy() for k, v in ref.items()}, tol("fp16"))
    assert same.passed and same.outputs[0].output == "boxes+scores"
    d = same.outputs[0].detections
    assert d["format"] == "ssd" and d["reference"] == 18 and d["kept"] == 18 and d["added"] == 0
    worse = {k: v.copy() for k, v in ref.items()}
    fg = worse["scores"][..., 1:]
    worse["scores"][..., 1:] = np.where(np.arange(fg.shape[1])[None, :, None] % 2 == 0, fg * 0.2, fg)
    r = compare_outputs(ref, worse, tol("fp16"))
    assert not r.passed and any("detections kept" in f for f in r.failures), r.failures
    assert 0 < r.outputs[0].detections["kept"] < 18


def test_post_nms_rows_in_another_order_keep_every_detection_and_moved_boxes_fail():
    ref = post_nms_outputs()
    order = np.arange(100)[::-1]
    shuffled = {k: (v[:, order] if v.ndim > 1 else v) for k, v in ref.items()}
    r = compare_outputs(ref, shuffled, tol("fp16"))
    assert r.passed and r.outputs[0].detections["kept"] == 24, r.failures
    moved = {k: v.copy() for k, v in ref.items()}
    moved["boxes"][:, :4] += 0.15  # four of eight boxes per sample moved by about their size
    r = compare_outputs(ref, moved, tol("fp16"))
    assert not r.passed and r.outputs[0].detections["kept"] == 12
    count = [p for p in r.outputs if p.output == "num"]
    assert count and count[0].passed  # the count output judged on its own, as values


def test_a_named_group_format_needs_its_partners():
    from infer_compare.prepare.model import _detection_groups

    class P:
        notes: list = []

    refs = {"scores": ssd_outputs()["scores"], "other": np.zeros((3, 7), np.float32)}
    with pytest.raises(UsageError, match="no partner outputs"):
        _detection_groups(P(), refs, {"scores": "detections:ssd"})
    p = P()
    assert _detection_groups(p, ssd_outputs(), {}) == {"boxes", "scores"}
    assert "judged together as detections" in p.notes[-1]


# ---------------------------------------------------------------- a trained detector in both layouts


def _reheaded(path, out, layout: str):
    """The DocLayNet YOLOv8n (its own trained weights, [1, 15, 21504]) with its head rewritten in ONNX to
    ``ssd`` (boxes [1, A, 4] corners + sigmoid scores [1, A, 11]) or ``post-nms`` (the ONNX NonMaxSuppression
    op, then the best 100 as boxes [1, 100, 4], scores [1, 100], classes [1, 100])."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    m = onnx.load(str(path))
    g = m.graph
    old = g.output[0].name
    consts = {"s0": [0], "s2": [2], "s4": [4], "e2": [2], "e4": [4], "e15": [15], "ax2": [2], "ax1": [1],
              "s1": [1], "e3": [3], "K": [100], "maxo": [100]}
    for k, v in consts.items():
        g.initializer.append(numpy_helper.from_array(np.asarray(v, np.int64), k))
    g.initializer.extend([numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in
                          {"half": 0.5, "iou": [0.45], "thr": [0.25], "z1": np.zeros(100),
                           "z4": np.zeros((100, 4))}.items()])
    n = helper.make_node
    nodes = [n("Transpose", [old], ["t"], perm=[0, 2, 1]), n("Slice", ["t", "s0", "e2", "ax2"], ["cxy"]),
             n("Slice", ["t", "e2", "e4", "ax2"], ["wh"]), n("Slice", ["t", "s4", "e15", "ax2"], ["scores"]),
             n("Mul", ["wh", "half"], ["hwh"]), n("Sub", ["cxy", "hwh"], ["p1"]),
             n("Add", ["cxy", "hwh"], ["p2"]), n("Concat", ["p1", "p2"], ["boxes"], axis=2)]
    outs = [("boxes", [1, 21504, 4]), ("scores", [1, 21504, 11])]
    if layout == "post-nms":
        nodes += [n("Transpose", ["scores"], ["st"], perm=[0, 2, 1]),
                  n("NonMaxSuppression", ["boxes", "st", "maxo", "iou", "thr"], ["sel"]),
                  n("Slice", ["sel", "s1", "e3", "ax1"], ["ci"]),
                  n("Slice", ["sel", "e2", "e3", "ax1"], ["bi"]),
                  n("Slice", ["sel", "s1", "e2", "ax1"], ["cl"]), n("Squeeze", ["st"], ["st0"], axes=[0]),
                  n("Squeeze", ["boxes"], ["b0"], axes=[0]), n("GatherND", ["st0", "ci"], ["sc"]),
                  n("Squeeze", ["bi"], ["bi1"], axes=[1]), n("Gather", ["b0", "bi1"], ["bx"], axis=0),
                  n("Squeeze", ["cl"], ["cl1"], axes=[1]), n("Cast", ["cl1"], ["clf"], to=TensorProto.FLOAT),
                  n("Concat", ["sc", "z1"], ["scp"], axis=0), n("Concat", ["bx", "z4"], ["bxp"], axis=0),
                  n("Concat", ["clf", "z1"], ["clp"], axis=0), n("TopK", ["scp", "K"], ["v", "ix"]),
                  n("Gather", ["bxp", "ix"], ["bk"], axis=0), n("Gather", ["clp", "ix"], ["ck"], axis=0),
                  n("Unsqueeze", ["bk"], ["det_boxes"], axes=[0]),
                  n("Unsqueeze", ["v"], ["det_scores"], axes=[0]),
                  n("Unsqueeze", ["ck"], ["det_classes"], axes=[0])]
        outs = [("det_boxes", [1, 100, 4]), ("det_scores", [1, 100]), ("det_classes", [1, 100])]
    for i, node in enumerate(nodes):
        node.name = f"/rehead/{node.op_type}_{i}"
    g.node.extend(nodes)
    del g.output[:]
    g.output.extend([helper.make_tensor_value_info(k, TensorProto.FLOAT, s) for k, s in outs])
    onnx.checker.check_model(m)
    onnx.save(m, str(out))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["ssd", "post-nms"])
def test_a_trained_detector_in_several_outputs_is_judged_on_its_detections(layout, cache_dir, tmp_path):
    """The DocLayNet YOLOv8n's own detections, given as SSD-style boxes + scores or as the post-NMS triple:
    recognized without being told, every fp32 and fp16 row judged on those detections and ok."""
    pytest.importorskip("onnxruntime")
    from infer_compare import compare

    from .test_detections import _doclaynet, document_pages
    from .test_field_models import backends

    model = _reheaded(_doclaynet(), tmp_path / f"{layout}.onnx", layout)
    data = tmp_path / "pages.npy"
    np.save(data, document_pages(3))
    rep = compare(str(model), data=str(data), backends=backends(), devices=["cpu"],
                  precisions=["fp32", "fp16", "int8"], batch_sizes=[1], cache_dir=cache_dir, **FAST,
                  max_time_s=0.3)
    rows = [r for r in rep.rows if r.device == "cpu" and r.parity is not None]
    assert {(r.backend, r.precision) for r in rows} >= {("onnxruntime", p) for p in ("fp32", "fp16", "int8")}
    for r in rows:
        det = next(p for p in r.parity.outputs if p.detections).detections
        assert det["format"] == ("ssd-nobg" if layout == "ssd" else "post-nms")
        assert det["reference"] >= 10 and r.status == "ok", (r.backend, r.precision, r.reason)
        assert det["kept"] >= 0.9 * (det["kept"] + det["lost"])
    # int8: the YOLO Concat the outputs are decoded from (through Slice, Transpose, NonMaxSuppression) in
    # float
    int8 = next(r for r in rows if r.backend == "onnxruntime" and r.precision == "int8")
    assert "mixed_scale_outputs" in int8.export.options
    assert any("judged together as detections" in n for n in rep.notes)
