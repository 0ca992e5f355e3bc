"""The load meter of the measured loop's windows (measure/bench.py): what else used this process's cores while
a window was measured, and the clocks and temperature where they are readable.

The reading is the calibration's meter (measure/calibration.py, the one the regression gate and ``diff`` judge
rows by): the busy time of the CPUs this process may run on (/proc/stat, Linux) minus the tool's own time in
that window: this process's threads, the children it has waited for and the processes it started that still
run (a runtime's helper processes). What is left is other processes' CPU time (``other_cores``) and the time
the hypervisor gave to other guests (``steal_cores``), in cores over the window's wall time. Measuring
processes beside this one (the CPU lane beside the GPU rows, the second process of a GPU) run on other cores,
which the meter does not count.

/proc/stat counts in ticks of 1/100 s (SC_CLK_TCK), truncated on every CPU, so a short window reads a tick or
two that nobody used. A window is **disturbed** when others took more than DISTURBED_CORES over it (the
regression gate's threshold, regress/judge.DISTURBED_CORES) beyond SLACK_TICKS ticks: a window of 0.067 s
(the default --min-time 0.2 split in three) is disturbed from about 0.55 busy cores of others on; a row's
load over all its windows is judged on the sum. Off Linux nothing is read and no window is disturbed;
``INFER_COMPARE_DISTURBED=0``: the readings are recorded, no window is judged disturbed (nothing is measured
again, no row is disturbed: a shared machine whose load is known, a test suite on one).

Sensors, read after each window where they are readable: the GPU's SM clock and temperature (NVML) for a
CUDA row, the mean clock of this process's CPUs (cpufreq) for every row.

Measured on an idle one-GPU H200 host (16 vCPUs), a spinning process read in windows of 0.067 s: 1 of 120
windows disturbed (others' ticks 0 in 105, 1 in 13), the same with a busy child of its own (its time is the
tool's); beside one busy process of another user, or a ``nice -n 19`` one, 100 of 100.
"""

from __future__ import annotations

import os
import time
from typing import Any

from infer_compare.host.arm import EMULATION_ENV
from infer_compare.host.gpu import Nvml, device_index
from infer_compare.measure.calibration import cpu_ticks

DISTURBED_CORES = 0.25  # == regress.judge.DISTURBED_CORES (tests/test_windows.py holds them equal)
SLACK_TICKS = 2  # ticks a window may read that no process used: the truncation of the counters
SWITCH = "INFER_COMPARE_DISTURBED"  # "0": no window is judged disturbed (the readings are still recorded)


def judging() -> bool:
    """Whether windows are judged disturbed: not with the switch off, nor under an emulator, where the
    emulator's tracer (proot) works beside every call and reads as other processes' time."""
    if os.environ.get(EMULATION_ENV, "").strip():
        return False
    return os.environ.get(SWITCH, "1") not in ("0", "false", "no")


def _hz() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100


def own_ticks(pid: int | str = "self", tasks: list[str] | None = None) -> int | None:
    """CPU ticks of process ``pid``, its threads, the children it has waited for and the processes it
    started that still run (and theirs; of ``pid``'s threads, those in ``tasks`` where given); None off
    Linux."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        total = sum(int(x) for x in v[11:15])  # utime, stime, cutime, cstime: fields 14-17
    except (OSError, ValueError, IndexError):
        return None
    for kid in _children(pid, tasks):
        t = own_ticks(kid)
        total += t or 0
    return total


def spawning_tasks(pid: int | str = "self") -> list[str]:
    """The threads of ``pid`` that have started processes still running, and its main thread: the ones a
    window's reading looks at (reading every thread's list costs a millisecond in a process of a hundred)."""
    main = str(os.getpid()) if pid == "self" else str(pid)
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return [main]
    return [main] + [t for t in tasks if t != main and _children(pid, [t])]


def _children(pid: int | str, tasks: list[str] | None = None) -> list[int]:
    """The processes ``pid``'s threads (those in ``tasks`` where given) started that still run
    (/proc/PID/task/TID/children)."""
    out: list[int] = []
    if tasks is None:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return out
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/children") as f:
                out += [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            continue
    return out


def judge(other_ticks: float, steal_ticks: float, wall_s: float, hz: int) -> bool:
    """Whether others' ticks (other processes and other guests) over ``wall_s`` seconds make it disturbed."""
    over = wall_s > 0 and other_ticks + steal_ticks > DISTURBED_CORES * hz * wall_s + SLACK_TICKS
    return over and judging()


class LoadMeter:
    """``start()`` before the first window, ``read(wall_ns)`` after each: that window's reading (a dict:
    ``other_cores``, ``steal_cores``, ``disturbed``, the raw ticks and the sensors readable here).
    Never raises; where /proc is not readable, ``read`` gives the sensors only and nothing is disturbed."""

    def __init__(self, device: str = "cpu"):
        self.device = device
        self.hz = _hz()
        self._gpu: Any = None  # Nvml, opened at the first reading of a CUDA row
        self._cpufreq = _cpufreq_paths()
        self._t0: tuple[float, tuple[int, int, int] | None, int | None] | None = None
        self._tasks: list[str] | None = None

    def _now(self) -> tuple[float, tuple[int, int, int] | None, int | None]:
        return time.perf_counter(), cpu_ticks(), own_ticks("self", self._tasks)

    def start(self) -> None:
        if self.device.startswith("cuda") and self._gpu is None:  # NVML opened before the loop, not in it
            self._gpu = _GpuClock(device_index(self.device))
        self._tasks = spawning_tasks()
        self._t0 = self._now()

    def read(self, wall_ns: int = 0) -> dict[str, Any]:
        if self._t0 is None:
            self.start()
            return self.sensors()
        t0, (t1, c1, o1) = self._t0, self._now()
        self._t0 = (t1, c1, o1)
        out: dict[str, Any] = {}
        if t0[1] is not None and c1 is not None and t0[2] is not None and o1 is not None:
            busy, steal = c1[0] - t0[1][0], c1[1] - t0[1][1]
            other = max(0, busy - steal - (o1 - t0[2]))
            wall = t1 - t0[0]
            out = {"other_cores": round(other / self.hz / wall, 3) if wall > 0 else 0.0,
                   "steal_cores": round(steal / self.hz / wall, 3) if wall > 0 else 0.0,
                   "other_ticks": other, "steal_ticks": steal,
                   "disturbed": judge(other, steal, wall, self.hz)}
        return {**out, **self.sensors()}

    def sensors(self) -> dict[str, Any]:
        """The GPU's SM clock and temperature (a CUDA row), the mean clock of this process's CPUs."""
        out: dict[str, Any] = {}
        if self.device.startswith("cuda"):
            if self._gpu is None:
                self._gpu = _GpuClock(device_index(self.device))
            out.update(self._gpu.read())
        mhz = [v for v in (_number(p) for p in self._cpufreq) if v]
        if mhz:
            out["cpu_mhz"] = round(sum(mhz) / len(mhz) / 1000, 0)
        return out

    def close(self) -> None:
        if self._gpu is not None:
            self._gpu.close()


class _GpuClock(Nvml):
    def read(self) -> dict[str, float]:
        if not self.ok:
            return {}
        out = {}
        sm = self._call("nvmlDeviceGetClockInfo", self._nv.NVML_CLOCK_SM)
        temp = self._call("nvmlDeviceGetTemperature", self._nv.NVML_TEMPERATURE_GPU)
        if sm is not None:
            out["gpu_sm_mhz"] = float(sm)
        if temp is not None:
            out["gpu_temp_c"] = float(temp)
        return out


def _cpufreq_paths() -> list[str]:
    try:
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    except OSError:
        cpus = []
    paths = [f"/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_cur_freq" for c in cpus]
    return [p for p in paths if os.path.exists(p)][:64]


def _number(path: str) -> float | None:
    try:
        with open(path) as f:
            return float(f.read().strip())
    except (OSError, ValueError):
        return None


def summary(windows: list[dict[str, Any]], hz: int | None = None) -> dict[str, Any]:
    """The load over the windows a row keeps (``windows``: their readings): other processes' and other guests'
    cores over their wall time, whether they make the row disturbed, the sensors' range; {} without
    readings."""
    got = [w for w in windows if "other_ticks" in w]
    out: dict[str, Any] = {}
    wall = sum(float(w.get("wall_s") or 0.0) for w in got)
    if got and wall > 0:
        hz = hz or _hz()
        other, steal = sum(w["other_ticks"] for w in got), sum(w.get("steal_ticks", 0) for w in got)
        out = {"other_cores": round(other / hz / wall, 3), "steal_cores": round(steal / hz / wall, 3),
               "disturbed": judge(other, steal, wall, hz)}
    for key in ("gpu_sm_mhz", "gpu_temp_c", "cpu_mhz"):
        vals = [w[key] for w in windows if isinstance(w.get(key), (int, float))]
        if vals:
            out[key] = (min(vals), max(vals))
    return out
