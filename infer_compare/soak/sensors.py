"""What a soak reads at the end of each window besides latency: the process's RSS, GPU
memory, and temperatures and clocks where the platform exposes them.

Every reader takes ``root`` (``/`` normally) so that tests run on sample sysfs trees, and
none raises: a file that is missing or unreadable is simply absent from the result.

* RSS: ``VmRSS`` of ``<root>/proc/<pid>/status``.
* temperatures: hwmon (``sys/class/hwmon/hwmon*/temp*_input``, millidegrees C, named by the
  chip's ``name`` and the sensor's ``temp*_label``: coretemp, k10temp, NVMe, a Raspberry Pi's
  SoC...) and thermal zones (``sys/class/thermal/thermal_zone*/temp``, named by their
  ``type``: a Jetson's CPU-therm and GPU-therm, a Raspberry Pi's cpu-thermal, ACPI zones).
* clocks: cpufreq's ``scaling_cur_freq`` (kHz) as min/mean/max over the CPUs, devfreq's
  ``cur_freq`` (Hz) per node (a Jetson's GPU and memory controller).
* NVML, on CUDA devices: memory used on the GPU and by this process, temperature, SM and
  memory clocks (infer_compare.host.gpu.Nvml).
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path
from typing import Any

from infer_compare.host.gpu import Nvml, device_index

MAX_SENSORS = 24  # per kind: a big server has dozens of hwmon inputs; a soak wants the few that matter
PLAUSIBLE_C = (-60.0, 250.0)  # disabled sensors report -273 or garbage


def _text(p: str | Path) -> str | None:
    try:
        with open(p, "rb") as f:
            return f.read(4096).decode("utf-8", errors="replace").strip()
    except OSError:
        return None


def _number(p: str | Path) -> float | None:
    t = _text(p)
    try:
        return float(t) if t else None
    except ValueError:
        return None


def _n(path: str) -> int:
    m = re.findall(r"\d+", os.path.basename(path))
    return int(m[0]) if m else 0


def _unique(out: dict[str, float], name: str, value: float) -> None:
    key, k = name, 2
    while key in out:
        key, k = f"{name} #{k}", k + 1
    out[key] = value


def rss_mb(root: str | Path = "/", pid: int | str = "self") -> float | None:
    """Resident set size (VmRSS) of ``pid``, MB (2**20 bytes)."""
    t = _text(Path(root) / "proc" / str(pid) / "status")
    m = re.search(r"^VmRSS:\s*(\d+)\s*kB", t or "", re.M)
    return int(m.group(1)) / 1024 if m else None


def hwmon_temperatures(root: str | Path = "/") -> dict[str, float]:
    """'<chip>/<label>' -> degrees C from every readable hwmon temperature input."""
    out: dict[str, float] = {}
    for d in sorted(glob.glob(str(Path(root) / "sys/class/hwmon/hwmon*")), key=_n):
        chip = _text(Path(d) / "name") or os.path.basename(d)
        for inp in sorted(glob.glob(os.path.join(d, "temp*_input")), key=_n):
            v = _number(inp)
            if v is None or not PLAUSIBLE_C[0] < v / 1000 < PLAUSIBLE_C[1] or len(out) >= MAX_SENSORS:
                continue
            label = _text(inp[: -len("_input")] + "_label") or os.path.basename(inp)[: -len("_input")]
            _unique(out, f"{chip}/{label}", round(v / 1000, 1))
    return out


def thermal_zones(root: str | Path = "/") -> dict[str, float]:
    """'<type>' -> degrees C from every readable thermal zone."""
    out: dict[str, float] = {}
    for d in sorted(glob.glob(str(Path(root) / "sys/class/thermal/thermal_zone*")), key=_n):
        v = _number(Path(d) / "temp")
        if v is None or not PLAUSIBLE_C[0] < v / 1000 < PLAUSIBLE_C[1] or len(out) >= MAX_SENSORS:
            continue
        _unique(out, _text(Path(d) / "type") or os.path.basename(d), round(v / 1000, 1))
    return out


def cpu_clocks(root: str | Path = "/") -> dict[str, float]:
    """{'cpu min', 'cpu mean', 'cpu max'} in MHz from cpufreq's scaling_cur_freq; {} without cpufreq."""
    pat = str(Path(root) / "sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq")
    khz = [v for v in (_number(p) for p in glob.glob(pat)) if v is not None and v > 0]
    if not khz:
        return {}
    return {"cpu min": round(min(khz) / 1000, 1), "cpu mean": round(sum(khz) / len(khz) / 1000, 1),
            "cpu max": round(max(khz) / 1000, 1)}


def devfreq_clocks(root: str | Path = "/") -> dict[str, float]:
    """'<devfreq node>' -> MHz (a Jetson's GPU, memory controller...)."""
    out: dict[str, float] = {}
    for d in sorted(glob.glob(str(Path(root) / "sys/class/devfreq/*"))):
        v = _number(Path(d) / "cur_freq")
        if v is not None and v > 0 and len(out) < MAX_SENSORS:
            out[os.path.basename(d)] = round(v / 1e6, 1)
    return out


class GpuSensor(Nvml):
    """NVML readings a soak takes each window, on top of :class:`~infer_compare.host.gpu.Nvml`."""

    def temperature_c(self) -> float | None:
        if not self.ok:
            return None
        v = self._call("nvmlDeviceGetTemperature", self._nv.NVML_TEMPERATURE_GPU)
        return float(v) if v is not None else None

    def clocks_mhz(self) -> dict[str, float]:
        if not self.ok:
            return {}
        out = {}
        for name, which in (("gpu sm", "NVML_CLOCK_SM"), ("gpu memory", "NVML_CLOCK_MEM")):
            v = self._call("nvmlDeviceGetClockInfo", getattr(self._nv, which))
            if v is not None:
                out[name] = float(v)
        return out

    def process_memory_mib(self, pid: int) -> float | None:
        procs = self._call("nvmlDeviceGetComputeRunningProcesses") or []
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            if getattr(p, "pid", None) == pid and isinstance(used, int):
                return used / 2**20
        return None


class Sensors:
    """Everything a window records besides latency; ``describe()`` says what is readable here."""

    def __init__(self, root: str | Path = "/", device: str = "cpu", pid: int | str = "self"):
        self.root, self.pid = Path(root), pid
        self.gpu = GpuSensor(device_index(device)) if device.startswith("cuda") else None

    def read(self) -> dict[str, Any]:
        temps = {**hwmon_temperatures(self.root), **thermal_zones(self.root)}
        clocks = {**cpu_clocks(self.root), **devfreq_clocks(self.root)}
        out: dict[str, Any] = {"rss_mb": rss_mb(self.root, self.pid), "temperatures_c": temps,
                               "clocks_mhz": clocks}
        if self.gpu is not None and self.gpu.ok:
            t = self.gpu.temperature_c()
            if t is not None:
                temps["gpu"] = t
            clocks.update(self.gpu.clocks_mhz())
            out["gpu_memory_mib"] = self.gpu.memory_used_mib()
            out["gpu_process_memory_mib"] = self.gpu.process_memory_mib(os.getpid() if self.pid == "self"
                                                                        else int(self.pid))
        return out

    def describe(self) -> list[str]:
        """One line per source: what it gives here, or that it gives nothing."""
        r = self.root
        found = [("RSS (VmRSS)", 1 if rss_mb(r, self.pid) is not None else 0),
                 ("hwmon temperatures", len(hwmon_temperatures(r))), ("thermal zones", len(thermal_zones(r))),
                 ("cpufreq clocks", len(cpu_clocks(r))), ("devfreq clocks", len(devfreq_clocks(r)))]
        out = [f"{name}: {n} reading{'s' if n != 1 else ''}" if n else f"{name}: none readable here"
               for name, n in found]
        if self.gpu is not None:
            out.append("NVML: GPU memory, temperature and clocks" if self.gpu.ok
                       else f"NVML: {self.gpu.reason}")
        return out

    def close(self) -> None:
        if self.gpu is not None:
            self.gpu.close()
