"""The median's confidence interval, distribution-free: the order statistics whose ranks a
Binomial(n, 1/2) puts around the median (exact up to n = 1000, the normal approximation above).
Used by the harness's stopping rule (measure/bench.py) and by every row's LatencyStats."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from statistics import NormalDist

CI_LEVEL = 0.95
_EXACT_UP_TO = 1000  # exact binomial ranks up to this n, the normal approximation above


def ci_rel(median: float | None, low: float | None, high: float | None) -> float | None:
    if median is None or low is None or high is None or median <= 0:
        return None
    return (high - low) / 2.0 / median


@functools.lru_cache(maxsize=2048)
def median_ci_ranks(n: int, level: float = CI_LEVEL) -> tuple[int, int] | None:
    """0-based ranks (lo, hi) of the order statistics bounding the median with coverage >= ``level``.

    Distribution-free: P(x_(j) <= median <= x_(n-j+1)) = 1 - 2 P(Binomial(n, 1/2) <= j - 1).
    None when even (min, max) does not reach the level (n < 6 for 95 %).
    """
    if n < 1:
        return None
    alpha_half = (1.0 - level) / 2.0
    if n <= _EXACT_UP_TO:
        total, cum, j = 2**n, 0, 0
        while True:
            c = math.comb(n, j)
            if (cum + c) / total > alpha_half:
                break
            cum += c
            j += 1
        return None if j == 0 else (j - 1, n - j)
    z = NormalDist().inv_cdf(1.0 - alpha_half)
    j = max(1, math.floor(n / 2.0 - z * math.sqrt(n) / 2.0))
    return j - 1, n - j


def median_ci(samples: Sequence[float], level: float = CI_LEVEL) -> tuple[float, float | None, float | None]:
    """(median, CI low, CI high) of ``samples``; the bounds are None when n is too small."""
    import numpy as np

    a = np.asarray(samples, dtype=np.float64)
    n = a.size
    if n == 0:
        raise ValueError("no samples")
    mid = ((n - 1) // 2, n // 2)
    ranks = median_ci_ranks(n, level)
    kth = sorted({*mid, *(ranks or ())})
    part = np.partition(a, kth)
    med = float(part[mid[0]] + part[mid[1]]) / 2.0
    if ranks is None:
        return med, None, None
    return med, float(part[ranks[0]]), float(part[ranks[1]])
