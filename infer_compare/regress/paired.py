"""The A/B gate's statistic: one row's timing judged on the paired ratios of adjacent blocks.

Each pair i holds one block of A and one block of B timed back to back (measure/ab.py), so a speed level of
the machine that lasts longer than a pair (seconds to minutes on a shared VM) falls on both and cancels in
r_i = log(stat(B_i) / stat(A_i)). The change is the 20 %-trimmed mean of the r_i (robust to a burst that
hits one block of a pair), with its Tukey-McLaughlin standard error (winsorized variance) and Student's t
on n - 2g - 1 degrees of freedom, as Wilcox describes it (Introduction to Robust Estimation, ch. 4). The
order inside each pair is drawn at random and the pairs of each order are averaged apart, then together
(``crossover``): an advantage of going first or second cancels instead of widening the interval.

Verdict for a rule of threshold T (relative, e.g. p50:+5%): a regression when the estimated change is beyond
T and the one-sided 95 % lower bound is above no change (the slowdown is real and it is material: the gate
asks one question, "is B slower?"); a pass when the estimate is within T; "within noise" (not judged) when it
is beyond T but the lower bound reaches 0. The report shows the two-sided 90 % interval, whose lower end is
that bound. The rows are measured once, a fixed number of pairs: nothing is measured again until it passes.

Several process pairs (measure/ab.py): each pair's change is the median of its own pairs' log ratios, the
estimate their 20 %-trimmed mean, its standard error from their spread (Tukey-McLaughlin), Student's t on
R - 2g - 1 degrees of freedom (``replicated``). Simulated with the process differences, the slow processes and
the noise of the 2-core VM (tests/test_ab_gate.py), five process pairs keep unchanged code's false failures at
1 % or less and catch +10 % in 95 % or more.

The minimal detectable change (MDC) is the true change that this rule flags with 95 % probability at the
noise this row showed: max(T, t_.95 * se) + t_.95 * se (on the log scale). A row whose MDC is far beyond
T says so: the gate cannot see T there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TRIM = 0.2
# the standard deviation of a normal sample winsorized at its 20 % and 80 % quantiles, over its own
WINSOR_SD = 0.642
CONFIDENCE = 0.90  # the two-sided interval shown: its lower end is the verdict's one-sided 95 % bound
ONE_SIDED = 0.95  # the level of the regression verdict's lower bound
POWER = 0.95
MIN_PAIRS = 6
# block statistics per timing metric: latency per block (worse up), throughput (worse down)
PAIRED_METRICS = ("p50", "mean", "throughput")


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (Cornish-Fisher expansion of the normal one; within 0.5 % of the exact value
    for df >= 3 at the quantiles used here)."""
    z = _z(p)
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3


def _z(p: float) -> float:
    """Standard normal quantile (Acklam's rational approximation, relative error below 1.2e-9)."""
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
         -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
         -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
         4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
    if p < 0.02425:
        q = math.sqrt(-2 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    if p > 1 - 0.02425:
        return -_z(1 - p)
    q = p - 0.5
    r = q * q
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)


@dataclass(frozen=True)
class Paired:
    """The change of one timing statistic from A to B over ``n`` pairs (log scale inside, ratios outside)."""

    n: int
    est: float  # trimmed mean of the log ratios (B over A, in the direction of the metric)
    se: float
    df: float
    groups: int = 1  # process pairs whose spread gave ``se`` (1: one pair's blocks)

    def ratio(self) -> float:
        return math.exp(self.est)

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        h = t_quantile(0.5 + confidence / 2, self.df) * self.se
        return math.exp(self.est - h), math.exp(self.est + h)

    def lower(self, level: float = ONE_SIDED) -> float:
        """The one-sided lower confidence bound of the ratio at ``level``."""
        return math.exp(self.est - t_quantile(level, self.df) * self.se)

    def mdc(self, threshold: float, level: float = ONE_SIDED, power: float = POWER) -> float:
        """The relative change (worse direction) flagged with probability ``power`` at a rule of
        ``threshold`` (relative), given this row's noise."""
        tcrit = t_quantile(level, self.df) * self.se
        return math.exp(max(math.log1p(threshold), tcrit) + t_quantile(power, self.df) * self.se) - 1


def trimmed(xs: list[float], trim: float = TRIM) -> Paired:
    """The trimmed mean of ``xs`` and its standard error (winsorized variance)."""
    n = len(xs)
    s = sorted(xs)
    g = int(math.floor(trim * n))
    core = s[g:n - g]
    est = sum(core) / len(core)
    w = [min(max(x, s[g]), s[n - g - 1]) for x in s]
    mw = sum(w) / n
    var_w = sum((x - mw) ** 2 for x in w) / (n - 1) if n > 1 else 0.0
    se = math.sqrt(var_w) / ((1 - 2 * g / n) * math.sqrt(n)) if n > 1 else float("inf")
    return Paired(n, est, se, max(1.0, n - 2 * g - 1))


def crossover(xs: list[float], a_first: list[bool], trim: float = TRIM) -> Paired:
    """The change from pairs measured in either order (A then B, or B then A), as a 2x2 crossover is analysed:
    the trimmed mean within each order, averaged, so that an effect of going second (a runtime's threads of
    the side that just ran still spinning, caches it left cold) cancels instead of adding to the spread. With
    fewer than 3 pairs in either order, all pairs together."""
    ab = [x for x, f in zip(xs, a_first, strict=True) if f]
    ba = [x for x, f in zip(xs, a_first, strict=True) if not f]
    if min(len(ab), len(ba)) < 3:
        return trimmed(xs, trim)
    p, q = trimmed(ab, trim), trimmed(ba, trim)
    return Paired(len(xs), (p.est + q.est) / 2, math.sqrt(p.se ** 2 + q.se ** 2) / 2, p.df + q.df)


def replicated(xs: list[float], replicates: int) -> Paired:
    """The change from ``replicates`` process pairs, each of which timed an equal share of the pairs (in time
    order, half of them with A first): each process pair's change is the median of its pairs' log ratios (a
    speed level or a burst that lasts a block or longer falls on both blocks of a pair; a pair whose one block
    a neighbour hit drops out; with as many pairs of either order, the two middle ones are one of each, so
    that an advantage of going first cancels); the estimate is their 20 %-trimmed mean, with its
    Tukey-McLaughlin standard error from their spread (``trimmed``: of 5 process pairs the highest and the
    lowest are set aside, 2 degrees of freedom). That spread holds what one process pair's blocks cannot show:
    two processes of the same code differing lastingly (where their memory landed); trimming sets aside a
    process that runs its whole life 1.5-1.7 times slower (seen on the 2-core VM in about 3 % of the LeNet-5
    PyTorch and ONNX Runtime processes, and in plain runs)."""
    k = len(xs) // replicates
    groups = [xs[r * k:(r + 1) * k] for r in range(replicates)]
    t = trimmed([_median(g) for g in groups])
    g = int(math.floor(TRIM * replicates))
    # the spread between process pairs is never taken as less than their own blocks' noise alone would give
    # (a random-effects floor): of 5 process pairs, the 3 kept can agree closely by chance while the pairs'
    # medians are far noisier (PyTorch's MobileNet v2 on the 2-core VM: 4 of 5 within 2.4 %, one at -33 %,
    # its pairs within a process 9 % apart); WINSOR_SD: a winsorized spread as the kept ones' would be for
    # that noise
    floor = WINSOR_SD * _within(groups) / ((1 - 2 * g / replicates) * math.sqrt(replicates))
    return Paired(len(xs), t.est, max(t.se, floor), t.df, replicates)


def _within(groups: list[list[float]]) -> float:
    """The standard deviation that one process pair's median would have from its own pairs' noise alone (no
    difference between processes): a robust scale of the pairs around their process pair's median (MAD), over
    the square root of the pairs per process pair (times 1.25 for a median of more than 2)."""
    k = len(groups[0]) if groups else 0
    if k < 2:
        return 0.0
    if k == 2:
        return 1.4826 * _median([abs(a - b) for a, b in groups]) / math.sqrt(2) / math.sqrt(2)
    dev = [abs(x - _median(gr)) for gr in groups for x in gr]
    return 1.2533 * 1.4826 * _median(dev) * math.sqrt(k / (k - 1)) / math.sqrt(k)


def replicates_needed(xs: list[float], replicates: int, threshold: float, goal: float, most: int) -> int:
    """How many process pairs (at most ``most``) would let the row see a change of ``goal`` (relative, with
    95 % power) at a rule of ``threshold``, projected from the spread of the first ``replicates`` (``xs``:
    their pairs' log ratios, as ``replicated`` takes them): the winsorized spread kept, the standard error and
    the degrees of freedom of the 20 %-trimmed mean of that many. A two-stage design (Stein's): the number is
    taken once, from the first stage's spread alone, never from the change it shows, and the verdict is then
    taken on all process pairs. Where no number up to ``most`` reaches ``goal``, the one whose projected
    detectable change is smallest (the fewest of equals): more is not always better, as the trimmed mean sets
    aside one more process pair at each fifth (of 10 it keeps 6, of 9 it keeps 7)."""
    p = replicated(xs, replicates)
    g0 = int(math.floor(TRIM * replicates))
    spread = p.se * (1 - 2 * g0 / replicates) * math.sqrt(replicates)
    best, best_mdc = replicates, math.inf
    for n in range(replicates, max(replicates, most) + 1):
        g = int(math.floor(TRIM * n))
        q = Paired(p.n, p.est, spread / ((1 - 2 * g / n) * math.sqrt(n)), max(1.0, n - 2 * g - 1), n)
        m = q.mdc(threshold)
        if m <= goal:
            return n
        if m < best_mdc - 1e-12:
            best, best_mdc = n, m
    return best


def _median(v: list) -> float:
    s = sorted(v)
    m = len(s) // 2
    return float(s[m]) if len(s) % 2 else (s[m - 1] + s[m]) / 2


def block_stat(metric: str, block: list[int]) -> float:
    """One block's figure for ``metric``, as a time (throughput: the mean time per call, its inverse)."""
    return _median(block) if metric == "p50" else sum(block) / len(block)


def log_ratios(metric: str, a: list[int], b: list[int], calls: int) -> list[float]:
    """log(stat(B_i) / stat(A_i)) for each pair of blocks, signed so that positive is worse for ``metric``
    (latency up; throughput down: the time per call up)."""
    n = min(len(a), len(b)) // max(1, calls)
    out = []
    for i in range(n):
        ta = block_stat(metric, a[i * calls:(i + 1) * calls])
        tb = block_stat(metric, b[i * calls:(i + 1) * calls])
        if ta > 0 and tb > 0:
            out.append(math.log(tb / ta))
    return out
