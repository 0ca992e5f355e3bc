"""Comparison of a row's outputs with the PyTorch FP32 reference, and accuracy."""

from __future__ import annotations

import numpy as np

from .formats import Tolerance
from .records import ParityResult


def _topk(a: np.ndarray, k: int) -> np.ndarray:
    k = min(k, a.shape[1])
    return np.argsort(-a, axis=1, kind="stable")[:, :k]


def compare(
    ref: np.ndarray,
    out: np.ndarray,
    tol: Tolerance,
    labels: np.ndarray | None = None,
    judge: bool = True,
    judge_top1: bool = True,
    note: str = "",
) -> ParityResult:
    """All metrics of ``out`` against ``ref`` (both N x classes logits).

    ``judge=False``: report the figures but never fail the row (e.g. int8 with random
    weights, whose top-1 margins are tiny). ``judge_top1=False``: judge cosine and
    relative error but not top-1 agreement.
    """
    ref = np.asarray(ref, dtype=np.float64).reshape(len(ref), -1)
    out = np.asarray(out, dtype=np.float64).reshape(len(out), -1)
    if ref.shape != out.shape:
        raise ValueError(f"output shape {out.shape} differs from the reference's {ref.shape}")
    diff = np.abs(out - ref)
    scale = float(np.abs(ref).max()) or 1.0
    dot = (ref * out).sum(1)
    norms = np.linalg.norm(ref, axis=1) * np.linalg.norm(out, axis=1)
    cos = np.where(norms > 0, dot / np.where(norms > 0, norms, 1.0), np.where(diff.max(1) == 0, 1.0, 0.0))
    top1 = float((ref.argmax(1) == out.argmax(1)).mean())
    top5 = None
    if ref.shape[1] >= 5:
        r5, o5 = _topk(ref, 5), _topk(out, 5)
        # agreement of the top-5 *sets*: the share of the reference's top-5 classes found in the row's top-5
        top5 = float(np.mean([len(set(a) & set(b)) / 5.0 for a, b in zip(r5, o5, strict=True)]))
    acc = ref_acc = None
    if labels is not None:
        labels = np.asarray(labels)
        acc = float((out.argmax(1) == labels).mean())
        ref_acc = float((ref.argmax(1) == labels).mean())
    nonfinite = not np.isfinite(out).all()
    rel = float(diff.max()) / scale if diff.size else 0.0
    failures: list[str] = []
    if nonfinite:
        failures.append("outputs contain NaN or Inf")
    if float(cos.mean()) < tol.min_cosine:
        failures.append(f"cosine {cos.mean():.5f} < {tol.min_cosine}")
    if tol.max_rel_err is not None and rel > tol.max_rel_err:
        failures.append(f"max rel error {rel:.2e} > {tol.max_rel_err:.0e}")
    if judge_top1 and tol.min_top1 is not None and top1 < tol.min_top1:
        failures.append(f"top-1 agreement {top1:.3f} < {tol.min_top1}")
    passed = not failures if judge else True
    if nonfinite:
        passed = False  # never acceptable, judged or not
    return ParityResult(
        n=int(ref.shape[0]),
        max_abs=float(diff.max()) if diff.size else 0.0,
        mean_abs=float(diff.mean()) if diff.size else 0.0,
        rel_max=rel,
        cosine_mean=float(cos.mean()),
        cosine_min=float(cos.min()),
        top1_agreement=top1,
        top5_agreement=top5,
        accuracy=acc,
        reference_accuracy=ref_acc,
        judged=judge,
        passed=passed,
        failures=tuple(failures),
        tolerance={**tol.as_dict(), "top1_judged": bool(judge and judge_top1)},
        note=note,
    )
