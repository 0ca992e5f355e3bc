"""What every parity verdict is made of: the checks (name, value, limit, higher is better), the margin
each leaves, the check that decided a result, the sanity floors that fail even a row that is not judged
(non-finite outputs, a cosine far from 1), and float rounding, at which an output never fails."""

from __future__ import annotations

from typing import Any

import numpy as np

from infer_compare.base.records import ParityResult
from infer_compare.catalog.formats import Tolerance

WORST_MARGIN = 3.0
# max abs error / max |reference| at or below this is float32 rounding: an output that is not class scores
# (whose cosine and top-1 rules stay as they are) never fails there
ROUNDING_REL = 5e-6
FLOOR_COSINE_MEAN = 0.9
FLOOR_COSINE_WORST = 0.5


def min_cosine_worst(tol: Tolerance) -> float:
    """The worst sample's minimum cosine for ``tol``: its own field where it has one."""
    v = getattr(tol, "min_cosine_worst", None)
    if v is not None:
        return float(v)
    return 1.0 - WORST_MARGIN * (1.0 - float(tol.min_cosine))


def cosines(ref: np.ndarray, out: np.ndarray, diff: np.ndarray) -> np.ndarray:
    dot = (ref * out).sum(1)
    norms = np.linalg.norm(ref, axis=1) * np.linalg.norm(out, axis=1)
    with np.errstate(invalid="ignore"):
        return np.where(norms > 0, dot / np.where(norms > 0, norms, 1.0),
                        np.where(diff.max(1) == 0, 1.0, 0.0))


def floor_failures(nonfinite: bool, cos_mean: float, cos_min: float, worst: int) -> list[str]:
    out = []
    if nonfinite:
        out.append("outputs contain NaN or Inf")
        return out
    if cos_mean < FLOOR_COSINE_MEAN:
        out.append(f"cosine {cos_mean:.5f} < {FLOOR_COSINE_MEAN} (sanity floor)")
    if cos_min < FLOOR_COSINE_WORST:
        out.append(f"worst sample (#{worst}) cosine {cos_min:.5f} < {FLOOR_COSINE_WORST} (sanity floor)")
    return out


def margin(value: float, limit: float, higher_is_better: bool) -> float:
    """The share of the allowance left: 1 no error, 0 on the limit, < 0 failed (the limit's distance from
    a perfect value, 1 for a cosine or an agreement and 0 for an error, is the allowance)."""
    if not np.isfinite(value):
        return float("-inf")
    if higher_is_better:
        room = (1.0 - limit) if limit < 1.0 else (abs(limit) or 1.0)
        return float((value - limit) / room)
    return float((limit - value) / limit) if limit > 0 else (0.0 if value <= 0 else float("-inf"))


def decide(checks: list[tuple[str, float, float, bool]]) -> dict[str, Any]:
    """The check (name, value, limit, higher is better) nearest to failing, or most failed: the metric that
    judged the output, as ParityResult fields."""
    if not checks:
        return {}
    name, value, limit, hb = min(checks, key=lambda c: margin(c[1], c[2], c[3]))
    m = margin(value, limit, hb)
    return {"metric": name, "metric_value": float(value), "metric_limit": float(limit),
            "margin": m if np.isfinite(m) else -1e9}


def _rounding(rel: float) -> dict[str, Any]:
    return {"metric": "max abs error / max |reference| (float rounding level: never fails)",
            "metric_value": float(rel), "metric_limit": ROUNDING_REL,
            "margin": margin(rel, ROUNDING_REL, False)}


def checks_result(checks: list[tuple[str, float, float, bool]], *, nonfinite: bool, judge: bool, rel: float,
                  tol: Tolerance, floor_cos: tuple[float, float, int] | None, **fields: Any) -> ParityResult:
    """A ParityResult judged on ``checks`` (name, value, limit, higher is better): it fails on any check
    outside its limit, or below the sanity floor (non-finite outputs; ``floor_cos``: mean and worst cosine
    and the worst sample, where cosine means something); at float rounding level it never fails."""
    failures = ["outputs contain NaN or Inf"] if nonfinite else []
    for name, v, lim, hb in checks:
        if not (v >= lim if hb else v <= lim):
            failures.append(f"{name} {v:.4g} {'<' if hb else '>'} {lim:.4g} (off by {abs(v - lim):.2g})")
    floor = floor_failures(nonfinite, *floor_cos) if floor_cos is not None else (
        ["outputs contain NaN or Inf"] if nonfinite else [])
    decided = decide(checks)
    if not nonfinite and rel <= ROUNDING_REL:
        failures, floor, decided = [], [], _rounding(rel)
    return ParityResult(
        judged=judge, passed=not floor and (not failures or not judge), failures=tuple(failures),
        floor_failures=tuple(floor), tolerance={**tol.as_dict(), "min_cosine_worst": min_cosine_worst(tol),
                                                "rounding_rel": ROUNDING_REL},
        **decided, **fields)
