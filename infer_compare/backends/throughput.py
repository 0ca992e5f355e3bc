"""The throughput scenario's engines: many requests in flight, images per second of wall
time, and the latency of each request under that load.

Two engines, one per way a runtime takes concurrent work:

* :func:`run_threads`: N host threads, each calling its own blocking ``call()`` (its
  own session, interpreter or input) again and again. For runtimes whose call releases
  the GIL: ONNX Runtime, LiteRT, PyTorch on the CPU.
* :func:`run_pipelined`: one host thread keeps N asynchronous requests in flight
  (``start(i)`` launches request ``i``, ``wait(i)`` blocks until it is done), waiting for
  the oldest and launching it again: CUDA streams (PyTorch, TensorRT).

(OpenVINO's runner drives its own ``AsyncInferQueue``, as ``benchmark_app`` does.)

Both warm up for ``warmup_s`` (every request at least once), then measure for
``duration_s``: no request starts after the deadline, those in flight finish and count,
and the wall time runs from the start of the window to the last completion (as
``benchmark_app``'s total duration). A request's latency is the host clock from its start
to its completion as the host sees it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Clock = Callable[[], int]
CUDA_STREAMS = 2  # CUDA runners' requests in flight (streams) unless the harness names a concurrency


@dataclass(frozen=True)
class ThroughputSettings:
    """What the harness asks of a throughput measurement."""

    duration_s: float = 3.0  # the measured window
    warmup_s: float = 0.2  # before it, every request at least once
    concurrency: int = 0  # requests in flight; 0: the runtime's own choice
    # energy.EnergyMeter: started and stopped around the window
    meter: Any = field(default=None, compare=False)


@dataclass
class ThroughputResult:
    images: int  # images completed in the measured window
    wall_ns: int  # from the window's start to the last completion
    latencies_ns: list[int]  # each request's latency under that load
    concurrency: int  # requests in flight
    unit: str  # what the concurrency counts: "requests", "streams", "threads", "sessions", "interpreters"
    how: str  # one line: the runtime's mechanism
    settings: dict[str, Any] = field(default_factory=dict)  # what it applied (merged into the row's settings)
    # float32 host array: one request's outputs for the timed batch (checked against the reference)
    outputs: Any = None
    warmup_calls: int = 0
    energy: Any = None  # what settings.meter.stop() returned


@dataclass
class Window:
    """What an engine measured."""

    images: int
    wall_ns: int
    latencies_ns: list[int]
    warmup_calls: int
    last: Any = None  # the last output of request 0
    energy: Any = None


def split_threads(threads: int | None, n: int) -> int:
    """Threads for each of ``n`` concurrent requests sharing ``threads`` (at least 1)."""
    return max(1, int(threads or 1) // max(1, n))


def run_threads(calls: Sequence[Callable[[], Any]], images_per_call: int, s: ThroughputSettings,
                init: Callable[[int], None] | None = None, clock: Clock = time.perf_counter_ns) -> Window:
    """Each of ``calls`` in its own thread, repeatedly; ``init(i)`` first in thread ``i``."""
    n = len(calls)
    lats: list[list[int]] = [[] for _ in range(n)]
    ends, last, warm, errors = [0] * n, [None] * n, [0] * n, []
    t0 = [0]

    def _open() -> None:  # run by one thread once all are warm, before any is released
        if s.meter is not None:
            s.meter.start()
        t0[0] = clock()

    barrier = threading.Barrier(n, action=_open)

    def worker(i: int) -> None:
        call, out = calls[i], lats[i]
        try:
            if init is not None:
                init(i)
            until = clock() + int(s.warmup_s * 1e9)
            last[i] = call()
            warm[i] = 1
            while clock() < until:
                call()
                warm[i] += 1
            barrier.wait()
            deadline = t0[0] + int(s.duration_s * 1e9)
            while True:
                a = clock()
                if a >= deadline:
                    break
                last[i] = call()
                b = clock()
                out.append(b - a)
                ends[i] = b
        except threading.BrokenBarrierError:
            pass
        except BaseException as e:  # re-raised in the calling thread
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    energy = s.meter.stop() if s.meter is not None and t0[0] else None
    if errors:
        raise errors[0]
    flat = [v for per in lats for v in per]
    return Window(images=len(flat) * images_per_call, wall_ns=max(ends) - t0[0] if flat else 0,
                  latencies_ns=flat, warmup_calls=sum(warm), last=last[0], energy=energy)


def run_pipelined(n: int, start: Callable[[int], Any], wait: Callable[[int], int | None],
                  images_per_call: int, s: ThroughputSettings, clock: Clock = time.perf_counter_ns) -> Window:
    """One host thread, ``n`` requests in flight: ``start(i)`` launches request ``i`` and returns
    at once (its return value is kept as request ``i``'s output), ``wait(i)`` blocks until it is
    done and may return its own latency in ns (else the host clock's is used)."""
    began, outs = [0] * n, [None] * n
    inflight: deque[int] = deque()

    def issue(i: int) -> None:
        began[i] = clock()
        outs[i] = start(i)
        inflight.append(i)

    def complete() -> tuple[int, int, int]:
        i = inflight.popleft()
        own = wait(i)
        t = clock()
        return i, (int(own) if own is not None else t - began[i]), t

    warm = 0
    until = clock() + int(s.warmup_s * 1e9)
    for i in range(n):
        issue(i)
    while inflight:
        i, _, t = complete()
        warm += 1
        if t < until:
            issue(i)
    lats: list[int] = []
    if s.meter is not None:
        s.meter.start()
    t0 = end = clock()
    deadline = t0 + int(s.duration_s * 1e9)
    for i in range(n):
        issue(i)
    while inflight:
        i, lat, end = complete()
        lats.append(lat)
        if end < deadline:
            issue(i)
    energy = s.meter.stop() if s.meter is not None else None
    return Window(images=len(lats) * images_per_call, wall_ns=end - t0, latencies_ns=lats, warmup_calls=warm,
                  last=outs[0], energy=energy)


def result(w: Window, concurrency: int, unit: str, how: str, settings: dict[str, Any] | None = None,
           outputs: Any = None) -> ThroughputResult:
    """A ThroughputResult from an engine's window."""
    return ThroughputResult(images=w.images, wall_ns=w.wall_ns, latencies_ns=w.latencies_ns,
                            concurrency=concurrency,
                            unit=unit, how=how, settings=dict(settings or {}), outputs=outputs,
                            warmup_calls=w.warmup_calls, energy=w.energy)
