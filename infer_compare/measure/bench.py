"""The measuring harness. It owns the clock (``time.perf_counter_ns``).

One cell, in order:

1. the **cold call**, timed on its own (``first_ns``): lazy initialisation,
   compilation, autotuning and first allocations land here, never in the samples;
2. **warm-up** until both ``warmup_iters`` calls (the cold call included) and
   ``warmup_time_s`` seconds after the cold call are reached; with ``warmup_until_stable``
   (the comparison sets it for GPU rows) it ends earlier once the calls are steady: the
   median of the last STABLE_WINDOW calls within STABLE_TOLERANCE of the median of the
   STABLE_WINDOW before them, at least ``warmup_iters`` calls and STABLE_MIN_S made
   (``warmup_stopped_by`` says which ended it: "stable", "time" or "calls");
3. the **measured loop**: each sample is the time from the end of the previous call
   to the end of this one, so the samples add up exactly to the loop's wall time
   (throughput and latency agree) and include the harness's own per-call overhead,
   which the ``null`` runner measures. The loop stops when

   * at least ``min_iters`` calls and ``min_time_s`` seconds are measured **and** the
     95 % confidence interval of the median is within ``target_ci`` of it
     (relative half-width), or
   * the cell's budget ``max_time_s`` is spent, or ``max_iters`` is reached.

The confidence interval is distribution-free: the order statistics whose ranks a
Binomial(n, 1/2) puts around the median (exact up to n = 1000, the normal
approximation above). It is checked after geometrically spaced sample counts
(every 1/8 more samples, so the total cost stays linear in n), with the clock
stopped: the time a check takes is in no sample and not in the wall time
(``paused_ns`` says how much it was). With ``target_ci`` None or 0 the loop stops
as soon as ``min_iters`` and ``min_time_s`` are reached.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infer_compare.base.statistics import CI_LEVEL, ci_rel, median_ci, median_ci_ranks  # noqa: F401 (re-exported)

STABLE_WINDOW = 8  # warmup_until_stable: calls per window compared
STABLE_TOLERANCE = 0.02  # the last window's median within this of the window's before it
STABLE_MIN_S = 0.02  # and at least this long a warm-up (clock ramps of a few calls are not "stable")

# LoopResult.stopped_by
STOP_TARGET = "target"  # the median's CI reached target_ci
STOP_BUDGET = "budget"  # max_time_s was spent first
STOP_MAX_ITERS = "max_iters"
STOP_MIN = "min"  # no target: min_iters and min_time_s were reached


@dataclass(frozen=True)
class LoopSettings:
    warmup_iters: int = 2  # warm-up calls, the cold call included
    min_iters: int = 5
    min_time_s: float = 1.0  # floor of the measured loop's duration
    max_iters: int = 100_000
    max_time_s: float | None = 10.0  # the cell's budget for the measured loop (never below min_time_s)
    target_ci: float | None = 0.02  # relative half-width of the median's 95 % CI; None/0: no target
    warmup_time_s: float = 0.2  # warm-up floor by time, counted from the end of the cold call (a cap when stable)
    warmup_until_stable: bool = False  # end the warm-up once the call times are steady (see the module's doc)


@dataclass
class LoopResult:
    samples_ns: list[int]
    wall_ns: int  # == sum(samples_ns): the measured loop without the paused CI checks
    first_ns: int | None  # the very first call (cold), when this loop made it
    warmup_calls: int = 0  # after the cold call
    warmup_ns: int = 0
    warmup_stopped_by: str = ""  # "stable" (warmup_until_stable), "time" or "calls"
    median_ns: float | None = None
    ci_low_ns: float | None = None  # 95 % CI of the median (None: fewer than 6 samples)
    ci_high_ns: float | None = None
    target_ci: float | None = None
    stopped_by: str = ""  # STOP_TARGET, STOP_BUDGET, STOP_MAX_ITERS or STOP_MIN
    ci_checks: int = 0
    paused_ns: int = 0  # time spent checking the CI, clock stopped
    energy: Any = None  # what energy_meter.stop() returned (energy.EnergyReading or None)

    @property
    def n(self) -> int:
        return len(self.samples_ns)

    @property
    def ci_rel(self) -> float | None:
        """Half-width of the median's CI relative to the median."""
        return ci_rel(self.median_ns, self.ci_low_ns, self.ci_high_ns)

    @property
    def target_met(self) -> bool:
        r = self.ci_rel
        return bool(self.target_ci) and r is not None and r <= float(self.target_ci or 0)

    def summary(self) -> dict[str, Any]:
        """Everything but the samples, JSON-ready (for the child's result)."""
        return {"n": self.n, "wall_ns": self.wall_ns, "first_ns": self.first_ns, "warmup_calls": self.warmup_calls,
                "warmup_ns": self.warmup_ns, "warmup_stopped_by": self.warmup_stopped_by,
                "median_ns": self.median_ns, "ci_low_ns": self.ci_low_ns,
                "ci_high_ns": self.ci_high_ns, "ci_rel": self.ci_rel, "ci_level": CI_LEVEL,
                "target_ci": self.target_ci, "target_met": self.target_met, "stopped_by": self.stopped_by,
                "ci_checks": self.ci_checks, "paused_ns": self.paused_ns}


def steady(times_ns: list[int], window: int = STABLE_WINDOW, tolerance: float = STABLE_TOLERANCE) -> bool:
    """True when the median of the last ``window`` call times is within ``tolerance`` of the median of the
    ``window`` before them."""
    if len(times_ns) < 2 * window:
        return False
    last = sorted(times_ns[-window:])[window // 2]
    before = sorted(times_ns[-2 * window:-window])[window // 2]
    return before > 0 and abs(last - before) <= tolerance * before


def _warm_up(fn: Callable[[Any], Any], x: Any, s: LoopSettings, calls_made: int,
             clock: Callable[[], int]) -> tuple[int, int, str]:
    """Warm-up after the cold call: (calls, ns, what ended it)."""
    need_calls = max(0, s.warmup_iters - calls_made)
    need_ns = int(max(0.0, s.warmup_time_s) * 1e9)
    min_ns = min(need_ns, int(STABLE_MIN_S * 1e9))
    start = now = clock()
    calls, times = 0, []
    while calls < need_calls or now - start < need_ns:
        if s.warmup_until_stable and calls >= need_calls and now - start >= min_ns and steady(times):
            return calls, now - start, "stable"
        t0 = now
        fn(x)
        calls += 1
        now = clock()
        times.append(now - t0)
    return calls, now - start, "time" if need_ns and now - start >= need_ns else "calls"


def time_loop(fn: Callable[[Any], Any], x: Any, s: LoopSettings, first_call_done: bool = False,
              clock: Callable[[], int] = time.perf_counter_ns, energy_meter: Any = None) -> LoopResult:
    """Call ``fn(x)`` repeatedly; ``x`` is prepared before timing starts.

    ``first_call_done``: the runner already made the cold call (no ``first_ns`` then).
    ``clock``: nanoseconds, monotonic; only tests replace it.
    ``energy_meter``: an object with ``start()`` and ``stop()`` (energy.EnergyMeter), started just before
    the measured loop and stopped just after it (outside every sample); ``LoopResult.energy`` is its reading.
    """
    first_ns = None
    if not first_call_done:
        t0 = clock()
        fn(x)
        first_ns = clock() - t0
    warm_calls, warm_ns, warm_stop = _warm_up(fn, x, s, 0 if first_call_done else 1, clock)
    target = float(s.target_ci) if s.target_ci and s.target_ci > 0 else None
    samples: list[int] = []
    append = samples.append
    min_n, max_n = max(1, s.min_iters), max(1, s.max_iters)
    min_ns = int(max(0.0, s.min_time_s) * 1e9)
    budget_ns = None if s.max_time_s is None else int(max(s.max_time_s, s.min_time_s) * 1e9)
    next_check, checks, paused, stop = min_n, 0, 0, ""
    if energy_meter is not None:
        energy_meter.start()
    start = t0 = clock()
    while True:
        fn(x)
        t1 = clock()
        append(t1 - t0)
        t0 = t1
        n = len(samples)
        if n >= max_n:
            stop = STOP_MAX_ITERS
            break
        elapsed = t1 - start
        if budget_ns is not None and elapsed >= budget_ns:
            stop = STOP_BUDGET
            break
        if n < next_check or elapsed < min_ns:
            continue
        if target is None:
            stop = STOP_MIN
            break
        checks += 1
        med, lo, hi = median_ci(samples)
        r = ci_rel(med, lo, hi)
        if r is not None and r <= target:
            stop = STOP_TARGET
            break
        next_check = n + max(1, n // 8)
        t0 = clock()  # the check is not in the next sample ...
        paused += t0 - t1  # ... nor in the wall time
    reading = energy_meter.stop() if energy_meter is not None else None
    wall_ns = t1 - start - paused
    med, lo, hi = median_ci(samples)
    return LoopResult(samples_ns=samples, wall_ns=wall_ns, first_ns=first_ns, warmup_calls=warm_calls,
                      warmup_ns=warm_ns, warmup_stopped_by=warm_stop, median_ns=med, ci_low_ns=lo, ci_high_ns=hi,
                      target_ci=target, stopped_by=stop, ci_checks=checks, paused_ns=paused, energy=reading)
