"""The A/B gate's tail rules (p90, p95, p99, min) and load rule, judged per process pair.

A tail cannot be judged block by block: a block holds 3 to a few hundred calls, and its p99 is its slowest
call. Nor from all of a process pair's calls as they are: a speed level of the machine that lasts a few
blocks, or a neighbour that slows one block, moves that pair's p99 by as much as it lasts (simulated with the
2-core VM's noise and a neighbour in one block of ten, tests/test_ab_tails.py: p99:+10% then passed unchanged
code in 18 % of runs and failed it in 3 %, and caught a uniform +10 % in 14 %; as below, 96 %, 0 and 50 %).
Both take whole blocks, so each call is taken over its own block's median: what is left is the code's own
tail, and a stall of one call stays in it. Each process pair's figure is

    r = median_i log(med(B_i) / med(A_i)) + log(q({B calls / their block's median}) / q({A's likewise}))

the paired median change (as ``replicated`` takes it, regress/paired.py) plus the change of the tail beyond
the median, q the quantile (type 7, numpy's default) or the minimum over all that process pair's calls of
each side. The estimate over the process pairs is ``replicated``'s: the 20 %-trimmed mean of the r (a process
slow all its life set aside), balanced over which side each process pair loaded first (regress/balance.py),
its Tukey-McLaughlin standard error from their spread and Student's t on R - 2g - 1 degrees of freedom. That
spread is what makes a p99 over a few hundred calls honest: it holds how far one process pair's p99 moves from
its few calls past it and from the bursts of other processes (one call in 200 on the VM), without a model of
either. Blind to a slowness of B that takes whole blocks in a few of them (a block that B alone ran slow is
taken for a neighbour's); a slowness in most of them is the median's.

A quantile needs calls past it in each process pair (p99: at least 100 calls a side, for one past it): with
fewer, the row is not judged and says so. One process pair (``--replicates 1``): the quantiles' standard error
is a bootstrap's over that pair's pairs of blocks, the two blocks of a pair drawn together; min is not judged
(the fastest call of a resample is nearly always the same call, so the bootstrap cannot say how far it
moves). ``max`` is one call of each side: no sample says where it would fall again, so a rule on it is
refused before anything is measured (``refused_rules``).

Load time: each process pair loads both sides once, so its figure is log(load(B) / load(A)) of that pair's
loads (``extra["ab"]["load_s"]``, one per process pair), combined the same way; at least 3 process pairs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from infer_compare.base.errors import UsageError
from infer_compare.base.records import RunRecord
from infer_compare.regress.balance import balanced
from infer_compare.regress.metrics import METRICS
from infer_compare.regress.paired import TRIM, Paired, trimmed
from infer_compare.regress.results import DISTURBED, FEW_PAIRS, NA, Check
from infer_compare.regress.rules import Rule, parse_rules

TAILS = ("p90", "p95", "p99", "min")  # judged per process pair from all of each side's calls
REFUSED = {"max": "the A/B gate cannot judge max (one call of each side); judge p99 instead"}
PER_PROCESS_PAIR = (*TAILS, *REFUSED, "load")  # the metrics whose rules ``tail_check`` takes
BOOT = 200  # bootstrap resamples of one process pair's pairs of blocks
MIN_LOADS = 3  # process pairs a load rule needs: one load a side in each, judged on their spread


def refused_rules(rules: Any, replicates: int | None = None) -> str:
    """Why the A/B gate cannot judge one of ``rules`` (as ``--fail-on`` takes them), in one line, '' when it
    can judge them all: for the command line to refuse before measuring. ``replicates``: the process pairs
    planned (some rules need several)."""
    try:
        parsed = parse_rules(rules)
    except UsageError as e:
        return str(e)
    for r in parsed:
        if r.metric in REFUSED:
            return f"--fail-on {r}: {REFUSED[r.metric]}"
        if replicates is not None and replicates < 2 and r.metric == "min":
            return (f"--fail-on {r}: the A/B gate judges min from the spread between process pairs, and one "
                    "process pair (--replicates 1) has none: --replicates 3 or more")
        if replicates is not None and replicates < MIN_LOADS and r.metric == "load":
            return (f"--fail-on {r}: the A/B gate judges the load time from the spread between process pairs "
                    f"(one load a side in each): --replicates {MIN_LOADS} or more")
    return ""


def tail_check(rule: Rule, label: str, a: RunRecord, b: RunRecord, *, verdict: Callable[..., Check],
               busy: Callable[[dict], str], marked: Callable[[Check, str], Check]) -> Check:
    """One rule of PER_PROCESS_PAIR on one row from the two sides' A/B samples. The paired rules' own steps
    (regress/ab_judge.py), so that a tail is judged and marked as a median is: ``verdict`` (the check from a
    Paired), ``busy`` (why the blocks' load figures say nothing of the code, '' when they do) and ``marked``
    (a check not judged for that reason, its estimate still shown)."""
    m = METRICS[rule.metric]
    va, vb = m.get(a), m.get(b)
    if rule.metric in REFUSED:
        return Check(rule, label, va, vb, None, None, NA, f"{m.title}: {REFUSED[rule.metric]}")
    ab_a, ab_b = (a.extra or {}).get("ab") or {}, (b.extra or {}).get("ab") or {}
    calls = int(ab_b.get("calls_per_block") or 0)
    if not calls or ab_a.get("calls_per_block") != calls or not (a.samples_ns and b.samples_ns):
        return Check(rule, label, va, vb, None, None, FEW_PAIRS, f"{m.title}: the two sides were not "
                     "measured in paired blocks (no A/B samples in one of them)")
    why_busy = busy(ab_b.get("load") or {})
    p, why = _statistic(rule.metric, a, b, ab_a, ab_b)
    if p is None:
        return Check(rule, label, va, vb, None, None, DISTURBED if why_busy else FEW_PAIRS,
                     f"{m.title} not judged: {why_busy}" if why_busy else f"{m.title}: {why}")
    c = verdict(rule, label, m, p, (va, vb), p.n, calls)
    if rule.metric == "load":  # its figures are the process pairs' loads, not their blocks
        c = replace(c, message=c.message.replace(f"{p.n} pairs of {calls}-call blocks in {p.n} process pairs",
                                                 f"the loads of {p.n} process pairs"))
    return marked(c, why_busy) if why_busy else c


def _statistic(metric: str, a: RunRecord, b: RunRecord, ab_a: dict, ab_b: dict) -> tuple[Paired | None, str]:
    reps = int(ab_a.get("replicates") or 1), int(ab_b.get("replicates") or 1)
    if reps[0] != reps[1]:
        return None, (f"the two sides' rows come from different A/B runs ({reps[0]} and {reps[1]} process "
                      "pairs)")
    order = str(ab_b.get("loaded_first") or "")
    if metric == "load":
        return load_statistic(ab_a.get("load_s") or [], ab_b.get("load_s") or [], order)
    return tail_statistic(metric, a.samples_ns, b.samples_ns, int(ab_b["calls_per_block"]), reps[1], order)


def needed_calls(metric: str) -> int:
    """Calls of each side a process pair needs for ``metric``: one past its quantile (p99: 100)."""
    kind = METRICS[metric].samples
    if not kind.startswith("quantile:"):
        return 1
    q = float(kind.split(":", 1)[1]) / 100
    return max(1, math.ceil(1 / (1 - q) - 1e-9))


def calls_for(rules: Any) -> int:
    """Calls of each side a process pair should time for the tail rules among ``rules`` (0: none): ten
    beyond the quantile (p99: 1,000), where one past it is the least it can be judged on (a stall in 5 % of
    calls was caught in 89 % of simulated gates at 270 calls, 95 % or more at 900: tests/test_ab_tails.py)."""
    return max((10 * needed_calls(m) for m in _quantiles(rules)), default=0)


def _quantiles(rules: Any) -> list[str]:
    """The tail rules' quantile metrics among ``rules`` (p90, p95, p99: min needs no more calls)."""
    return sorted({r.metric for r in parse_rules(rules) if r.metric in TAILS and r.metric != "min"})


def tail_cost(rules: Any, tail_time_s: float) -> str:
    """What the tail rules among ``rules`` cost, in one line ('' when there are none): printed before the
    gate measures, so that a CI user sees why the run takes longer than a p50 gate."""
    calls = calls_for(rules)
    if not calls:
        return ""
    tails = _quantiles(rules)
    named = f"{', '.join(tails)} rule{'s' if len(tails) > 1 else ''}"
    return (f"{named}: each process pair times about {calls:,} calls a side per row (at most "
            f"{tail_time_s:g} s a side per row over all pairs), so this gate takes longer than one on "
            "p50 alone")


def tail_statistic(metric: str, a_ns: Sequence[int], b_ns: Sequence[int], calls: int, reps: int,
                   loaded_first: str = "") -> tuple[Paired | None, str]:
    """The change of ``metric`` (one of TAILS) from A to B over ``reps`` process pairs, each of which timed an
    equal share of the blocks of ``calls`` calls (in time order, as measure/ab.py lays them out), or None and
    why it cannot be taken."""
    import numpy as np

    blocks = min(len(a_ns), len(b_ns)) // max(1, calls)
    if reps < 1 or blocks % reps or blocks // reps < 2:
        return None, (f"{blocks} pairs of blocks cannot be split into {reps} process pairs of at least 2 (a "
                      "row cut short)")
    per, need = blocks // reps, needed_calls(metric)
    if per * calls < need:
        return None, (f"not judged: too few calls for {metric} ({per * calls} per side in each process pair, "
                      f"{need} needed for one past it): --side-time longer")
    if reps == 1 and metric == "min":
        return None, ("not judged: one process pair's blocks cannot say how far its fastest call moves "
                      "(--replicates 3 or more)")
    shape = (reps, per, calls)
    xa = np.asarray(a_ns[:blocks * calls], dtype=np.float64).reshape(shape)
    xb = np.asarray(b_ns[:blocks * calls], dtype=np.float64).reshape(shape)
    if not (np.all(xa > 0) and np.all(xb > 0)):
        return None, "not judged: a call timed as 0"
    stat = _stat(METRICS[metric].samples)
    xs = [float(x) for x in _figures(xa, xb, stat)]
    if reps == 1:
        return Paired(blocks, xs[0], _boot_sd(xa[0], xb[0], stat), max(1.0, per - 1.0), 1), ""
    return combined(xs, loaded_first, blocks), ""


def process_figures(metric: str, a_ns: Sequence[int], b_ns: Sequence[int], calls: int,
                    reps: int) -> list[float] | None:
    """Each process pair's log change of ``metric`` (one of TAILS), as ``tail_statistic`` combines them, or
    None where they cannot be taken: what the gate's second stage plans its process pairs from
    (regress/ab.py)."""
    import numpy as np

    blocks = min(len(a_ns), len(b_ns)) // max(1, calls)
    if reps < 2 or blocks % reps or blocks // reps < 2 or blocks // reps * calls < needed_calls(metric):
        return None
    shape = (reps, blocks // reps, calls)
    xa = np.asarray(a_ns[:blocks * calls], dtype=np.float64).reshape(shape)
    xb = np.asarray(b_ns[:blocks * calls], dtype=np.float64).reshape(shape)
    if not (np.all(xa > 0) and np.all(xb > 0)):
        return None
    return [float(x) for x in _figures(xa, xb, _stat(METRICS[metric].samples))]


def _figures(xa: Any, xb: Any, stat: Callable[[Any], Any]) -> Any:
    """Each process pair's log change of the tail (``xa``, ``xb``: its blocks, shape (..., pairs, calls)):
    the median of its pairs' log ratios of block medians, plus the log ratio of the tail statistic of all the
    calls each over its own block's median."""
    import numpy as np

    ma, mb = np.median(xa, axis=-1), np.median(xb, axis=-1)
    centre = np.median(np.log(mb / ma), axis=-1)
    flat = (*xa.shape[:-2], -1)
    qa, qb = stat((xa / ma[..., None]).reshape(flat)), stat((xb / mb[..., None]).reshape(flat))
    return centre + np.log(qb / qa)


def _stat(kind: str) -> Callable[[Any], Any]:
    """The statistic ``kind`` ("quantile:<percent>" or "min") along the last axis; quantiles interpolated
    between order statistics as numpy's percentile does by default (a sort: several times faster here)."""
    import numpy as np

    if kind == "min":
        return lambda x: x.min(axis=-1)
    q = float(kind.split(":", 1)[1]) / 100

    def quantile(x: Any) -> Any:
        s = np.sort(x, axis=-1)
        pos = q * (s.shape[-1] - 1)
        lo = int(math.floor(pos))
        hi = min(lo + 1, s.shape[-1] - 1)
        return s[..., lo] + (pos - lo) * (s[..., hi] - s[..., lo])

    return quantile


def _boot_sd(xa: Any, xb: Any, stat: Callable[[Any], Any]) -> float:
    """The standard deviation of one process pair's figure (``_figures``) over bootstrap resamples of its
    pairs of blocks (``xa``, ``xb``: its blocks, shape (pairs, calls)), the two blocks of a pair drawn
    together, as they were timed (seeded: the same row, the same figure)."""
    import numpy as np

    idx = np.random.default_rng(0).integers(0, xa.shape[0], (BOOT, xa.shape[0]))
    return float(np.std(_figures(xa[idx], xb[idx], stat), ddof=1))


def combined(xs: list[float], loaded_first: str, n: int) -> Paired:
    """The change from the process pairs' log ratios ``xs``: their 20 %-trimmed mean, balanced over the load
    orders (regress/balance.py), its Tukey-McLaughlin standard error; ``n``: the pairs of blocks behind it."""
    t = trimmed(xs)
    got = balanced(xs, loaded_first, TRIM)
    est, factor = got if got else (t.est, 1.0)
    return Paired(n, est, t.se * factor, t.df, len(xs))


def load_statistic(a_load: Sequence[float], b_load: Sequence[float],
                   loaded_first: str = "") -> tuple[Paired | None, str]:
    """The change of the load time from A to B over the process pairs (one load of each side in each), or None
    and why it cannot be taken."""
    reps = len(b_load)
    if len(a_load) != reps or reps < MIN_LOADS:
        return None, (f"not judged: the load time is one figure a side in each process pair, {reps} process "
                      f"pairs, at least {MIN_LOADS} needed (--replicates)")
    if not all(float(x) > 0 for x in (*a_load, *b_load)):
        return None, "not judged: a load time recorded as 0 (under a millisecond)"
    xs = [math.log(float(y) / float(x)) for x, y in zip(a_load, b_load, strict=True)]
    return combined(xs, loaded_first, reps), ""
