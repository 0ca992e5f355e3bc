"""Detection heads spread over several outputs, found and stacked for parity/detections.py.

Many detectors give their detections in two or three outputs, and each one judged alone says little: a
score tensor whose values all moved 0.02 may keep every detection or lose half, and a box tensor's error
relative to its max hides that. So such outputs are judged together, decoded as their users decode them:

* ``ssd``: boxes [N, A, 4] as corners and scores [N, A, C] that are probabilities, A >= MIN_ANCHORS anchors;
  softmax scores (each anchor's sum 1) have the background as class 0 (``ssd``), others not (``ssd-nobg``);
* ``post-nms``: the model's own final detections, boxes [N, K, 4], scores [N, K] (probabilities, not all
  whole numbers) and classes [N, K] (whole numbers): the TF Object Detection API's and
  TFLite_Detection_PostProcess's layout (a fourth output, the count, is left to be judged as values);
* ``torchvision``: the same triple from torchvision's detection models (boxes [K, 4], labels [K], scores [K]
per
  image, K changing), given as rows of K detections padded with zeros (models/torchvision_det.py names these
  outputs so when it wraps such a file; ``--output-kind boxes=detections:torchvision`` says it of others):
  rows of different K are padded to one before they are compared, and nothing is compared position by
  position.

Recognized from shapes and value ranges, or named: ``--output-kind scores=detections:ssd`` (either output of
the pair; the other is the one of the same [N, A] with 4 values). Boxes count as corners when x2 >= x1 and
y2 >= y1 for at least CORNERS_SHARE of the anchors; centre-size boxes are not recognized (judged as values).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infer_compare.parity.detections import GROUP_FORMATS, MIN_ANCHORS, OWN_NMS, Head

CORNERS_SHARE = 0.9
SOFTMAX_TOL = 1e-3


@dataclass(frozen=True)
class Group:
    head: Head
    boxes: str
    scores: str
    classes: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n in (self.boxes, self.scores, self.classes) if n is not None)

    @property
    def name(self) -> str:
        return "+".join(self.names)

    def stack(self, arrays: dict[str, np.ndarray], width: int = 0) -> np.ndarray:
        """One [N, anchors, values] array that parity/detections.py decodes: boxes, then scores (and classes);
        ``width``: the K axis padded with zeros to it (``torchvision`` rows of different K)."""
        parts = [np.asarray(arrays[n], np.float64) for n in self.names]
        out = np.concatenate([p if p.ndim == 3 else p[..., None] for p in parts], axis=-1)
        return np.pad(out, ((0, 0), (0, max(0, width - out.shape[1])), (0, 0))) if width else out

    def ragged_fit(self, ref: dict[str, np.ndarray], out: dict[str, np.ndarray]) -> int:
        """The K both sides are padded to where this is a ``torchvision`` group whose outputs differ in K only
        (and the N and value axes agree); 0 otherwise (shapes must then be equal)."""
        if self.head.fmt != "torchvision":
            return 0
        r, o = [np.shape(ref[n]) for n in self.names], [np.shape(out[n]) for n in self.names]
        if any(len(a) != len(b) or a[:1] + a[2:] != b[:1] + b[2:] for a, b in zip(r, o, strict=True)):
            return 0
        return max(s[1] for s in r + o if len(s) > 1)


def _corners(a: np.ndarray) -> bool:
    """[N, A, 4] boxes as corners: finite, x2 >= x1 and y2 >= y1 for most anchors, not all zero."""
    if not np.isfinite(a).all() or not np.abs(a).max(initial=0.0) > 0:
        return False
    ok = (a[..., 2] >= a[..., 0]) & (a[..., 3] >= a[..., 1])
    return float(ok.mean()) >= CORNERS_SHARE


def _probabilities(a: np.ndarray) -> bool:
    return bool(a.size) and bool(np.isfinite(a).all()) and float(a.min()) >= 0.0 and float(a.max()) <= 1.0


def _whole(a: np.ndarray) -> bool:
    return bool(a.size) and bool(np.isfinite(a).all()) and bool(np.all(a == np.rint(a)))


def _ssd(ref: dict[str, np.ndarray], box: str, want: set[str]) -> Group | None:
    b = ref[box]
    for name, a in ref.items():
        if name == box or (want and name not in want and box not in want):
            continue
        if a.ndim == 3 and a.shape[:2] == b.shape[:2] and a.shape[2] >= 1 and _probabilities(a):
            softmax = a.shape[2] >= 2 and bool(np.all(np.abs(a.sum(-1) - 1.0) <= SOFTMAX_TOL))
            return Group(Head("ssd" if softmax else "ssd-nobg"), box, name)
    return None


def _post_nms(ref: dict[str, np.ndarray], box: str) -> Group | None:
    nk = ref[box].shape[:2]
    flat = {k: a for k, a in ref.items() if k != box and a.shape == nk}
    scores = [k for k, a in flat.items() if _probabilities(a) and not _whole(a)]
    classes = [k for k, a in flat.items() if _whole(a)]
    if len(scores) == 1 and len(classes) == 1:
        return Group(Head("post-nms"), box, scores[0], classes[0])
    return None


def _torchvision(ref: dict[str, np.ndarray], box: str, named: dict[str, str]) -> Group | None:
    """The triple named ``torchvision``: its two [N, K] partners, the integer one the labels. Its values are
    not asked to look like detections: an image with none gives rows of padding only."""
    nk = ref[box].shape[:2]
    flat = [k for k, a in ref.items() if k != box and named.get(k) == "torchvision" and a.shape == nk]
    ints = [k for k in flat if np.issubdtype(ref[k].dtype, np.integer)]
    if len(flat) == 2 and len(ints) == 1:
        return Group(Head("torchvision"), box, next(k for k in flat if k != ints[0]), ints[0])
    return _post_nms(ref, box)


def find_groups(ref: dict[str, np.ndarray], kinds: dict[str, str] | None = None) -> list[Group]:
    """The detection heads among a model's outputs ({name: N-first reference}): those named with a group
    format in ``kinds`` ({name: "detections:ssd"...}) and, among the outputs given no kind, those
    recognized."""
    kinds = kinds or {}
    named = {k: v.partition(":")[2] for k, v in kinds.items() if v.partition(":")[2] in GROUP_FORMATS}
    free = {k for k in ref if k not in kinds}
    arrays = {k: np.asarray(v) for k, v in ref.items()}
    groups: list[Group] = []
    for box, a in arrays.items():
        ragged = named.get(box) == "torchvision"
        if (box not in free and box not in named or a.ndim != 3 or a.shape[2] != 4
                or not (ragged or _corners(a))):
            continue
        pool = {k: v for k, v in arrays.items() if k == box or k in named or k in free}
        found = _torchvision(pool, box, named) if ragged else _post_nms(pool, box)
        if found is None and a.shape[1] >= MIN_ANCHORS:
            found = _ssd(pool, box, {k for k in named if k != box})
        if found is None or {*found.names} & {m for g in groups for m in g.names}:
            continue
        fmt = next((named[n] for n in found.names if n in named), found.head.fmt)
        if fmt != found.head.fmt:  # the user's word between softmax and not, or ragged; never another layout
            if not ({fmt, found.head.fmt} <= {"ssd", "ssd-nobg"} or {fmt, found.head.fmt} == {*OWN_NMS}):
                continue
            found = Group(Head(fmt), *found.names)
        groups.append(found)
    return groups


def unmatched_named(ref: dict[str, np.ndarray], kinds: dict[str, str], groups: list[Group]) -> list[str]:
    """Outputs named with a group format that no group took (their partners were not found)."""
    taken = {n for g in groups for n in g.names}
    return [k for k, v in kinds.items()
            if v.partition(":")[2] in GROUP_FORMATS and k in ref and k not in taken]
