"""A short fixed workload timed right before each measured loop (and after it, for information).

The regression gate compares runs taken at different times on machines that are shared:
a neighbour's job can make everything 30-60 % slower for minutes, which no confidence
interval within one run can see. The gate therefore judges each row's latency and
throughput as a ratio to this workload, timed in the same child process around the
row's own loop (``RunRecord.extra["calibration"]``): a machine that is uniformly slower
today slows both, and their ratio stays put. A runner that got slower does not slow the
workload, and a change of the thread count does not either (it runs on one thread).

The workload is deterministic and single-threaded (numpy ufuncs and a 64x64 matmul,
which BLAS runs on one thread at this size): a compute-bound part, an L2-resident
element-wise part and an 8 MB copy (memory bandwidth). Its figure is the median time
of one round over ``ROUNDS`` rounds, in ms. ``ms`` is the figure taken right before
the loop (the runtime loaded, nothing run yet); ``after_ms``, taken right after it,
is kept for information only: the runtime's own threads still spin there (ONNX
Runtime's pool, OpenMP's wait policy) and slow the workload by how many threads the
row used, which would hide a change of the thread count.

No workload cancels a neighbour that competes for the cores the runtime's threads use: measured
on a 2-core machine, one busy neighbour process made PyTorch's 2-thread OpenMP loop 175 times
slower while the one-thread workload did not change. So the entry also says how much CPU time
other processes (``other_cores``) and other guests of the hypervisor (``steal_cores``) took while
the loop ran (Linux: /proc/stat minus the child's own time); the gate does not judge the timings
of a row measured while other processes took more than ``regress.judge.DISTURBED_CORES``.
Niced processes count too: measured here, a ``nice -n 19`` test run on the other core still
made PyTorch's 2-thread loop 170 times slower (its OpenMP threads yield, and lose the core).
"""

from __future__ import annotations

import os
import time
from typing import Any

ROUNDS = 15
WORKLOAD = "calibration v1: 40 x matmul 64x64 f32, element-wise on 256 KB, 8 MB copy; median of 15 rounds"


class Calibration:
    def __init__(self) -> None:
        import numpy as np

        rng = np.random.default_rng(0)
        self.m = rng.standard_normal((64, 64)).astype(np.float32) / 8
        self.v = rng.random(65536, dtype=np.float32)
        self.w = np.empty_like(self.v)
        self.src = rng.random(2 * 1024 * 1024, dtype=np.float32)
        self.dst = np.empty_like(self.src)

    def _round(self) -> float:
        import numpy as np

        t0 = time.perf_counter_ns()
        x = self.m
        for _ in range(40):
            x = np.tanh(x @ self.m)
        for _ in range(8):
            np.multiply(self.v, 1.0001, out=self.w)
            np.add(self.w, 0.5, out=self.w)
            np.sqrt(self.w, out=self.w)
        np.copyto(self.dst, self.src)
        return (time.perf_counter_ns() - t0) / 1e6

    def time_ms(self, rounds: int = ROUNDS) -> float:
        """The median time of one round over ``rounds`` rounds (the first, cold one, discarded)."""
        self._round()
        times = sorted(self._round() for _ in range(rounds))
        return times[len(times) // 2]


def cpu_ticks() -> tuple[int, int, int] | None:
    """(busy ticks of the CPUs this process may run on, of which steal, this process's own ticks) from
    /proc; None elsewhere. Other processes on CPUs outside this process's affinity do not compete."""
    try:
        allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
        busy = steal = 0
        with open("/proc/stat") as f:
            for line in f:
                name, *rest = line.split()
                if not (name.startswith("cpu") and name[3:].isdigit()):
                    continue
                if allowed is not None and int(name[3:]) not in allowed:
                    continue
                v = [int(x) for x in rest]
                # user nice system idle iowait irq softirq steal ...
                busy += v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
                steal += v[7]
        with open("/proc/self/stat") as f:
            own = f.read().rsplit(")", 1)[1].split()
        return busy, steal, int(own[11]) + int(own[12])  # utime, stime: fields 14 and 15
    except (OSError, ValueError, IndexError):
        return None


def process_ticks(pid: int) -> int | None:
    """CPU ticks (user + system) process ``pid`` has used so far, its threads included; None off Linux."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            own = f.read().rsplit(")", 1)[1].split()
        return int(own[11]) + int(own[12])
    except (OSError, ValueError, IndexError):
        return None


def contention(t0: tuple[int, int, int] | None, t1: tuple[int, int, int] | None,
               wall_s: float) -> dict[str, float]:
    """Other processes' CPU use while a loop ran, in cores (busy time of the machine minus this process's
    own), and the time the hypervisor gave to other guests (steal), in cores."""
    if t0 is None or t1 is None or wall_s <= 0:
        return {}
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    other = max(0, (t1[0] - t0[0]) - (t1[1] - t0[1]) - (t1[2] - t0[2]))
    return {"other_cores": round(other / hz / wall_s, 3),
            "steal_cores": round((t1[1] - t0[1]) / hz / wall_s, 3)}


def around(fn, cal: Calibration | None) -> tuple[Any, dict[str, Any]]:
    """``fn()`` with the workload timed before it (and after it, for information): (its result, the row's
    calibration entry),
    with the CPU time other processes (and other guests: steal) took while ``fn`` ran.

    The entry has no ``ms`` when the workload could not run (numpy absent or failing): the gate then
    compares that row in absolute terms and says so.
    """
    before = _safe(cal)
    t0, c0 = time.perf_counter(), cpu_ticks()
    out = fn()
    entry: dict[str, Any] = contention(c0, cpu_ticks(), time.perf_counter() - t0)
    after = _safe(cal)
    if before is not None:
        entry.update({"ms": round(before, 6), "before_ms": round(before, 6), "workload": WORKLOAD})
    if after is not None:
        entry["after_ms"] = round(after, 6)
    return out, entry


def _safe(cal: Calibration | None) -> float | None:
    if cal is None:
        return None
    try:
        return cal.time_ms()
    except Exception:  # noqa: BLE001 - the row is measured anyway; the gate says it had no calibration
        return None


def make() -> Calibration | None:
    try:
        return Calibration()
    except Exception:  # noqa: BLE001
        return None
