"""Class scores against the reference: the mean **and** the worst sample's cosine, the error relative
to the largest reference score, top-1 and top-5 agreement, and accuracy where there are labels
(the rules are in outputs.py's docstring)."""

from __future__ import annotations

import numpy as np

from infer_compare.base.records import ParityResult
from infer_compare.catalog.formats import Tolerance
from infer_compare.parity.checks import (
    FLOOR_COSINE_MEAN,
    FLOOR_COSINE_WORST,
    cosines,
    decide,
    floor_failures,
    min_cosine_worst,
)
from infer_compare.parity.kinds import SCORES

# int8 has no error limit of its own: a near-tie there is a top-two margin under this share of the largest
# score
INT8_TIE_REL = 0.05


def near_ties(ref: np.ndarray, tol: Tolerance) -> np.ndarray:
    """The samples whose reference top-two margin is under twice the error the precision may make (its
    ``max_rel_err`` of the largest reference score; int8: :data:`INT8_TIE_REL`): a flip there stays within
    the tolerance, so top-1 agreement is not judged on them (reported, and counted in ``near_ties``)."""
    if ref.shape[1] < 2:
        return np.zeros(len(ref), dtype=bool)
    top2 = -np.sort(-ref, axis=1)[:, :2]
    allowed = (tol.max_rel_err if tol.max_rel_err is not None
               else INT8_TIE_REL) * (float(np.abs(ref).max()) or 1.0)
    return (top2[:, 0] - top2[:, 1]) < 2.0 * allowed


def _top1(ref: np.ndarray, out: np.ndarray, tol: Tolerance, note: str) -> tuple[float, np.ndarray, str]:
    """(top-1 agreement on the samples that are not near-ties, which samples are, the note saying so): all
    agreeing when every sample is a near-tie."""
    agree = ref.argmax(1) == out.argmax(1)
    ties = near_ties(ref, tol)
    top1 = float(agree[~ties].mean()) if (~ties).any() else 1.0
    if ties.any():
        flipped = int((~agree[ties]).sum())
        note = "; ".join(x for x in (note, f"top-1 judged on {int((~ties).sum())} of {len(ref)} samples: "
                                           f"{int(ties.sum())} near-ties (reference top-two margin under "
                                           f"twice the error {tol.max_rel_err or INT8_TIE_REL} x max "
                                           f"|reference| allows), {flipped} of them "
                                           "flipped, not judged") if x)
    return top1, ties, note


def _topk(a: np.ndarray, k: int) -> np.ndarray:
    k = min(k, a.shape[1])
    return np.argsort(-a, axis=1, kind="stable")[:, :k]


def _judge(tol: Tolerance, nonfinite: bool, cos_mean: float, cos_min: float, worst: int, rel: float,
           top1: float, judge_top1: bool) -> list[str]:
    failures: list[str] = []
    if nonfinite:
        failures.append("outputs contain NaN or Inf")
    if cos_mean < tol.min_cosine:
        failures.append(f"cosine {cos_mean:.5f} < {tol.min_cosine}")
    worst_min = min_cosine_worst(tol)
    if cos_min < worst_min:
        failures.append(f"worst sample (#{worst}) cosine {cos_min:.5f} < {worst_min:.4g}")
    if tol.max_rel_err is not None and rel > tol.max_rel_err:
        failures.append(f"max rel error {rel:.2e} > {tol.max_rel_err:.0e}")
    if judge_top1 and tol.min_top1 is not None and top1 < tol.min_top1:
        failures.append(f"top-1 agreement {top1:.3f} < {tol.min_top1}")
    return failures


def _top5(ref: np.ndarray, out: np.ndarray) -> float | None:
    """Agreement of the top-5 *sets*: the share of the reference's top-5 classes found in the row's top-5."""
    if ref.shape[1] < 5:
        return None
    r5, o5 = _topk(ref, 5), _topk(out, 5)
    return float(np.mean([len(set(a) & set(b)) / 5.0 for a, b in zip(r5, o5, strict=True)]))


def _accuracies(ref: np.ndarray, out: np.ndarray,
                labels: np.ndarray | None) -> tuple[float | None, float | None]:
    """(the row's, the reference's) top-1 accuracy against ``labels``; (None, None) without labels."""
    if labels is None:
        return None, None
    labels = np.asarray(labels)
    return float((out.argmax(1) == labels).mean()), float((ref.argmax(1) == labels).mean())


def compare(ref: np.ndarray, out: np.ndarray, tol: Tolerance, labels: np.ndarray | None = None,
            judge: bool = True, judge_top1: bool = True, note: str = "") -> ParityResult:
    """All metrics of ``out`` against ``ref`` (both N x classes logits).

    ``judge=False``: report the figures but fail the row only below the sanity floor
    (e.g. int8 with random weights, whose top-1 margins are tiny). ``judge_top1=False``:
    judge cosine and relative error but not top-1 agreement. ``ParityResult.reason``
    says why a row failed.
    """
    ref = np.asarray(ref, dtype=np.float64).reshape(len(ref), -1)
    out = np.asarray(out, dtype=np.float64).reshape(len(out), -1)
    if ref.shape != out.shape:
        raise ValueError(f"output shape {out.shape} differs from the reference's {ref.shape}")
    if ref.shape[0] == 0:
        raise ValueError("no parity samples")
    diff = np.abs(out - ref)
    scale = float(np.abs(ref).max()) or 1.0
    cos = cosines(ref, out, diff)
    worst = int(np.argmin(np.where(np.isfinite(cos), cos, -np.inf)))
    cos_mean, cos_min = float(cos.mean()), float(cos[worst])
    top1, ties, note = _top1(ref, out, tol, note)
    top5, (acc, ref_acc) = _top5(ref, out), _accuracies(ref, out, labels)
    nonfinite = not np.isfinite(out).all()
    rel = float(diff.max()) / scale if diff.size else 0.0
    failures = _judge(tol, nonfinite, cos_mean, cos_min, worst, rel, top1, judge_top1)
    floor = floor_failures(nonfinite, cos_mean, cos_min, worst)
    # class scores keep their rules (no rounding-level pass: there their cosine is ~1 anyway)
    decided = decide(_score_checks(tol, cos_mean, cos_min, worst, rel, top1 if judge_top1 else None))
    passed = not floor and (not failures or not judge)
    return ParityResult(
        n=int(ref.shape[0]),
        max_abs=float(diff.max()) if diff.size else 0.0,
        mean_abs=float(diff.mean()) if diff.size else 0.0,
        rel_max=rel,
        cosine_mean=cos_mean,
        cosine_min=cos_min,
        top1_agreement=top1,
        top5_agreement=top5,
        accuracy=acc,
        reference_accuracy=ref_acc,
        judged=judge,
        passed=passed,
        failures=tuple(failures),
        tolerance={**tol.as_dict(), "min_cosine_worst": min_cosine_worst(tol),
                   "top1_judged": bool(judge and judge_top1),
                   "floor_cosine_mean": FLOOR_COSINE_MEAN, "floor_cosine_worst": FLOOR_COSINE_WORST},
        note=note,
        worst_index=worst,
        floor_failures=tuple(floor),
        kind=SCORES,
        near_ties=int(ties.sum()),
        **decided,
    )


def _score_checks(tol: Tolerance, cos_mean: float, cos_min: float, worst: int, rel: float,
                  top1: float | None) -> list[tuple[str, float, float, bool]]:
    """The checks of class scores, as (name, value, limit, higher is better), for :func:`decide`."""
    checks = [("cosine", cos_mean, float(tol.min_cosine), True),
              (f"worst sample (#{worst}) cosine", cos_min, min_cosine_worst(tol), True)]
    if tol.max_rel_err is not None:
        checks.append(("max abs error / max |reference|", rel, float(tol.max_rel_err), False))
    if top1 is not None and tol.min_top1 is not None:
        checks.append(("top-1 agreement", top1, float(tol.min_top1), True))
    return checks
