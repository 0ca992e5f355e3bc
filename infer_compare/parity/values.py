"""Parity of outputs that are not class scores: dense maps, regression values, anything else
(parity/kinds.py says which is which).

Errors are judged relative to the output's own scale (max |reference|, or 1 for a probability map):
the max abs error over that scale must stay within the precision's ``max_rel_err`` and the mean abs
error within a tenth of it (int8, which has no ``max_rel_err``: its ``1 - min_cosine``). Cosine is judged
only on samples whose reference is not near zero (norm >= :data:`MEANINGFUL_NORM` x scale x sqrt(size));
the others are counted as skipped. A dense map is also judged on mask agreement: the mean IoU of the
maps thresholded at 0.5 (probabilities) or 0 (logits), or of the per-pixel argmax over C > 1 channels,
against the precision's ``min_top1`` (0.9 where it has none). A row at float rounding level
(checks.ROUNDING_REL) never fails.
"""

from __future__ import annotations

import numpy as np

from infer_compare.base.records import ParityResult
from infer_compare.catalog.formats import Tolerance
from infer_compare.parity.checks import checks_result, cosines, min_cosine_worst
from infer_compare.parity.kinds import MAP, is_probability

MEANINGFUL_NORM = 1e-3
DEFAULT_MIN_IOU = 0.9


def mask_ious(ref: np.ndarray, out: np.ndarray, prob: bool) -> np.ndarray:
    """Per sample: IoU of the thresholded masks, or for [N, C>1, H, W] the mean IoU over the classes of
    the per-pixel argmax (classes in neither map left out). Two empty masks agree (IoU 1)."""
    if ref.ndim == 4 and ref.shape[1] > 1:
        lr, lo = ref.argmax(1), out.argmax(1)
        res = []
        for a, b in zip(lr, lo, strict=True):
            ious = [np.logical_and(a == c, b == c).sum() / np.logical_or(a == c, b == c).sum()
                    for c in np.union1d(np.unique(a), np.unique(b))]
            res.append(float(np.mean(ious)))
        return np.asarray(res)
    t = 0.5 if prob else 0.0
    mr = (ref > t).reshape(len(ref), -1)
    mo = (out > t).reshape(len(out), -1)
    inter, union = np.logical_and(mr, mo).sum(1), np.logical_or(mr, mo).sum(1)
    return np.where(union > 0, inter / np.maximum(union, 1), 1.0)


def _cosine_part(r: np.ndarray, o: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's cosine, and which samples have a reference far enough from zero to judge it."""
    diff = np.abs(o - r)
    cos = cosines(r, o, diff)
    norms = np.linalg.norm(r, axis=1)
    return cos, norms >= MEANINGFUL_NORM * scale * np.sqrt(max(r.shape[1], 1))


def _limits(tol: Tolerance) -> tuple[float | None, float]:
    mean_lim = tol.max_rel_err / 10 if tol.max_rel_err is not None else 1.0 - float(tol.min_cosine)
    return tol.max_rel_err, mean_lim


def compare_values(ref: np.ndarray, out: np.ndarray, tol: Tolerance, kind: str, judge: bool = True,
                   note: str = "") -> ParityResult:
    """``out`` against ``ref`` (N first) for an output of ``kind`` (map, regression or other)."""
    ref = np.asarray(ref, dtype=np.float64)
    out = np.asarray(out, dtype=np.float64)
    if ref.shape != out.shape:
        raise ValueError(f"output shape {out.shape} differs from the reference's {ref.shape}")
    if ref.shape[0] == 0:
        raise ValueError("no parity samples")
    n = len(ref)
    r, o = ref.reshape(n, -1), out.reshape(n, -1)
    prob = kind == MAP and is_probability(ref)
    scale = max(float(np.abs(r).max()) if r.size else 0.0, 1.0 if prob else 0.0) or 1.0
    diff = np.abs(o - r)
    max_abs, mean_abs = (float(diff.max()), float(diff.mean())) if diff.size else (0.0, 0.0)
    cos, meaningful = _cosine_part(r, o, scale)
    idx = np.flatnonzero(meaningful)
    worst = int(idx[np.argmin(np.nan_to_num(cos[idx], nan=-1.0))]) if idx.size else int(np.argmin(cos))
    cos_mean = float(cos[idx].mean()) if idx.size else float(cos.mean())
    max_lim, mean_lim = _limits(tol)
    checks = []
    if max_lim is not None:
        checks.append(("max abs error / max |reference|", max_abs / scale, max_lim, False))
    checks.append(("mean abs error / max |reference|", mean_abs / scale, mean_lim, False))
    if idx.size:
        checks += [("cosine", cos_mean, float(tol.min_cosine), True),
                   (f"worst sample (#{worst}) cosine", float(cos[worst]), min_cosine_worst(tol), True)]
    iou = None
    if kind == MAP:
        iou = float(mask_ious(ref, out, prob).mean())
        checks.append(("mask IoU", iou,
                       float(tol.min_top1) if tol.min_top1 is not None else DEFAULT_MIN_IOU, True))
    skipped = int(n - idx.size)
    notes = [note] if note else []
    if skipped:
        notes.append(f"cosine left out on {skipped} of {n} samples whose reference is near zero")
    return checks_result(
        checks, nonfinite=not np.isfinite(out).all(), judge=judge, rel=max_abs / scale, tol=tol,
        floor_cos=(cos_mean, float(cos[worst]), worst) if idx.size else None,
        n=n, max_abs=max_abs, mean_abs=mean_abs, rel_max=max_abs / scale, cosine_mean=cos_mean,
        cosine_min=float(cos[worst]), top1_agreement=None, top5_agreement=None, note="; ".join(notes),
        worst_index=worst, kind=kind, cosine_skipped=skipped, mask_iou=iou)
