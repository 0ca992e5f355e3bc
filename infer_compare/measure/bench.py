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
3. the **measured loop**, in **windows** one after the other (at least MIN_WINDOWS; the cell's
   measuring time split, not multiplied: each window at least ``min_time_s / MIN_WINDOWS`` long and
   its share of ``min_iters``). Each sample is the time from the end of the previous call to the end
   of this one, so a window's samples add up exactly to its wall time (throughput and latency agree)
   and include the harness's own per-call overhead, which the ``null`` runner measures. Between
   windows, with the clock stopped (``paused_ns``): the load meter's reading of the window (other
   processes' CPU time on this process's cores, measure/windows.py) and the stop rule. The row's
   p50 is the median of the samples of the windows it keeps; its interval comes from the spread
   between their medians (base/statistics.row_interval: the t-interval of their centre, held by
   Stein's two-stage rule, never narrower than the within-window CI of the median). The loop stops

   * with ``target_ci``: once at least MIN_WINDOWS windows, ``min_iters`` calls and ``min_time_s``
     are measured, as many windows as the first MIN_WINDOWS' spread says the target needs
     (statistics.windows_needed), **and** the interval is within ``target_ci`` of the p50 (relative
     half-width);
   * without it (None or 0): as soon as ``min_iters`` and ``min_time_s`` are reached;
   * when the cell's budget ``max_time_s`` is spent, or ``max_iters`` is reached.

   A **disturbed** window (the meter saw other processes use the cores) is measured again: it does
   not count towards the rule, and the budget grows by its length, for at most REMEASURE_MAX windows;
   later ones count. The row keeps the clean windows where there are enough of them (MIN_WINDOWS, or
   as many as the loop made), else those the rule counted, and is then ``disturbed``. A last window
   that the budget cut to under half a window is merged into the one before it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infer_compare.base.statistics import (  # noqa: F401 (CI_LEVEL, median_ci, median_ci_ranks re-exported)
    CI_LEVEL,
    MIN_WINDOWS,
    ci_rel,
    median_ci,
    median_ci_ranks,
    row_interval,
    windows_needed,
)
from infer_compare.measure.windows import summary as load_summary

STABLE_WINDOW = 8  # warmup_until_stable: calls per window compared
STABLE_TOLERANCE = 0.02  # the last window's median within this of the window's before it
STABLE_MIN_S = 0.02  # and at least this long a warm-up (clock ramps of a few calls are not "stable")
REMEASURE_MAX = 3  # disturbed windows of one loop measured again, at most

# LoopResult.stopped_by
STOP_TARGET = "target"  # the p50's interval reached target_ci
STOP_BUDGET = "budget"  # max_time_s was spent first
STOP_MAX_ITERS = "max_iters"
STOP_MIN = "min"  # no target: min_iters and min_time_s were reached


@dataclass(frozen=True)
class LoopSettings:
    warmup_iters: int = 2  # warm-up calls, the cold call included
    min_iters: int = 5
    min_time_s: float = 1.0  # floor of the measured loop's duration (split into MIN_WINDOWS windows)
    max_iters: int = 100_000
    max_time_s: float | None = 10.0  # the cell's budget for the measured loop (never below min_time_s)
    target_ci: float | None = 0.02  # relative half-width of the p50's 95 % interval; None/0: no target
    warmup_time_s: float = 0.2  # warm-up floor by time, from the end of the cold call (a cap when stable)
    warmup_until_stable: bool = False  # end the warm-up once the call times are steady (see the module's doc)


@dataclass
class Window:
    """One window of the measured loop: ``n`` samples from ``first`` on in LoopResult.samples_ns."""

    first: int
    n: int
    start_ns: int  # from the start of the measured loop (the clock's time, the pauses between windows in it)
    wall_ns: int  # == the sum of its samples
    load: dict[str, Any] = field(default_factory=dict)  # the load meter's reading (measure/windows.py)
    disturbed: bool = False  # the meter saw other processes use the cores
    excused: bool = False  # one of the first REMEASURE_MAX disturbed windows: not counted, measured again

    def samples(self, all_samples: list[int]) -> list[int]:
        return all_samples[self.first:self.first + self.n]

    def to_dict(self, all_samples: list[int], used: bool) -> dict[str, Any]:
        mine = self.samples(all_samples)
        out = {"n": self.n, "start_s": round(self.start_ns / 1e9, 6), "wall_s": round(self.wall_ns / 1e9, 6),
               "median_ms": _median(mine) / 1e6, **self.load, "disturbed": self.disturbed,
               "remeasured": self.excused, "used": used}
        if not used:  # the row's samples are those of the windows it keeps: these are kept here
            out["samples_ns"] = list(mine)
        return out


@dataclass
class LoopResult:
    samples_ns: list[int]  # every window's samples, in order
    wall_ns: int  # == sum(samples_ns): the measured loop without the paused checks between windows
    first_ns: int | None  # the very first call (cold), when this loop made it
    warmup_calls: int = 0  # after the cold call
    warmup_ns: int = 0
    warmup_stopped_by: str = ""  # "stable" (warmup_until_stable), "time" or "calls"
    median_ns: float | None = None  # the p50 of the windows kept (``used``)
    ci_low_ns: float | None = None  # its 95 % interval (statistics.row_interval; None: too few samples)
    ci_high_ns: float | None = None
    target_ci: float | None = None
    stopped_by: str = ""  # STOP_TARGET, STOP_BUDGET, STOP_MAX_ITERS or STOP_MIN
    ci_checks: int = 0  # the stop rule's checks (after each window from the MIN_WINDOWS-th on)
    paused_ns: int = 0  # time spent between windows (load readings, the stop rule), clock stopped
    energy: Any = None  # what energy_meter.stop() returned (energy.EnergyReading or None)
    windows: list[Window] = field(default_factory=list)
    used: tuple[int, ...] = ()  # the windows the row's figures come from (indices into ``windows``)
    window_ns: int = 0  # the shortest a window was planned
    within_low_ns: float | None = None  # the within-window CI of the median of the windows kept
    within_high_ns: float | None = None

    @property
    def n(self) -> int:
        return len(self.samples_ns)

    @property
    def disturbed(self) -> bool:
        """A window the row keeps was disturbed (the load persisted past the windows measured again), or the
        windows it keeps were together: a window of a few ticks cannot be judged alone (windows.SLACK_TICKS),
        their sum can."""
        if any(self.windows[i].disturbed for i in self.used):
            return True
        kept = [{**self.windows[i].load, "wall_s": self.windows[i].wall_ns / 1e9} for i in self.used]
        return bool(load_summary(kept).get("disturbed"))

    def used_samples(self) -> list[int]:
        return [v for i in self.used for v in self.windows[i].samples(self.samples_ns)]

    def used_sizes(self) -> tuple[int, ...]:
        return tuple(self.windows[i].n for i in self.used)

    @property
    def ci_rel(self) -> float | None:
        """Half-width of the p50's interval relative to the p50."""
        return ci_rel(self.median_ns, self.ci_low_ns, self.ci_high_ns)

    @property
    def target_met(self) -> bool:
        r = self.ci_rel
        return bool(self.target_ci) and r is not None and r <= float(self.target_ci or 0)

    def summary(self) -> dict[str, Any]:
        """Everything but the samples of the windows kept, JSON-ready (for the child's result)."""
        kept = set(self.used)
        return {"n": self.n, "wall_ns": self.wall_ns, "first_ns": self.first_ns,
                "warmup_calls": self.warmup_calls, "warmup_ns": self.warmup_ns,
                "warmup_stopped_by": self.warmup_stopped_by,
                "median_ns": self.median_ns, "ci_low_ns": self.ci_low_ns,
                "ci_high_ns": self.ci_high_ns, "ci_rel": self.ci_rel, "ci_level": CI_LEVEL,
                "within_ci_low_ns": self.within_low_ns, "within_ci_high_ns": self.within_high_ns,
                "target_ci": self.target_ci, "target_met": self.target_met, "stopped_by": self.stopped_by,
                "ci_checks": self.ci_checks, "paused_ns": self.paused_ns, "window_s": self.window_ns / 1e9,
                "windows_used": len(self.used), "disturbed": self.disturbed,
                "windows": [w.to_dict(self.samples_ns, i in kept) for i, w in enumerate(self.windows)]}


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
              clock: Callable[[], int] = time.perf_counter_ns, energy_meter: Any = None,
              load_meter: Any = None) -> LoopResult:
    """Call ``fn(x)`` repeatedly; ``x`` is prepared before timing starts.

    ``first_call_done``: the runner already made the cold call (no ``first_ns`` then).
    ``clock``: nanoseconds, monotonic; only tests replace it.
    ``energy_meter``: an object with ``start()`` and ``stop()`` (energy.EnergyMeter), started just before
    the measured loop and stopped just after it (outside every sample); ``LoopResult.energy`` is its reading.
    ``load_meter``: an object with ``start()`` and ``read(wall_ns)`` (windows.LoadMeter): started just before
    the first window; ``read`` after each window gives its reading (a dict; ``"disturbed"`` True: the
    window is measured again, see the module's doc).
    """
    first_ns = None
    if not first_call_done:
        t0 = clock()
        fn(x)
        first_ns = clock() - t0
    warm_calls, warm_ns, warm_stop = _warm_up(fn, x, s, 0 if first_call_done else 1, clock)
    if energy_meter is not None:
        energy_meter.start()
    loop = _Loop(fn, x, s, clock, load_meter)
    loop.run()
    reading = energy_meter.stop() if energy_meter is not None else None
    return loop.result(first_ns=first_ns, warmup_calls=warm_calls, warmup_ns=warm_ns,
                       warmup_stopped_by=warm_stop, energy=reading)


class _Loop:
    """The measured loop's windows (see the module's doc)."""

    def __init__(self, fn: Callable[[Any], Any], x: Any, s: LoopSettings, clock: Callable[[], int],
                 meter: Any):
        self.fn, self.x, self.clock, self.meter = fn, x, clock, meter
        self.target = float(s.target_ci) if s.target_ci and s.target_ci > 0 else None
        self.min_n, self.max_n = max(1, s.min_iters), max(1, s.max_iters)
        self.min_ns = int(max(0.0, s.min_time_s) * 1e9)
        self.window_ns = -(-self.min_ns // MIN_WINDOWS)
        self.budget_ns = None if s.max_time_s is None else int(max(s.max_time_s, s.min_time_s) * 1e9)
        self.samples: list[int] = []
        self.windows: list[Window] = []
        self.paused = self.checks = self.credit = 0
        self.need: int | None = None  # windows the target needs (statistics.windows_needed), once known
        self.stop = ""

    def counted(self) -> list[Window]:
        return [w for w in self.windows if not w.excused]

    def run(self) -> None:
        if self.meter is not None:
            self.meter.start()
        self.start = now = self.clock()
        while True:
            end = self._window(now)
            now = self._between(end)
            if self.stop:
                return

    def _quota(self) -> int:
        """Calls the next window makes at least: its share of ``min_iters``."""
        cw = self.counted()
        if len(cw) < MIN_WINDOWS:
            return max(1, math.ceil((self.min_n - sum(w.n for w in cw)) / (MIN_WINDOWS - len(cw))))
        return max(1, math.ceil(self.min_n / MIN_WINDOWS))

    def _window(self, t0: int) -> int:
        """One window: calls until its quota and length are reached, or the loop must stop; the clock after
        its last call."""
        fn, x, clock, samples = self.fn, self.x, self.clock, self.samples
        append, first, begin = samples.append, len(samples), t0
        done_n, done_at, max_n = first + self._quota(), begin + self.window_ns, self.max_n
        end = None if self.budget_ns is None else self.start + self.budget_ns + self.credit
        while True:
            fn(x)
            t1 = clock()
            append(t1 - t0)
            t0 = t1
            n = len(samples)
            if n >= max_n:
                self.stop = STOP_MAX_ITERS
                break
            if end is not None and t1 >= end:
                self.stop = STOP_BUDGET
                break
            if n >= done_n and t1 >= done_at:
                break
        self.windows.append(Window(first, len(samples) - first, begin - self.start, t1 - begin))
        return t1

    def _between(self, t1: int) -> int:
        """After a window, the clock stopped: its load reading, then the stop rule; the clock at the next
        window's start."""
        w = self.windows[-1]
        if self.meter is not None:
            w.load = dict(self.meter.read(w.wall_ns) or {})
            w.disturbed = bool(w.load.pop("disturbed", False))
            if w.disturbed and sum(v.excused for v in self.windows) < REMEASURE_MAX:
                w.excused, self.credit = True, self.credit + w.wall_ns
        if not self.stop:
            self._decide()
        t0 = self.clock()
        self.paused += t0 - t1
        return t0

    def _decide(self) -> None:
        cw = self.counted()
        if sum(w.n for w in cw) < self.min_n or sum(w.wall_ns for w in cw) < self.min_ns:
            return
        if self.target is None:
            self.stop = STOP_MIN
            return
        if len(cw) < MIN_WINDOWS:
            return
        self.checks += 1
        if self.need is None:
            first = [_median(w.samples(self.samples)) for w in cw[:MIN_WINDOWS]]
            self.need = windows_needed(first, self.target)
        if len(cw) < self.need:
            return
        ri = row_interval([v for w in cw for v in w.samples(self.samples)], [w.n for w in cw])
        if ri.rel is not None and ri.rel <= self.target:
            self.stop = STOP_TARGET

    def _kept(self) -> tuple[int, ...]:
        """The windows the row keeps: the clean ones where there are enough, else those the stop rule counted
        (every one but the first REMEASURE_MAX disturbed, which were measured again)."""
        ws = self.windows
        cut = self.stop in (STOP_BUDGET, STOP_MAX_ITERS) and len(ws) >= 2
        if cut and 2 * ws[-1].wall_ns < self.window_ns and 2 * ws[-1].n < ws[-2].n:
            last, prev = ws.pop(), ws[-1]
            prev.n, prev.wall_ns, prev.disturbed = prev.n + last.n, prev.wall_ns + last.wall_ns, \
                prev.disturbed or last.disturbed
        clean = tuple(i for i, w in enumerate(ws) if not w.disturbed)
        if clean and len(clean) >= min(MIN_WINDOWS, len(ws)):
            return clean
        return tuple(i for i, w in enumerate(ws) if not w.excused) or tuple(range(len(ws)))

    def result(self, **kw: Any) -> LoopResult:
        used = self._kept()
        lr = LoopResult(samples_ns=self.samples, wall_ns=sum(self.samples), target_ci=self.target,
                        stopped_by=self.stop, ci_checks=self.checks, paused_ns=self.paused,
                        windows=self.windows, used=used, window_ns=self.window_ns, **kw)
        ri = row_interval(lr.used_samples(), lr.used_sizes())
        lr.median_ns, lr.ci_low_ns, lr.ci_high_ns = ri.median, ri.low, ri.high
        lr.within_low_ns, lr.within_high_ns = ri.within_low, ri.within_high
        return lr


def _median(v: list[int]) -> float:
    a = sorted(v)
    return (a[(len(a) - 1) // 2] + a[len(a) // 2]) / 2
