"""The A/B gate's statistic: one row's timing judged on the paired ratios of adjacent blocks.

Each pair i holds one block of A and one block of B timed back to back (measure/ab.py), so a speed level of
the machine that lasts longer than a pair (seconds to minutes on a shared VM) falls on both and cancels in
r_i = log(stat(B_i) / stat(A_i)). The change is the 20 %-trimmed mean of the r_i (robust to a burst that
hits one block of a pair), with its Tukey-McLaughlin standard error (winsorized variance) and Student's t
on n - 2g - 1 degrees of freedom, as Wilcox describes it (Introduction to Robust Estimation, ch. 4). The
order inside each pair is drawn at random and the pairs of each order are averaged apart, then together
(``crossover``): an advantage of going first or second cancels instead of widening the interval.

Verdict for a rule of threshold T (relative, e.g. p50:+5%; worse direction positive): a pass when the
one-sided 95 % upper bound of the change is within T (the interval rules out a change beyond the rule: a
one-sided equivalence test, so a change beyond T passes in at most 5 % of runs, however noisy the row); a
regression when the estimate is beyond T and the one-sided 95 % lower bound is above no change (the slowdown
is real and material), taken again over all of a gate's timing checks by Holm's step-down (regress/family.py:
unchanged code fails a gate run in at most 5 %); otherwise the measurement cannot tell (not judged), its
estimate and interval shown. The report shows the two-sided 90 % interval, whose ends are those bounds. The
p-values and quantiles are Student's t's own (regress/tdist.py).

Several process pairs (measure/ab.py): each pair's change is the median of its own pairs' log ratios, the
estimate their 20 %-trimmed mean, its standard error from their spread (Tukey-McLaughlin), Student's t on
R - 2g - 1 degrees of freedom (``replicated``). How many process pairs: decided once after the planned ones,
from their spread alone (``replicates_needed``: Stein's two stages), as many as let an unchanged row pass with
95 % probability, at most PairPlan.max_replicates. Simulated at the noise measured on the 2-core VM
(tests/test_ab_rates.py, tests/test_ab_gate.py), with the rates each claim is asserted on.

The minimal detectable change (MDC) is the true change that the regression rule flags with 95 % probability
at the noise this row showed: max(T, t_.95 * se) + t_.95 * se (on the log scale). The change that would let
an unchanged row pass is the other question (``equivalence_width``, ``pairs_to_tell``): a row not judged says
how many process pairs that would take.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infer_compare.regress.balance import balanced
from infer_compare.regress.tdist import t_quantile, t_sf

TRIM = 0.2
# the standard deviation of a normal sample winsorized at its 20 % and 80 % quantiles, over its own
WINSOR_SD = 0.642
CONFIDENCE = 0.90  # the two-sided interval shown: its ends are the verdict's one-sided 95 % bounds
ONE_SIDED = 0.95  # the level of the pass's upper bound and of the regression's lower bound
POWER = 0.95  # of the regression rule at the MDC, and of an unchanged row's pass at the planned process pairs
# the power the second stage plans for twice the rule at the family's first Holm level: more than the 95 %
# wanted, as 5 process pairs' spread (2 degrees of freedom) often says less than there is, and the quantile
# far out in the tail then falls short (planned at 95 %, 91 % of +10 % on one row of 18 at a 4 % block sd
# were caught in tests/test_ab_rates.py's runs; at 99 %, 95 %)
DETECT_POWER = 0.99
MIN_PAIRS = 6
# block statistics per timing metric: latency per block (worse up), throughput (worse down)
PAIRED_METRICS = ("p50", "mean", "throughput")


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

    def upper(self, level: float = ONE_SIDED) -> float:
        """The one-sided upper confidence bound of the ratio at ``level``: the change it rules out beyond."""
        return math.exp(self.est + t_quantile(level, self.df) * self.se)

    def p_value(self) -> float:
        """The one-sided p-value of no change against B worse (Student's t of the estimate over its se)."""
        if not self.se > 0:
            return 0.0 if self.est > 0 else 1.0
        return t_sf(self.est / self.se, self.df) if math.isfinite(self.se) else 1.0

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


def replicated(xs: list[float], replicates: int, first: str = "", loaded_first: str = "") -> Paired:
    """The change from ``replicates`` process pairs, each of which timed an equal share of the pairs (in time
    order, half of them with A first): each process pair's change is the median of its pairs' log ratios (a
    speed level or a burst that lasts a block or longer falls on both blocks of a pair; a pair whose one block
    a neighbour hit drops out; with as many pairs of either order, the two middle ones are one of each, so
    that an advantage of going first cancels); the estimate is their 20 %-trimmed mean, with its
    Tukey-McLaughlin standard error from their spread (``trimmed``: of 5 process pairs the highest and the
    lowest are set aside, 2 degrees of freedom). That spread holds what one process pair's blocks cannot show:
    two processes of the same code differing lastingly (where their memory landed); trimming sets aside a
    process that runs its whole life 1.5-1.7 times slower (seen on the 2-core VM in about 3 % of the LeNet-5
    PyTorch and ONNX Runtime processes, and in plain runs). ``first``: which side went first in each pair
    ("a" or "b", one letter per log ratio), for the floor below ('' where not recorded). ``loaded_first``:
    which side each process pair loaded first (one letter per process pair): the kept process pairs of either
    order weigh alike (regress/balance.py), so that what going first leaves cancels at any count."""
    k = len(xs) // replicates
    groups = [xs[r * k:(r + 1) * k] for r in range(replicates)]
    meds = [_median(g) for g in groups]
    t = trimmed(meds)
    got = balanced(meds, loaded_first)
    est, factor = got if got else (t.est, 1.0)
    g = int(math.floor(TRIM * replicates))
    # the spread between process pairs is never taken as less than their own blocks' noise alone would give
    # (a random-effects floor): of 5 process pairs, the 3 kept can agree closely by chance while the pairs'
    # medians are far noisier (PyTorch's MobileNet v2 on the 2-core VM: 4 of 5 within 2.4 %, one at -33 %,
    # its pairs within a process 9 % apart); WINSOR_SD: a winsorized spread as the kept ones' would be for
    # that noise
    floor = WINSOR_SD * _within(_order_removed(xs, first, k, replicates)) / \
        ((1 - 2 * g / replicates) * math.sqrt(replicates))
    return Paired(len(xs), est, max(t.se, floor) * factor, t.df, replicates)


def _order_removed(xs: list[float], first: str, k: int, replicates: int) -> list[list[float]]:
    """The process pairs' log ratios with the advantage of going first taken out (half the difference between
    the medians of the pairs of either order): the median of a process pair's pairs, as many of either order,
    cancels it, so their scatter around it must not count it as noise (a side whose block goes second 8 %
    slower would otherwise floor the spread at several times the noise the medians have)."""
    if len(first) != len(xs) or not ("a" in first and "b" in first):
        return [xs[r * k:(r + 1) * k] for r in range(replicates)]
    d = (_median([x for x, f in zip(xs, first, strict=True) if f == "a"])
         - _median([x for x, f in zip(xs, first, strict=True) if f == "b"])) / 2
    adj = [x - d if f == "a" else x + d for x, f in zip(xs, first, strict=True)]
    return [adj[r * k:(r + 1) * k] for r in range(replicates)]


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


def projected(p: Paired, n: int) -> Paired:
    """``p`` as ``n`` process pairs of the same spread would give it (``p.groups`` of them gave ``p``): the
    winsorized spread kept, the standard error and the degrees of freedom of the 20 %-trimmed mean of ``n``.
    For one process pair (``p.groups`` 1), ``n`` is its pairs of blocks, its standard error over their
    square root."""
    if p.groups <= 1:
        return Paired(n, p.est, p.se * math.sqrt(p.n / n), max(1.0, p.df * n / p.n), 1)
    g0, g = int(math.floor(TRIM * p.groups)), int(math.floor(TRIM * n))
    spread = p.se * (1 - 2 * g0 / p.groups) * math.sqrt(p.groups)
    return Paired(p.n, p.est, spread / ((1 - 2 * g / n) * math.sqrt(n)), max(1.0, n - 2 * g - 1), n)


def equivalence_width(p: Paired, power: float = POWER) -> float:
    """How far (log scale) below the rule an unchanged row's one-sided upper bound must start to fall within
    it with probability ``power`` at this noise: (t_.95 + t_power) times the standard error, the sample size
    of a one-sided equivalence test."""
    return (t_quantile(ONE_SIDED, p.df) + t_quantile(power, p.df)) * p.se


def replicates_needed(xs: list[float], replicates: int, threshold: float, most: int, power: float = POWER,
                      checks: int = 1, detect: float = 2.0) -> int:
    """How many process pairs (at most ``most``) let an unchanged row's one-sided 95 % upper bound fall within
    ``threshold`` (relative) with probability ``power``, and a change of ``detect`` times the threshold be
    flagged with 95 % probability (planned at DETECT_POWER) at the first level of Holm's steps over ``checks``
    timing checks (5 % / checks: one slower row among unchanged ones), projected from the spread of the first
    ``replicates`` (``xs``: their pairs' log ratios, as ``replicated`` takes them). A two-stage design
    (Stein's): the number is taken once, from the first stage's spread alone, never from the change it shows,
    so the verdict taken on all process pairs keeps its error rates (a look at the change would have to be
    paid for out of them). With one check the first question decides: where an unchanged row passes with
    95 % probability, a change of 1.5 times the rule is flagged with 95 % probability or more. With many, the
    second can: of 18, the first level is 0.28 %, which 5 process pairs' 2 degrees of freedom put at 13
    standard errors. Where no number up to ``most`` answers both, the one closest to it (the fewest of
    equals): more is not always better, as the trimmed mean sets aside one more process pair at each fifth
    (of 10 it keeps 6, of 9 it keeps 7)."""
    p = replicated(xs, replicates)
    tau, goal = math.log1p(threshold), math.log1p(detect * threshold)
    level = 1 - (1 - ONE_SIDED) / max(1, checks)
    best, best_s = replicates, math.inf
    for n in range(replicates, max(replicates, most) + 1):
        q = projected(p, n)
        score = equivalence_width(q, power) / tau
        if checks > 1:  # with one, a pass at 95 % already puts the MDC within 1.5 times the rule
            score = max(score, math.log1p(q.mdc(threshold, level, DETECT_POWER)) / goal)
        if score <= 1:
            return n
        if score < best_s - 1e-12:
            best, best_s = n, score
    return best


def pairs_to_tell(p: Paired, threshold: float, most: int = 40, power: float = POWER) -> int | None:
    """The fewest process pairs (pairs of blocks for one process pair) at which an unchanged row of this
    noise would pass with probability ``power``, as ``replicates_needed`` projects them; None beyond
    ``most`` (process pairs) or 20 times the pairs (one process pair)."""
    tau = math.log1p(threshold)
    if p.groups > 1:
        return next((n for n in range(p.groups, most + 1)
                     if equivalence_width(projected(p, n), power) <= tau), None)
    lo, hi = p.n, 20 * p.n  # one process pair: the width falls with every pair, so bisect
    if equivalence_width(projected(p, hi), power) > tau:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if equivalence_width(projected(p, mid), power) <= tau else (mid + 1, hi)
    return lo


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
