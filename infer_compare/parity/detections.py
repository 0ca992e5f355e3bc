"""Detections: a detector's head judged by what it finds, not by the numbers of one tensor.

A YOLO-family head concatenates box coordinates (pixels, or offsets in grid cells) with objectness and
class probabilities (0-1) in one tensor: judged against one max |reference| (the boxes'), a score error of
0.8 hides under 0.3 % of the box scale, and int8 that quantizes every score to 0 keeps a 0.999 cosine.
So the head is decoded, as the model's users decode it, and judged on:

* detections kept: reference detections (score >= SCORE_THRESHOLD after class-aware NMS at NMS_IOU) that
  the row finds too (same class, IoU >= MATCH_IOU); a reference detection whose score is within the
  precision's error of the threshold may be lost without failing (a near-threshold detection, reported);
* detections added: the row's detections that the reference does not make (again not counting those near
  the threshold), as a share of the reference's;
* the matched boxes' mean IoU, and the matched detections' mean score error (the largest is in the note):
  each part of the tensor against its own scale.

Formats (``--output-kind NAME=detections:FORMAT``, or recognized from shape and value ranges):
``yolo`` [N, anchors, 4 + 1 + classes] (YOLOv5, YOLOX: cx, cy, w, h, objectness, class probabilities),
``yolov8`` [N, 4 + classes, anchors] (YOLOv8/11: no objectness), ``yolo-noobj`` [N, anchors, 4 + classes].
``+grid`` adds YOLOX's undecoded boxes: offsets in cells of a grid of strides 8, 16, 32 over the input
(recognized when the anchor count is that grid's and the values are small). Heads in several outputs
(parity/det_groups.py stacks them into one [N, anchors, values] array for the same decoding):
``ssd`` boxes [N, anchors, 4] (corners) with softmax scores [N, anchors, classes] whose class 0 is the
background (UltraFace, torchvision's SSD decoded), ``ssd-nobg`` the same with independent (sigmoid) scores;
``post-nms`` the model's own final detections, boxes [N, K, 4], scores [N, K], classes [N, K] (the TF Object
Detection API's and TFLite_Detection_PostProcess's layout, padded to K): kept as they are, no NMS again.
Boxes in corner form are compared by IoU, which is the same for (x1, y1, x2, y2) and (y1, x1, y2, x2).
Decoding and NMS are numpy ports of torchvision's ``box_iou`` and ``batched_nms``, so that a bundle measured
without torch judges the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from infer_compare.base.records import ParityResult
from infer_compare.catalog.formats import Tolerance
from infer_compare.parity.checks import checks_result, cosines

SCORE_THRESHOLD = 0.25
NMS_IOU = 0.45
MATCH_IOU = 0.5
MAX_CANDIDATES = 1000  # before NMS, the highest scores
STRIDES = (8, 16, 32)
MIN_ANCHORS = 64
INT8_SCORE_ERR = 0.1  # int8's allowed score error (it has no max_rel_err of its own)
# heads in several outputs (parity/det_groups.py)
GROUP_FORMATS = ("ssd", "ssd-nobg", "post-nms", "torchvision")
OWN_NMS = ("post-nms", "torchvision")  # the model's own final detections: no NMS again
FORMATS = ("yolo", "yolov8", "yolo-noobj", *GROUP_FORMATS)
# the matched boxes' mean IoU never needs to be above 1 - 2 x (1 - min top-1), nor under this
MIN_BOX_IOU = 0.85


@dataclass(frozen=True)
class Head:
    fmt: str  # one of FORMATS
    grid: tuple[int, int] | None = None  # (H, W) of the input when boxes are grid offsets (+grid)

    @property
    def spec(self) -> str:
        return f"{self.fmt}+grid@{self.grid[0]}x{self.grid[1]}" if self.grid else self.fmt

    @property
    def objectness(self) -> bool:
        return self.fmt == "yolo"

    @property
    def corners(self) -> bool:
        """Boxes given as corners (the several-output heads), not centre and size."""
        return self.fmt in GROUP_FORMATS

    def text(self) -> str:
        layout = {"yolo": "[N, anchors, 4 box + objectness + classes]",
                  "yolov8": "[N, 4 box + classes, anchors]", "yolo-noobj": "[N, anchors, 4 box + classes]",
                  "ssd": "boxes [N, anchors, 4] corners + softmax scores [N, anchors, classes], "
                         "class 0 background",
                  "ssd-nobg": "boxes [N, anchors, 4] corners + scores [N, anchors, classes]",
                  "post-nms": "the model's final detections: boxes [N, K, 4], scores [N, K], classes [N, K]; "
                              "no NMS again",
                  "torchvision": "torchvision's detection outputs: boxes [K, 4], labels [K], scores [K] "
                                 "per image, K changing; no NMS again, compared as matched detections, "
                                 "never by position"}[self.fmt]
        grid = (f"; boxes are offsets in grid cells, decoded with strides {', '.join(map(str, STRIDES))} "
                f"over {self.grid[0]}x{self.grid[1]}") if self.grid else ""
        return (f"{self.fmt}: {layout}{grid}; kept and added at score >= {SCORE_THRESHOLD}, class-aware "
                f"NMS at IoU {NMS_IOU}, matched at IoU >= {MATCH_IOU}")


def parse_head(spec: str, input_hw: tuple[int, int] | None = None) -> Head:
    """``yolo``, ``yolov8+grid``, ``yolo+grid@416x416``... as a Head; ``+grid`` without a size takes
    ``input_hw``. A ValueError names the formats."""
    fmt, plus, size = spec.partition("+grid")
    if fmt not in FORMATS:
        raise ValueError(f"unknown detections format {fmt!r}; formats: {', '.join(FORMATS)} (+grid for "
                         "YOLOX offsets)")
    if not plus:
        return Head(fmt)
    if fmt in GROUP_FORMATS:
        raise ValueError(f"detections:{spec}: +grid is for YOLOX heads; {fmt} boxes are corners")
    h, _, w = size.lstrip("@").partition("x")
    hw = (int(h), int(w)) if h and w else input_hw
    if hw is None:
        raise ValueError(f"detections:{spec}: the grid needs the input's size (+grid@HxW)")
    return Head(fmt, tuple(hw))


def grid_anchors(h: int, w: int) -> int:
    return sum((h // s) * (w // s) for s in STRIDES)


def _rows(a: np.ndarray, head: Head) -> np.ndarray:
    """[N, anchors, K] whatever the head's layout."""
    return np.swapaxes(a, 1, 2) if head.fmt == "yolov8" else a


def recognize(ref: np.ndarray, input_hw: tuple[int, int] | None = None) -> Head | None:
    """The head format of a reference output [N, A, K] or [N, K, A], or None when it does not look like one:
    one axis of at least MIN_ANCHORS anchors, the other 5 to 4 + 1 + 1000 wide, every value after the four
    box columns a probability."""
    a = np.asarray(ref)
    if a.ndim != 3 or not np.isfinite(a).all():
        return None
    for fmt in ("yolo", "yolov8"):
        rows = _rows(a, Head(fmt))
        n_anchors, k = rows.shape[1:]
        if n_anchors < MIN_ANCHORS or not 5 <= k <= 1005 or n_anchors <= k:
            continue
        probs, boxes = rows[..., 4:], rows[..., :4]
        # not scores (an SSD's [N, A, classes])
        pixels = float(boxes.max()) > 1.5 or float(boxes.min()) < -0.5
        if pixels and probs.size and float(probs.min()) >= 0.0 and float(probs.max()) <= 1.0:
            grid = None
            if input_hw and n_anchors == grid_anchors(*input_hw) and float(np.abs(rows[..., :4]).max()) < 32:
                grid = tuple(input_hw)
            return Head("yolo" if fmt == "yolo" and k >= 6 else ("yolo-noobj" if fmt == "yolo" else fmt),
                        grid)
    return None


def _grid(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    cells, strides = [], []
    for s in STRIDES:
        ys, xs = np.meshgrid(np.arange(h // s), np.arange(w // s), indexing="ij")
        cells.append(np.stack([xs.ravel(), ys.ravel()], 1))
        strides.append(np.full((xs.size, 1), s))
    return np.concatenate(cells).astype(np.float64), np.concatenate(strides).astype(np.float64)


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of ``a`` [M, 4] with every box of ``b`` [K, 4], xyxy (torchvision.ops.box_iou)."""
    area_a = np.clip(a[:, 2] - a[:, 0], 0, None) * np.clip(a[:, 3] - a[:, 1], 0, None)
    area_b = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
    lt, rb = np.maximum(a[:, None, :2], b[None, :, :2]), np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def batched_nms(boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray, iou: float) -> np.ndarray:
    """Indices kept by class-aware greedy NMS, highest score first (torchvision.ops.batched_nms: the boxes of
    each class offset so that classes never overlap)."""
    if not len(boxes):
        return np.zeros(0, dtype=np.int64)
    shifted = boxes + (labels * (float(boxes.max()) + 1.0))[:, None]
    order, keep = np.argsort(-scores, kind="stable"), []
    while order.size:
        i = order[0]
        keep.append(i)
        if order.size == 1:
            break
        order = order[1:][box_iou(shifted[i:i + 1], shifted[order[1:]])[0] <= iou]
    return np.asarray(keep, dtype=np.int64)


def decode(sample: np.ndarray, head: Head, threshold: float = SCORE_THRESHOLD):
    """(boxes xyxy [M, 4], scores [M], classes [M]) of one sample's head [A, K] (or [K, A] for yolov8)."""
    rows = np.asarray(sample, dtype=np.float64)
    rows = rows.T if head.fmt == "yolov8" else rows
    scores, labels = _scores(rows, head)
    idx = np.flatnonzero(scores >= threshold)
    idx = idx[np.argsort(-scores[idx], kind="stable")][:MAX_CANDIDATES]
    boxes = _corners(rows, head)[idx]
    if head.fmt in OWN_NMS:  # the model's own detections: NMS already done
        return boxes, scores[idx], labels[idx]
    keep = batched_nms(boxes, scores[idx], labels[idx], NMS_IOU)
    return boxes[keep], scores[idx][keep], labels[idx][keep]


def _scores(rows: np.ndarray, head: Head) -> tuple[np.ndarray, np.ndarray]:
    """(score, class) of each anchor: its best class (its probability, times objectness where there is one);
    ``post-nms`` and ``torchvision`` rows are [box, score, class]; ``ssd``'s class 0, the background, never
    wins."""
    if head.fmt in OWN_NMS:
        return rows[:, 4], np.rint(rows[:, 5]).astype(np.int64)
    cls = rows[:, 5:] if head.objectness or head.fmt == "ssd" else rows[:, 4:]
    scores = cls.max(1) * (rows[:, 4] if head.objectness else 1.0) if cls.shape[1] else np.zeros(len(rows))
    return scores, (cls.argmax(1) if cls.shape[1] else np.zeros(len(rows), np.int64))


def _corners(rows: np.ndarray, head: Head) -> np.ndarray:
    """Every anchor's box as corners [A, 4]."""
    if head.corners:
        return rows[:, :4]
    xy, wh = rows[:, :2], rows[:, 2:4]
    if head.grid:
        cells, strides = _grid(*head.grid)
        xy, wh = (xy + cells) * strides, np.exp(np.clip(wh, -20, 20)) * strides
    return np.concatenate([xy - wh / 2, xy + wh / 2], 1)


def match(ref, cand) -> list[tuple[int, int, float]]:
    """(reference index, candidate index, IoU) pairs: each reference detection, highest score first, takes the
    unmatched candidate of its class with the highest IoU >= MATCH_IOU."""
    (rb, rs, rl), (cb, _, cl) = ref, cand
    if not len(rb) or not len(cb):
        return []
    ious, used, out = box_iou(rb, cb), set(), []
    for i in np.argsort(-rs, kind="stable"):
        ok = [(ious[i, j], j) for j in range(len(cb)) if j not in used and cl[j] == rl[i]
              and ious[i, j] >= MATCH_IOU]
        if ok:
            v, j = max(ok)
            used.add(j)
            out.append((int(i), int(j), float(v)))
    return out


def limits(tol: Tolerance) -> tuple[float, float, float]:
    """(detections kept, matched boxes' mean IoU, score error on matched) a precision must reach: kept as its
    top-1 agreement (fp32 0.99 ... int8 0.90); IoU 1 - 2 x (1 - that), at least MIN_BOX_IOU; the score error
    its max_rel_err (scores are 0-1), int8 INT8_SCORE_ERR."""
    kept = float(tol.min_top1 if tol.min_top1 is not None else 0.9)
    score = float(tol.max_rel_err) if tol.max_rel_err is not None else INT8_SCORE_ERR
    return kept, max(MIN_BOX_IOU, 1.0 - 2.0 * (1.0 - kept)), score


def _aligned_cosine(r, o, pairs) -> float:
    """The cosine of one sample's detection scores aligned by matching: matched pairs side by side, a lost or
    added detection against 0 (1 when neither side finds anything)."""
    mr, mo = [i for i, _, _ in pairs], [j for _, j, _ in pairs]
    lost, added = np.delete(r[1], mr), np.delete(o[1], mo)
    a = np.concatenate([r[1][mr], lost, np.zeros(len(added))])
    b = np.concatenate([o[1][mo], np.zeros(len(lost)), added])
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / norm) if norm > 0 else (1.0 if not a.size else 0.0)


def _tally(ref: np.ndarray, out: np.ndarray, head: Head, tie: float) -> dict[str, Any]:
    """Detections of every sample, matched: counts of kept, lost and added (those within ``tie`` of the
    threshold apart), the matched boxes' IoUs and score errors, each sample's aligned score cosine."""
    t = {"reference": 0, "found": 0, "kept": 0, "lost": 0, "added": 0, "near_threshold": 0, "ious": [],
         "score_errs": [], "box_errs": [], "box_scale": 0.0}
    cos = []
    for r_s, o_s in zip(ref, out, strict=True):
        r, o = decode(r_s, head), decode(o_s, head)
        pairs = match(r, o)
        matched_r, matched_o = {i for i, _, _ in pairs}, {j for _, j, _ in pairs}
        t["reference"], t["found"], t["kept"] = (t["reference"] + len(r[0]), t["found"] + len(o[0]),
                                                 t["kept"] + len(pairs))
        t["box_scale"] = max(t["box_scale"], float(np.abs(r[0]).max(initial=0.0)))
        for i in set(range(len(r[0]))) - matched_r:
            near = r[1][i] < SCORE_THRESHOLD + tie
            t["near_threshold" if near else "lost"] += 1
        t["added"] += sum(1 for j in set(range(len(o[0]))) - matched_o if o[1][j] >= SCORE_THRESHOLD + tie)
        t["ious"] += [v for _, _, v in pairs]
        t["score_errs"] += [abs(float(r[1][i]) - float(o[1][j])) for i, j, _ in pairs]
        t["box_errs"] += [float(np.abs(r[0][i] - o[0][j]).max()) for i, j, _ in pairs]
        cos.append(_aligned_cosine(r, o, pairs))
    return {**t, "aligned_cos": np.asarray(cos)}


def _part_errors(ref: np.ndarray, out: np.ndarray, head: Head) -> tuple[float, float, np.ndarray]:
    """(box part's max abs error / its max |reference|, score part's max abs error, each sample's cosine of
    the score part): the parts of the tensor each against its own scale."""
    r, o = _rows(np.asarray(ref, np.float64), head), _rows(np.asarray(out, np.float64), head)
    box_d = np.abs(o[..., :4] - r[..., :4])
    box_rel = float(box_d.max()) / (float(np.abs(r[..., :4]).max()) or 1.0) if box_d.size else 0.0
    part = slice(4, 5) if head.fmt in OWN_NMS else slice(4, None)  # post-nms: the classes apart
    rs, os_ = r[..., part].reshape(len(r), -1), o[..., part].reshape(len(o), -1)
    d = np.abs(os_ - rs)
    return box_rel, float(d.max()) if d.size else 0.0, cosines(rs, os_, d)


def _checks(t: dict[str, Any], tol: Tolerance, head: Head, box_rel: float, score_err: float) -> list:
    """(name, value, limit, higher is better) of a tally: kept, added, the matched ones' IoU and score error;
    where the reference finds nothing, each part's values (never for ``torchvision``, whose K changes: only
    that nothing is added)."""
    kept_lim, iou_lim, score_lim = limits(tol)
    judged_ref = t["kept"] + t["lost"]
    if judged_ref:
        checks = [("detections kept", t["kept"] / judged_ref, kept_lim, True),
                  # the limit as stated (1 - 0.9 is 0.09999999999999998 in floats: 1 added of 10 read as over)
                  ("detections added / reference", t["added"] / judged_ref, round(1.0 - kept_lim, 12), False)]
        if t["ious"]:
            checks += [("matched boxes' mean IoU", float(np.mean(t["ious"])), iou_lim, True),
                       ("matched detections' mean score error", float(np.mean(t["score_errs"])),
                        score_lim, False)]
        return checks
    if head.fmt == "torchvision":
        return [("detections added (the reference finds none)", float(t["added"]), 0.0, False)]
    checks = [("score part max abs error", score_err, score_lim, False)]
    if tol.max_rel_err is not None:
        checks.append(("box part max abs error / its max |reference|", box_rel,
                       float(tol.max_rel_err), False))
    return checks


def _summary(t: dict[str, Any], head: Head) -> str:
    judged_ref = t["kept"] + t["lost"]
    values = "never compared by position" if head.fmt == "torchvision" else "judged on each part's values"
    return (f"detections: {t['kept']} of {judged_ref} kept, {t['added']} added"
            + (f", {t['near_threshold']} near the score threshold not judged" if t["near_threshold"] else "")
            + (f"; matched boxes' mean IoU {np.mean(t['ious']):.4f}" if t["ious"] else "")
            + (f"; largest score error on a matched one {max(t['score_errs']):.3g}"
               if t["score_errs"] else "")
            + (f", largest box coordinate error {max(t['box_errs']):.3g}" if t["box_errs"] else "")
            + ("" if judged_ref else f" (the reference finds none on these inputs: {values})"))


def _matched_errors(t: dict[str, Any]) -> tuple[float, float, float, float]:
    """(max abs error, mean abs error, max relative error, the relative error float rounding may excuse) over
    the matched detections' boxes and scores (boxes relative to the reference's largest coordinate); the last
    is inf where the detections are not the same ones, so that rounding never excuses a changed set."""
    same = t["kept"] == t["reference"] == t["found"]
    if not t["box_errs"]:
        return 0.0, 0.0, 0.0, 0.0 if same else float("inf")
    rel = max(max(t["box_errs"]) / (t["box_scale"] or 1.0), max(t["score_errs"]))
    return (max(t["box_errs"] + t["score_errs"]), float(np.mean(t["box_errs"])), rel,
            rel if same else float("inf"))


def compare_detections(ref: np.ndarray, out: np.ndarray, tol: Tolerance, head: Head, judge: bool = True,
                       note: str = "") -> ParityResult:
    """``out`` against ``ref`` (N first) for a detector's head: the checks of the module docstring. Cosine:
    of the score part, sample by sample; for ``torchvision`` of the scores aligned by matching."""
    ref, out = np.asarray(ref, np.float64), np.asarray(out, np.float64)
    if ref.shape != out.shape:
        raise ValueError(f"output shape {out.shape} differs from the reference's {ref.shape}")
    nonfinite = not np.isfinite(out).all()
    t = _tally(ref, np.nan_to_num(out, nan=0.0), head, limits(tol)[2])
    box_rel, score_err, cos = _part_errors(ref, np.nan_to_num(out, nan=0.0), head)
    d = np.abs(out - ref)
    max_abs, mean_abs = float(d.max()) if d.size else 0.0, float(d.mean()) if d.size else 0.0
    rel = rounding = max(box_rel, score_err)
    if head.fmt == "torchvision":  # K changes: errors of the matched detections, cosine of the aligned scores
        cos, (max_abs, mean_abs, rel, rounding) = t["aligned_cos"], _matched_errors(t)
    worst = int(np.argmin(cos)) if cos.size else 0
    return checks_result(
        _checks(t, tol, head, box_rel, score_err), nonfinite=nonfinite, judge=judge, rel=rounding,
        tol=tol, floor_cos=None, n=len(ref), max_abs=max_abs, mean_abs=mean_abs, rel_max=rel,
        cosine_mean=float(cos.mean()) if cos.size else 1.0, cosine_min=float(cos[worst]) if cos.size else 1.0,
        top1_agreement=None, top5_agreement=None, note="; ".join(x for x in (note, _summary(t, head)) if x),
        worst_index=worst, kind="detections",
        detections={"format": head.spec,
                    **{k: (round(float(np.mean(v)), 6) if v else None) if isinstance(v, list)
                                           else v for k, v in t.items() if k != "aligned_cos"}})
