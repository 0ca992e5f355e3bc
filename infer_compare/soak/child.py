"""The soaking child (``python -m infer_compare.soak.child SPEC RESULT``): load the runner
once, time the cold call and warm up (bench.time_loop), then call it until the duration
is spent, and append one JSON line per time window to RESULT as soon as the window ends.

Lines, in order: ``start`` (load time, first call, RSS after warm-up, what the sensors
can read), one ``window`` per window (the fields of soak.records.SoakWindow plus a sparse
histogram of its call times, from which the parent gets percentiles of the whole soak),
and ``end``; or ``error`` when loading or a call fails.

The loop allocates nothing per call, and a window's statistics nothing in proportion to
its calls: call times go into an int64 buffer sized from the warm-up's pace and reused
from window to window with a scratch array of the same size (both double only when a
window holds more calls than they do), so the harness's own memory does not masquerade
as a leak or step in the RSS the soak watches.
Each sample is the time from the end of the previous call to the end of this one, as in
measure/bench.py, so a window's samples add up to its wall time; the statistics, sensor reads
and the write between windows are in no window.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from infer_compare.base.errors import BackendUnavailable
from infer_compare.base.records import PERCENTILE_MIN_SAMPLES, Record
from infer_compare.measure.bench import time_loop
from infer_compare.measure.cells import CellSpec

HIST_LO_NS = 100  # histogram of call times: bin i holds [LO * RATIO**i, LO * RATIO**(i+1)) ns
HIST_RATIO = 1.01  # 1 % wide bins: a percentile of the whole soak is within 0.5 % of the exact one
HIST_BINS = 2600  # up to about 1e13 ns; longer calls land in the last bin
MIN_BUFFER = 4096  # call times per window held without growing (more when the warm-up predicts more)
# at most 2 M calls (16 MB + 16 MB) preallocated; a window with more doubles the buffers
MAX_PRESIZE = 1 << 21


@dataclass(frozen=True)
class SoakSpec(Record):
    """What a soaking child is asked to do: one configuration at one batch size."""

    cell: CellSpec  # runner, artifact, device, precision, inputs, warm-up (loop); batch_sizes[0] is the batch
    duration_s: float
    window_s: float
    sensors_root: str = "/"

    @property
    def batch(self) -> int:
        return self.cell.batch_sizes[0]


def hist_value_ns(i: int) -> float:
    """The value a histogram bin stands for (its geometric middle), ns."""
    return HIST_LO_NS * HIST_RATIO ** (i + 0.5)


class WindowBuffers:
    """The call times of one window (int64 ns) and a float64 scratch array of the same size, reused
    from window to window: the statistics of a window allocate nothing in proportion to its calls, so
    neither they nor the samples add to the RSS the soak watches (a window with more calls than any
    before doubles both, once)."""

    def __init__(self, capacity: int = MIN_BUFFER):
        self.ns = np.empty(max(int(capacity), MIN_BUFFER), dtype=np.int64)
        self.work = np.empty(self.ns.size, dtype=np.float64)

    def grow(self) -> np.ndarray:
        self.ns = np.concatenate([self.ns, np.empty_like(self.ns)])
        self.work = np.empty(self.ns.size, dtype=np.float64)
        return self.ns

    def stats(self, n: int) -> dict[str, Any]:
        """Mean, std, min, max and p50/p90/p99 (numpy's linear rule) in ms, and the histogram, of the
        first ``n`` call times. Overwrites them (the histogram's bin indices go in their place)."""
        ns, w = self.ns[:n], self.work[:n]
        np.multiply(ns, 1e-6, out=w)
        mean, lo, hi = float(w.sum()) / n, float(w.min()), float(w.max())
        pos = {q: (n - 1) * q / 100 for q in (50, 90, 99)}
        w.partition(sorted({k for p in pos.values() for k in (math.floor(p), math.ceil(p))}))
        pct = {q: float(w[math.floor(p)] + (w[math.ceil(p)] - w[math.floor(p)]) * (p - math.floor(p)))
               for q, p in pos.items()}
        np.subtract(w, mean, out=w)
        np.square(w, out=w)
        std = math.sqrt(float(w.sum()) / (n - 1)) if n > 1 else 0.0
        return {"mean_ms": mean, "std_ms": std, "min_ms": lo, "max_ms": hi, "p50_ms": pct[50],
                "p90_ms": pct[90] if n >= PERCENTILE_MIN_SAMPLES["p90"] else None,
                "p99_ms": pct[99] if n >= PERCENTILE_MIN_SAMPLES["p99"] else None, "hist": histogram(ns, w)}


def histogram(ns: np.ndarray, work: np.ndarray) -> list[list[int]]:
    """[[bin, count]] of the call times ``ns`` (bins of HIST_RATIO), in place: ``work`` is scratch and
    ``ns`` is overwritten with the bin indices."""
    np.maximum(ns, HIST_LO_NS, out=work)
    np.divide(work, HIST_LO_NS, out=work)
    np.log(work, out=work)
    np.multiply(work, 1 / math.log(HIST_RATIO), out=work)
    np.floor(work, out=work)
    np.minimum(work, HIST_BINS - 1, out=work)
    np.copyto(ns, work, casting="unsafe")
    counts = np.bincount(ns, minlength=HIST_BINS)
    return [[int(i), int(counts[i])] for i in np.flatnonzero(counts)]


def window_line(index: int, start_ns: int, end_ns: int, calls: int, batch: int, stats: dict[str, Any],
                sensors: dict[str, Any]) -> dict[str, Any]:
    """One window's line: SoakWindow's fields and the histogram the parent sums."""
    wall_s = (end_ns - start_ns) / 1e9
    return {"kind": "window", "index": index, "start_s": start_ns / 1e9,
            "end_s": end_ns / 1e9, "calls": calls,
            "images": calls * batch, "throughput": calls * batch / wall_s if wall_s > 0 else 0.0, **stats,
            **sensors}


def soak_windows(fn: Callable[[Any], Any], x: Any, spec: SoakSpec, read_sensors: Callable[[], dict[str, Any]],
                 emit: Callable[[dict[str, Any]], Any], clock: Callable[[], int] = time.perf_counter_ns,
                 bufs: WindowBuffers | None = None) -> int:
    """Call ``fn(x)`` for ``spec.duration_s``, one line per window to ``emit``; the number of windows.

    A window ends at the first call that ends after ``window_s``; the last one takes the
    remainder when less than half a window would be left, so it lasts 0.5 to 1.5 windows."""
    bufs = bufs or WindowBuffers()
    buf = bufs.ns
    win, t0_soak = int(spec.window_s * 1e9), clock()
    t_end = t0_soak + int(spec.duration_s * 1e9)
    index, w_start = 0, t0_soak
    while index == 0 or w_start < t_end:
        deadline = w_start + win
        if t_end - deadline < win // 2:
            deadline = t_end
        n, t0 = 0, w_start
        while True:
            fn(x)
            t1 = clock()
            if n == buf.size:
                buf = bufs.grow()
            buf[n] = t1 - t0
            t0, n = t1, n + 1
            if t1 >= deadline:
                break
        emit(window_line(index, w_start - t0_soak, t1 - t0_soak, n, spec.batch, bufs.stats(n),
                         read_sensors()))
        index += 1
        if deadline >= t_end:
            break
        w_start = clock()
    return index


def presize(spec: SoakSpec, warm: Any) -> WindowBuffers:
    """Buffers for twice the calls a window should hold at the warm-up's pace (within limits)."""
    per_call = warm.warmup_ns / warm.warmup_calls if warm.warmup_calls else (warm.samples_ns or [0])[0]
    want = 2 * spec.window_s * 1e9 / per_call if per_call > 0 else MIN_BUFFER
    return WindowBuffers(int(min(want, MAX_PRESIZE)))


def _error(stage: str, e: BaseException) -> dict[str, Any]:
    if isinstance(e, BackendUnavailable):
        return {"kind": "error", "status": "skipped", "stage": stage, "error": e.reason, "hint": e.hint}
    msg = str(e).strip().splitlines()
    return {"kind": "error", "status": "run_failed", "stage": stage,
            "error": f"{stage}: {type(e).__name__}: {msg[0] if msg else ''}".rstrip(": "),
            "traceback": "\n".join(traceback.format_exc().strip().splitlines()[-20:])}


def _start_line(runner: Any, load_s: float, warm: Any, sensors: Any) -> dict[str, Any]:
    return {"kind": "start", "load_s": load_s,
            "first_infer_ms": None if warm.first_ns is None else warm.first_ns / 1e6,
            "warmup_calls": warm.warmup_calls, "rss_mb": sensors.read().get("rss_mb"),
            "exec_precision": runner.exec_precision, "settings": dict(runner.settings),
            "notes": list(runner.notes), "versions": runner.library_versions(), "sensors": sensors.describe()}


def run_soak(spec: SoakSpec, emit: Callable[[dict[str, Any]], Any]) -> None:
    """Load, warm up, soak; every outcome is a line (an error is an ``error`` line, never an exception)."""
    # deferred: the soaking child's start stays light without it (+1 module)
    from infer_compare.base import batches
    from infer_compare.measure.child import (  # the measuring child's loader (see docs/soak.md)
        Session,
        peak_rss_mb,
        tile,
    )

    # deferred: the soaking child's start stays light without it (+6 modules)
    from infer_compare.soak.sensors import Sensors

    sess, stage, sensors = Session(spec.cell), "load", None
    try:
        runner, load_s = sess.runner_for(spec.batch)
        if runner.fixed_batch is not None and runner.fixed_batch != spec.batch:
            raise BackendUnavailable(f"the artifact has a static batch of {runner.fixed_batch}; batch "
                                     f"{spec.batch} cannot run")
        stage = "run"
        # the comparison's inputs: several by name (.npz), each laid along its batch axis by the Session's
        # runner
        x = runner.prepare(tile(batches.load(spec.cell.inputs), spec.batch))
        # the cold call and the warm-up of a measured cell; its one measured call is discarded
        warm = time_loop(runner.run, x, replace(spec.cell.loop, min_iters=1, min_time_s=0.0, max_time_s=None,
                                                target_ci=None))
        bufs = presize(spec, warm)  # before the start line: its RSS includes them
        sensors = Sensors(spec.sensors_root, spec.cell.device)
        emit(_start_line(runner, load_s, warm, sensors))
        n = soak_windows(runner.run, x, spec, sensors.read, emit, bufs=bufs)
        emit({"kind": "end", "stopped_by": "duration", "windows": n, "peak_rss_mb": peak_rss_mb(),
              "extra": runner.extra_metrics()})
    except Exception as e:  # a failure is the configuration's result, the parent keeps the windows before it
        emit(_error(stage, e))
    finally:
        if sensors is not None:
            sensors.close()
        sess.close()


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    spec = SoakSpec.from_dict(json.loads(Path(argv[0]).read_text()))
    with open(argv[1], "a", buffering=1) as f:  # one line per window, written as it ends
        run_soak(spec, lambda d: (f.write(json.dumps(d) + "\n"), f.flush()))
    sys.stdout.flush()
    # skip interpreter teardown: some runtimes crash in their atexit handlers (as measure/isolate.py)
    os._exit(0)


if __name__ == "__main__":
    main()
