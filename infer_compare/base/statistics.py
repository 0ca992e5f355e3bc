"""The intervals of a row's p50.

* Within one stretch of samples: the median's confidence interval, distribution-free: the order statistics
  whose ranks a Binomial(n, 1/2) puts around the median (exact up to n = 1000, the normal approximation
  above).
  It assumes the samples are independent, so it says nothing about a rerun when the speed moves by the second.
* Between windows (the measured loop split into windows, measure/bench.py): the t-interval of the centre of
  the window medians, on the log scale, held by Stein's two-stage rule (the first MIN_WINDOWS windows fix how
  many a target needs), never narrower than the first (:func:`row_interval`).

Used by the harness's stopping rule (measure/bench.py) and by every row's LatencyStats."""

from __future__ import annotations

import dataclasses
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


# Student's t, 97.5 % quantile (the two-sided 95 % interval), degrees of freedom 1..30
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)
MIN_WINDOWS = 3  # windows a between-window interval needs (the first stage of the two-stage rule)


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t with ``df`` degrees of freedom: the table at 0.975 up to
    30, else the Cornish-Fisher expansion (Abramowitz & Stegun 26.7.5: within 0.3 % of the exact quantile
    from df 4 on for p up to 0.995; coarser below)."""
    if df < 1:
        raise ValueError("df >= 1")
    if abs(p - 0.975) < 1e-12 and df <= len(_T975):
        return _T975[df - 1]
    z = NormalDist().inv_cdf(p)
    g = ((z**3 + z) / 4, (5 * z**5 + 16 * z**3 + 3 * z) / 96,
         (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
         (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160)
    return z + sum(gi / df ** (i + 1) for i, gi in enumerate(g))


def _log_sd(values: Sequence[float]) -> float:
    logs = [math.log(v) for v in values]
    m = sum(logs) / len(logs)
    return math.sqrt(sum((v - m) ** 2 for v in logs) / (len(logs) - 1))


def window_interval(medians: Sequence[float], level: float = CI_LEVEL,
                    stage: int = MIN_WINDOWS) -> tuple[float, float, float] | None:
    """(centre, low, high): the interval of the centre of the window medians ``medians`` (in time order).

    On the log scale (a window runs x times slower, not x ms): the t-interval of their mean, never narrower
    than the first ``stage`` windows' spread gives for this many windows (Stein's two-stage rule: the first
    stage fixes how many windows a target needs, :func:`windows_needed`; with that term the interval keeps
    its coverage when the loop stops on it). None with fewer than ``stage`` windows or a median <= 0."""
    k = len(medians)
    if k < max(2, stage) or min(medians) <= 0:
        return None
    q = (1.0 + level) / 2.0
    logs = [math.log(v) for v in medians]
    centre = sum(logs) / k
    half = max(t_quantile(q, k - 1) * _log_sd(medians), t_quantile(q, stage - 1) * _log_sd(medians[:stage]))
    half /= math.sqrt(k)
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)


def windows_needed(first: Sequence[float], target: float, level: float = CI_LEVEL) -> int:
    """Stein's two-stage rule: how many windows the interval of :func:`window_interval` needs to reach
    ``target`` (relative half-width), from the spread of the first stage's window medians ``first``."""
    k = len(first)
    if k < 2 or target <= 0 or min(first) <= 0:
        return k
    need = (t_quantile((1.0 + level) / 2.0, k - 1) * _log_sd(first) / math.asinh(target)) ** 2
    return max(k, math.ceil(need))


@dataclasses.dataclass(frozen=True)
class RowInterval:
    """A row's p50 and its interval from windows: the hull of the between-window interval
    (:func:`window_interval`) and the within-window CI of the median of all samples (:func:`median_ci`)."""

    median: float
    low: float | None
    high: float | None
    within_low: float | None
    within_high: float | None
    between: tuple[float, float] | None  # (low, high) of window_interval, None below MIN_WINDOWS windows
    window_medians: tuple[float, ...]

    @property
    def rel(self) -> float | None:
        return ci_rel(self.median, self.low, self.high)

    @property
    def between_rel(self) -> float | None:
        """The between-window interval's half-width relative to the p50 (None without it)."""
        return ci_rel(self.median, *self.between) if self.between else None


def row_interval(samples: Sequence[float], sizes: Sequence[int] | None,
                 level: float = CI_LEVEL) -> RowInterval:
    """The p50 of ``samples`` (every window's samples, in order; ``sizes``: how many each window has) with
    its interval: from the windows where there are MIN_WINDOWS of them, never narrower than the
    within-window CI of the median; that CI alone with fewer windows (or ``sizes`` None)."""
    import numpy as np

    med, lo, hi = median_ci(samples, level)
    a = np.asarray(samples, dtype=np.float64)
    bounds = np.cumsum([0, *(sizes or ())])
    meds = tuple(float(np.median(a[i:j])) for i, j in zip(bounds[:-1], bounds[1:], strict=True) if j > i)
    got = window_interval(meds, level) if sizes else None
    if got is None:
        return RowInterval(med, lo, hi, lo, hi, None, meds)
    _, b_lo, b_hi = got
    low = min(x for x in (b_lo, lo, med) if x is not None)
    high = max(x for x in (b_hi, hi, med) if x is not None)
    return RowInterval(med, low, high, lo, hi, (b_lo, b_hi), meds)
