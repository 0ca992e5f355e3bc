"""torchvision's detection models as users export them (one image [3, H, W] in; boxes [K, 4], labels [K],
scores [K] out, K changing per image): wrapped to batch 1 with padded outputs (models/torchvision_det.py) and
judged as ``detections:torchvision`` on the detections kept and added (parity/detections.py).

The detector is torchvision's SSDlite320 MobileNetV3, exported here with ``torch.onnx.export``. No pretrained
weights are downloadable, so its weights are random: its BatchNorm statistics re-estimated on scikit-image
photos (random statistics make every feature ~1e-14 and every score 1/91), and its classification convs
re-drawn with std HEAD_STD (torchvision's 0.03 keeps every score under 0.05, below the 0.25 threshold), so
that it makes confident detections on the photos it is judged on. They are junk boxes, but they are the
model's own and each runtime must reproduce them."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from infer_compare.catalog.formats import TOLERANCES
from infer_compare.parity.outputs import compare_outputs

from .conftest import FAST

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
ort = pytest.importorskip("onnxruntime")
skdata = pytest.importorskip("skimage.data")

SIDE = 320
HEAD_STD = 0.3
KIND = "detections:torchvision"
NAMES = ("boxes", "labels", "scores")


def _photo(img: np.ndarray) -> np.ndarray:
    from skimage.transform import resize

    return np.ascontiguousarray(resize(img[..., :3], (SIDE, SIDE)).transpose(2, 0, 1), dtype=np.float32)


def photos() -> list[np.ndarray]:
    """Real photos (scikit-image's bundled data), 0-1 RGB [3, 320, 320], as torchvision's detectors take
    them."""
    return [_photo(f()) for f in (skdata.astronaut, skdata.coffee, skdata.chelsea, skdata.rocket, skdata.cat)]


class _Triple(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, image):
        d = self.m([image])[0]
        return d["boxes"], d["labels"], d["scores"]


@pytest.fixture(scope="module")
def detector(tmp_path_factory):
    """The exported SSDlite file (module docstring: random weights made to detect)."""
    torch.manual_seed(0)
    m = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None).eval()
    calib = [_photo(f()) for f in (skdata.immunohistochemistry, skdata.coffee, skdata.hubble_deep_field)]
    with torch.no_grad():
        for mod in m.backbone.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.reset_running_stats()
                mod.momentum = None
        m.backbone.train()
        m.backbone(m.transform([torch.from_numpy(c) for c in calib])[0].tensors)
        m.backbone.eval()
        for seq in m.head.classification_head.module_list:
            torch.nn.init.normal_(seq[-1].weight, std=HEAD_STD)
        path = tmp_path_factory.mktemp("tvdet") / "ssdlite.onnx"
        torch.onnx.export(_Triple(m), (torch.from_numpy(photos()[0]),), str(path), dynamo=False,
                          opset_version=17, input_names=["image"], output_names=list(NAMES),
                          dynamic_axes={k: {0: "K"} for k in NAMES})
    return path


def _run(path, images) -> list[dict[str, np.ndarray]]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [dict(zip(NAMES, sess.run(list(NAMES), {"image": x}), strict=True)) for x in images]


def _padded(outs: list[dict[str, np.ndarray]], width: int | None = None) -> dict[str, np.ndarray]:
    """Per-image ragged outputs as rows padded with zeros to ``width`` (default: the largest K)."""
    width = width or max(len(o["scores"]) for o in outs)
    pad = {k: [np.pad(o[k], ((0, width - len(o[k])),) + ((0, 0),) * (o[k].ndim - 1)) for o in outs]
           for k in NAMES}
    return {k: np.stack(v) for k, v in pad.items()}


# ---------------------------------------------------------------- the wrapper


def test_the_file_is_recognized_and_its_wrapper_gives_the_same_detections_padded(detector, tmp_path):
    import onnx

    from infer_compare.models.torchvision_det import PAD_WIDTH, find_triple, wrap

    model = onnx.load(str(detector))
    triple = find_triple(model)
    assert triple is not None and triple.outputs == ("boxes", "labels", "scores") and triple.image == "image"
    out = tmp_path / "wrapped.onnx"
    onnx.save(wrap(model, triple), str(out))
    onnx.checker.check_model(str(out), full_check=True)
    images = photos()
    raw, got = _run(detector, images), _run(out, [x[None] for x in images])
    ks = [len(r["scores"]) for r in raw]
    assert max(ks) > 0
    for r, g in zip(raw, got, strict=True):
        k = len(r["scores"])
        assert g["boxes"].shape == (1, PAD_WIDTH, 4) and \
            g["labels"].shape == g["scores"].shape == (1, PAD_WIDTH)
        for name in NAMES:
            np.testing.assert_array_equal(g[name][0, :k], r[name])
            assert not np.any(g[name][0, k:])  # padding: zeros, below any score threshold


def test_a_classifier_or_a_batched_detector_is_not_taken_for_one():
    from onnx import TensorProto, helper

    from infer_compare.models.torchvision_det import find_triple

    def model(in_shape, outs):
        g = helper.make_graph([helper.make_node("Identity", ["x"], [o[0]]) for o in outs[:1]], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outs])
        return helper.make_model(g)

    triple = [("b", TensorProto.FLOAT, ["K", 4]), ("l", TensorProto.INT64, ["K"]),
              ("s", TensorProto.FLOAT, ["K"])]
    assert find_triple(model([3, 64, 64], triple)) is not None
    assert find_triple(model([1, 3, 64, 64], triple)) is None  # a batch axis: not torchvision's layout
    assert find_triple(model([3, 64, 64], [("y", TensorProto.FLOAT, ["N", 1000])])) is None
    mixed = [triple[0], triple[1], ("s", TensorProto.FLOAT, ["M"])]  # K not shared
    assert find_triple(model([3, 64, 64], mixed)) is None


# ---------------------------------------------------------------- parity on ragged detections


@pytest.fixture(scope="module")
def reference(detector):
    images = photos()
    raw = _run(detector, images)
    assert sum(int((r["scores"] >= 0.25).sum()) for r in raw) >= 10, \
        "the detector must find something to judge"
    return images, raw


def test_the_same_detections_in_other_k_widths_are_kept_n_of_n(reference):
    _, raw = reference
    ref = _padded(raw, 1000)
    row = _padded(raw)  # the same detections, padded to another K: ragged widths are fitted, not refused
    res = compare_outputs(ref, row, TOLERANCES["fp32"], kinds={k: KIND for k in NAMES})
    det = res.outputs[0].detections
    n = det["reference"]
    assert res.passed and det["format"] == "torchvision" and n >= 10
    assert det["kept"] == n and det["added"] == 0 and det["lost"] == 0
    assert f"detections: {n} of {n} kept, 0 added" in res.outputs[0].note


def test_moved_boxes_and_lost_detections_fail_on_the_detections(reference):
    _, raw = reference
    ref = _padded(raw)
    kinds = {k: KIND for k in NAMES}
    moved = {k: v.copy() for k, v in ref.items()}
    w = moved["boxes"][..., 2] - moved["boxes"][..., 0]
    moved["boxes"][..., 0] += 0.6 * w  # every box shifted right by 60 % of its width: IoU < 0.5
    moved["boxes"][..., 2] += 0.6 * w
    res = compare_outputs(ref, moved, TOLERANCES["fp16"], kinds=kinds)
    # a shifted box may still overlap another of its class (SSD keeps overlaps)
    det = res.outputs[0].detections
    assert not res.passed and det["kept"] < 0.5 * (det["kept"] + det["lost"])
    assert any("detections kept" in f for f in res.failures)
    fewer = [{k: v[::2] for k, v in r.items()} for r in raw]  # every other detection lost
    res = compare_outputs(ref, _padded(fewer), TOLERANCES["fp16"], kinds=kinds)
    det = res.outputs[0].detections
    assert not res.passed and det["lost"] > 0 and det["kept"] < det["reference"]
    rescored = {k: v.copy() for k, v in ref.items()}
    rescored["scores"] = np.where(rescored["scores"] > 0, np.clip(rescored["scores"] - 0.2, 0.26, 1.0), 0.0)
    res = compare_outputs(ref, rescored, TOLERANCES["fp16"], kinds=kinds)
    assert not res.passed and any("score error" in f for f in res.failures)


def test_a_row_that_adds_detections_where_the_reference_has_none_fails():
    ref = {"boxes": np.zeros((2, 5, 4), np.float32), "labels": np.zeros((2, 5), np.int64),
           "scores": np.zeros((2, 5), np.float32)}
    row = {k: v.copy() for k, v in ref.items()}
    row["boxes"][0, 0], row["labels"][0, 0], row["scores"][0, 0] = [10, 10, 50, 50], 3, 0.9
    kinds = {k: KIND for k in NAMES}
    assert compare_outputs(ref, ref, TOLERANCES["fp32"], kinds=kinds).passed
    res = compare_outputs(ref, row, TOLERANCES["fp32"], kinds=kinds)
    assert not res.passed and res.outputs[0].detections["added"] == 1


# ---------------------------------------------------------------- end to end


@pytest.mark.slow
def test_the_exported_detector_is_measured_and_judged_on_its_detections(detector, cache_dir):
    """`--model ssdlite.onnx`: ONNX Runtime (and OpenVINO) fp32 rows at batch 1 judged on the detections they
    keep, N of N; batch 2 a skipped row that says why."""
    from infer_compare import compare

    backends = ["onnxruntime"] + (["openvino"] if importlib.util.find_spec("openvino") else [])
    rep = compare(str(detector), backends=backends, devices=["cpu"], precisions=["fp32"], batch_sizes=[1, 2],
                  cache_dir=cache_dir, parity_samples=8, **FAST, max_time_s=0.3)
    rows = [r for r in rep.rows if r.device == "cpu" and r.parity is not None]
    assert {r.backend for r in rows} == set(backends)
    for r in rows:
        det = r.parity.outputs[0].detections
        assert r.batch_size == 1 and r.status == "ok", (r.backend, r.format, r.reason)
        assert det["format"] == "torchvision" and det["reference"] >= 5
        assert det["kept"] == det["reference"] and det["added"] == 0, (r.backend, det)
    skipped = [r for r in rep.rows if r.batch_size == 2]
    assert skipped and all(r.status == "skipped" and "static batch of 1" in r.reason for r in skipped)
    assert rep.model.weights_source == str(detector)
    assert any("measured through a wrapper" in n for n in rep.model.notes)
    assert rep.model.preprocessing["mean"] == [0.0, 0.0, 0.0]  # torchvision's detectors normalize inside
