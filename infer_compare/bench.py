"""The measuring harness. It owns the clock (``time.perf_counter_ns``).

Warm up, then measure until both a minimum count and a minimum duration are
reached. Each sample is the time from the end of the previous call to the end of
this one, so the samples add up exactly to the wall time of the measured loop
(throughput and latency then agree) and include the harness's own per-call
overhead, which the ``null`` runner measures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LoopSettings:
    warmup_iters: int = 2
    min_iters: int = 5
    min_time_s: float = 1.0
    max_iters: int = 100_000
    max_time_s: float | None = None  # stop after this even if min_iters is not reached


@dataclass
class LoopResult:
    samples_ns: list[int]
    wall_ns: int
    first_ns: int | None  # the very first call (cold), when warm-up includes it


def time_loop(fn: Callable[[Any], Any], x: Any, s: LoopSettings, first_call_done: bool = False) -> LoopResult:
    """Call ``fn(x)`` repeatedly; ``x`` is prepared before timing starts."""
    clock = time.perf_counter_ns
    first_ns = None
    warm = s.warmup_iters
    if not first_call_done:
        t0 = clock()
        fn(x)
        first_ns = clock() - t0
        warm -= 1
    for _ in range(max(0, warm)):
        fn(x)
    samples: list[int] = []
    append = samples.append
    min_n, max_n = max(1, s.min_iters), max(1, s.max_iters)
    min_ns = int(s.min_time_s * 1e9)
    max_ns = int(s.max_time_s * 1e9) if s.max_time_s else None
    start = t0 = clock()
    while True:
        fn(x)
        t1 = clock()
        append(t1 - t0)
        n = len(samples)
        if n >= max_n:
            break
        elapsed = t1 - start
        if n >= min_n and elapsed >= min_ns:
            break
        if max_ns is not None and elapsed >= max_ns:
            break
        t0 = t1
    return LoopResult(samples_ns=samples, wall_ns=t1 - start, first_ns=first_ns)
