"""What each output means, and so how parity judges it (parity/outputs.py).

The kinds, inferred from an output's shape and reference values, or given with
``--output-kind NAME=KIND``:

* ``scores``: class scores or logits, [N, classes]: cosine, top-1/top-5 (the classifier rules, unchanged);
* ``map``: probabilities or a dense map, [N, H, W] (values in [0, 1]) or [N, C, H, W]: mask agreement
  (IoU of the maps thresholded at 0.5, at 0 for logits, or of the per-pixel argmax over C > 1 channels),
  errors relative to the map's scale (1 for probabilities), cosine only on samples whose reference is
  not near zero;
* ``sequence``: class scores at every step, [N, steps, classes] (a text recognizer's CTC head): the greedy
  decoding (the text) and its confidence, step agreement (parity/sequences.py); inferred where every step's
  values are probabilities summing to 1, logits only when given;
* ``regression``: values or boxes ([N], [N, 1], [N, boxes, 4], ...): errors relative to the output's
  scale, cosine only where the reference is not near zero;
* ``other``: judged as regression values.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from infer_compare.base.errors import UsageError
from infer_compare.parity.detections import GROUP_FORMATS, parse_head, recognize

SCORES, MAP, REGRESSION, OTHER, DETECTIONS = "scores", "map", "regression", "other", "detections"
SEQUENCE = "sequence"
KINDS = {SCORES: "class scores or logits [N, classes]",
         MAP: "probabilities or a dense map [N, H, W] or [N, C, H, W]",
         SEQUENCE: "class scores at every step [N, steps, classes], judged on the text read (CTC greedy "
                   "decoding, blank 0) and its confidence (parity/sequences.py)",
         REGRESSION: "regression values or boxes",
         OTHER: "anything else (judged as regression values)",
         DETECTIONS: "a detection head, decoded and judged by detections kept and added "
                     "(detections:yolo|yolov8|yolo-noobj[+grid] in one output; "
                     "ssd|ssd-nobg|post-nms|torchvision over several; parity/detections.py, "
                     "parity/det_groups.py)"}
ALIASES = {"logits": SCORES, "classes": SCORES, "class-scores": SCORES,
           "probabilities": MAP, "mask": MAP, "dense-map": MAP, "segmentation": MAP,
           "boxes": REGRESSION, "values": REGRESSION, "yolo": DETECTIONS,
           "ctc": SEQUENCE, "recognizer": SEQUENCE, "text": SEQUENCE, "sequences": SEQUENCE}
MIN_SPATIAL = 4  # a [N, C, H, W] output is a dense map when H and W are at least this
MIN_SPATIAL_3D = 8  # a [N, H, W] output is one when H, W >= this and its values are probabilities
SUM_TOLERANCE = 1e-3  # a step whose probabilities sum to 1 within this is a distribution (softmax applied)


def is_probability(ref: Any) -> bool:
    """Every reference value finite and in [0, 1]."""
    a = np.asarray(ref)
    return bool(a.size) and bool(np.isfinite(a).all()) and float(a.min()) >= 0.0 and float(a.max()) <= 1.0


def is_step_distribution(ref: Any) -> bool:
    """[N, steps >= 2, classes >= 2] whose every step is a probability distribution over the classes."""
    a = np.asarray(ref)
    if a.ndim != 3 or min(a.shape[1:]) < 2 or not a.size or not np.isfinite(a).all():
        return False
    if float(a.min()) < 0.0 or float(a.max()) > 1.0:
        return False
    return bool(np.abs(a.sum(-1, dtype=np.float64) - 1.0).max() <= SUM_TOLERANCE)


def infer_kind(ref: Any) -> str:
    """The kind of an output from its reference (N first)."""
    shape = np.shape(ref)
    nd = len(shape)
    if nd == 2 and shape[1] >= 2:
        return SCORES
    if nd == 4 and min(shape[2:]) >= MIN_SPATIAL:
        return MAP
    if nd == 3 and recognize(ref) is not None:
        return DETECTIONS
    if nd == 3 and is_step_distribution(ref):
        return SEQUENCE
    if nd == 3 and min(shape[1:]) >= MIN_SPATIAL_3D and is_probability(ref):
        return MAP
    return REGRESSION if nd <= 3 else OTHER


def misfit(kind: str, shape: tuple[int, ...]) -> str:
    """Why ``kind`` does not fit an output of ``shape`` (N first), or ""."""
    sample = list(shape[1:])
    if kind == SCORES and len(sample) != 1:
        return f"class scores are [N, classes]; this output is [N, {', '.join(map(str, sample))}]"
    if kind.split(":")[0] == DETECTIONS and kind.partition(":")[2] in GROUP_FORMATS:
        return "" if len(sample) in (1, 2) else ("a detection output is [N, K], [N, K, values]; this "
                                                 f"output is [N, {', '.join(map(str, sample))}]")
    if kind.split(":")[0] == DETECTIONS and len(sample) != 2:
        return ("a detection head is [N, anchors, values] or [N, values, anchors]; this output is "
                f"[N, {', '.join(map(str, sample))}]")
    if kind == SEQUENCE and len(sample) != 2:
        return f"a sequence is [N, steps, classes]; this output is [N{''.join(f', {d}' for d in sample)}]"
    if kind == MAP and len(sample) not in (2, 3):
        return ("a dense map is [N, H, W] or [N, C, H, W]; this output is "
                f"[N{''.join(f', {d}' for d in sample)}]")
    return ""


def parse_output_kinds(values: Iterable[str] | None) -> dict[str, str]:
    """``--output-kind NAME=KIND`` flags as {name: kind}; a malformed one or an unknown kind is a
    UsageError."""
    out: dict[str, str] = {}
    for v in values or ():
        name, eq, kind = str(v).partition("=")
        kind, colon, fmt = kind.strip().lower().partition(":")
        kind = ALIASES.get(kind, kind)
        if not eq or not name.strip():
            raise UsageError(f"--output-kind {v!r}: expected NAME=KIND, KIND one of {', '.join(KINDS)}")
        if colon and kind == DETECTIONS:
            try:
                parse_head(fmt, (1, 1))
            except ValueError as e:
                raise UsageError(f"--output-kind {v!r}: {e}") from None
            kind = f"{DETECTIONS}:{fmt}"
        elif kind not in KINDS:
            raise UsageError(f"--output-kind {v!r}: unknown kind {kind!r}; kinds: "
                             + "; ".join(f"{k} ({d})" for k, d in KINDS.items()))
        out[name.strip()] = kind
    return out


def check_output_kinds(kinds: dict[str, str], shapes: dict[str, tuple[int, ...]]) -> None:
    """Each named output exists and its kind fits its shape ({name: reference shape}), else a UsageError."""
    for name, kind in kinds.items():
        if name not in shapes:
            raise UsageError(f"--output-kind {name}={kind}: the model has no output {name!r}; "
                             f"its outputs: {', '.join(shapes)}")
        why = misfit(kind, tuple(shapes[name]))
        if why:
            raise UsageError(f"--output-kind {name}={kind}: does not fit: {why}")


def output_shapes(prep: Any) -> dict[str, tuple[int, ...]]:
    """{output name: reference shape} of a Prepared: a one-output model's output under its graph name
    (an ONNX file's) and under "output"."""
    ref = prep.ref
    if isinstance(ref, dict):
        return {k: tuple(np.shape(v)) for k, v in ref.items()}
    names = [o["name"] for o in getattr(prep.minfo, "outputs", ()) if o.get("name")]
    spec = getattr(prep, "model_spec", {}) or {}
    if not names and spec.get("kind") == "onnx" and spec.get("source"):
        try:
            import onnx

            names = [o.name for o in onnx.load(spec["source"], load_external_data=False).graph.output][:1]
        except Exception:  # noqa: BLE001 - the name is a convenience; "output" always works
            names = []
    return {n: tuple(np.shape(ref)) for n in [*names, "output"]}
