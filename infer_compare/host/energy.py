"""Energy of a measured loop from the machine's own counters, each reading with its source named.

* **CPU package energy, RAPL** through Linux powercap:
  ``/sys/class/powercap/<type>-rapl:<N>/energy_uj`` of every top-level zone named
  ``package-*`` (Intel, and AMD Zen, which the kernel's RAPL driver exposes under the
  same ``intel-rapl`` names; any ``*-rapl:<N>`` control type is read, the ``-mmio``
  duplicates are not). The counter wraps at ``max_energy_range_uj``; one wrap per
  window is corrected (a package at 300 W wraps its usual 262 kJ range in ~15 min).
  Since Linux 5.10 (CVE-2020-8694) ``energy_uj`` is readable by root only: the reason
  then says so. DRAM and psys zones are not added (DRAM is outside the package; psys
  overlaps it).
* **AMD ``amd_energy`` hwmon** (out-of-tree driver on older kernels): ``energy*_input``
  (µJ, 64-bit, no wrap) of the ``Esocket*`` channels.
* **Jetson power rails, INA3221**: JetPack 5/6 hwmon (``in[123]_label``,
  ``in[123]_input`` mV, ``curr[123]_input`` mA under ``/sys/bus/i2c/drivers/ina3221``
  or a ``/sys/class/hwmon`` entry named ``ina3221``) and the older L4T iio layout
  (``rail_name_<k>``, ``in_power<k>_input`` mW under ``/sys/bus/i2c/drivers/ina3221x``).
  The rails report power, not energy: a thread samples them every ``interval_s`` and
  integrates (trapezoids). The module's input rail (``VDD_IN``, ``POM_5V_IN``,
  ``5V_IN``) is used where there is one, otherwise the sum of all rails (AGX Xavier).
  The sampling thread wakes briefly every interval inside the measured process.

Every reader takes ``root`` (default ``/``) so that tests run on sample sysfs trees.
"""

from __future__ import annotations

import glob
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TOTAL_RAILS = ("VDD_IN", "POM_5V_IN", "5V_IN")
_RAPL_ZONE = re.compile(r"^[a-z]+-rapl:\d+$")


@dataclass(frozen=True)
class EnergyReading:
    joules: float
    seconds: float
    source: str
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def watts(self) -> float | None:
        return self.joules / self.seconds if self.seconds > 0 else None


def _read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def _p(root: str, *parts: str) -> str:
    return os.path.join(root, *parts)


# ---- RAPL / amd_energy: cumulative counters ---------------------------------------------------------


@dataclass(frozen=True)
class Counter:
    """One cumulative energy counter in µJ; ``max_uj`` where it wraps (None: never)."""

    name: str
    path: str
    max_uj: int | None

    def read_uj(self) -> int:
        return int(_read(self.path))


def rapl_delta_uj(e0: int, e1: int, max_uj: int | None) -> int:
    """Energy between two readings, corrected for one wrap-around of the counter."""
    if e1 >= e0 or not max_uj:
        return e1 - e0
    return e1 + max_uj - e0


def rapl_counters(root: str = "/") -> tuple[list[Counter], str]:
    """Package counters from powercap, and the reason when there are none."""
    base = _p(root, "sys/class/powercap")
    zones = sorted(d for d in glob.glob(os.path.join(base, "*")) if _RAPL_ZONE.match(os.path.basename(d)))
    found = []
    for z in zones:
        try:
            name = _read(os.path.join(z, "name"))
        except OSError:
            continue
        if not name.startswith("package"):
            continue
        try:
            mx: int | None = int(_read(os.path.join(z, "max_energy_range_uj")))
        except (OSError, ValueError):
            mx = None
        found.append(Counter(f"{os.path.basename(z)} {name}", os.path.join(z, "energy_uj"), mx))
    if not found:
        return [], f"no RAPL package zone under {base}"
    return found, ""


def amd_energy_counters(root: str = "/") -> tuple[list[Counter], str]:
    found = []
    for h in sorted(glob.glob(_p(root, "sys/class/hwmon/hwmon*"))):
        try:
            if _read(os.path.join(h, "name")) != "amd_energy":
                continue
        except OSError:
            continue
        for lab in sorted(glob.glob(os.path.join(h, "energy*_label"))):
            try:
                label = _read(lab)
            except OSError:
                continue
            if label.startswith("Esocket"):
                found.append(Counter(f"{os.path.basename(h)} {label}", lab[: -len("_label")] + "_input",
                                     None))
    return found, "" if found else "no amd_energy hwmon"


class _CounterMeter:
    def __init__(self, counters: list[Counter], source: str):
        self.counters = counters
        self.source = source
        self._e0: list[int] = []
        self._t0 = 0.0

    def check(self) -> str:
        """'' when every counter is readable, else why not."""
        for c in self.counters:
            try:
                c.read_uj()
            except PermissionError:
                return (f"{c.path} is readable by root only (Linux restricts RAPL energy counters "
                        "since 5.10, CVE-2020-8694); run as root or make it readable (chmod a+r) "
                        "to measure CPU energy")
            except (OSError, ValueError) as e:
                return f"cannot read {c.path}: {type(e).__name__}: {e}"
        return ""

    def start(self) -> None:
        self._t0 = time.perf_counter()
        self._e0 = [c.read_uj() for c in self.counters]

    def stop(self) -> EnergyReading:
        e1 = [c.read_uj() for c in self.counters]
        dt = time.perf_counter() - self._t0
        per = {c.name: rapl_delta_uj(a, b, c.max_uj) / 1e6
               for c, a, b in zip(self.counters, self._e0, e1, strict=True)}
        names = ", ".join(c.name for c in self.counters)
        return EnergyReading(sum(per.values()), dt, f"{self.source} ({names})", {"joules_per_counter": per})


# ---- Jetson INA3221 rails: power, sampled and integrated ----------------------------------------------


@dataclass(frozen=True)
class Rail:
    name: str
    read_mw: Callable[[], float]
    where: str


def _hwmon_rails(d: str) -> list[Rail]:
    rails = []
    for i in (1, 2, 3):
        v, c = os.path.join(d, f"in{i}_input"), os.path.join(d, f"curr{i}_input")
        if not (os.path.exists(v) and os.path.exists(c)):
            continue
        try:
            if _read(os.path.join(d, f"in{i}_enable")) == "0":
                continue
        except OSError:
            pass
        try:
            name = _read(os.path.join(d, f"in{i}_label"))
        except OSError:
            name = f"channel {i}"
        rails.append(Rail(name, lambda v=v, c=c: float(_read(v)) * float(_read(c)) / 1000.0, d))
    return rails


def _iio_rails(d: str) -> list[Rail]:
    rails = []
    for rn in sorted(glob.glob(os.path.join(d, "rail_name_*"))):
        k = rn.rsplit("_", 1)[1]
        pw = os.path.join(d, f"in_power{k}_input")
        if not os.path.exists(pw):
            continue
        try:
            name = _read(rn)
        except OSError:
            continue
        rails.append(Rail(name, lambda pw=pw: float(_read(pw)), d))
    return rails


def jetson_rails(root: str = "/") -> tuple[list[Rail], str]:
    """Every readable INA3221 rail (both layouts), and the reason when there is none."""
    dirs: dict[str, str] = {}  # realpath -> layout
    for d in glob.glob(_p(root, "sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*")):
        dirs.setdefault(os.path.realpath(d), "hwmon")
    for d in glob.glob(_p(root, "sys/class/hwmon/hwmon*")):
        try:
            if _read(os.path.join(d, "name")) == "ina3221":
                dirs.setdefault(os.path.realpath(d), "hwmon")
        except OSError:
            continue
    for d in glob.glob(_p(root, "sys/bus/i2c/drivers/ina3221x/*/iio:device*")):
        dirs.setdefault(os.path.realpath(d), "iio")
    rails: list[Rail] = []
    for d, layout in sorted(dirs.items()):
        rails += _hwmon_rails(d) if layout == "hwmon" else _iio_rails(d)
    readable = []
    for r in rails:
        try:
            r.read_mw()
            readable.append(r)
        except (OSError, ValueError):
            continue
    if not readable:
        return [], "no readable INA3221 power rail (not a Jetson, or no permission)" if rails or dirs else \
            "no INA3221 power monitor (not a Jetson)"
    return readable, ""


def select_rails(rails: list[Rail]) -> list[Rail]:
    """The module's input rail(s) where present (the others are inside it), else every rail."""
    total = [r for r in rails if r.name in TOTAL_RAILS]
    return total or rails


class _RailMeter:
    def __init__(self, rails: list[Rail], interval_s: float):
        self.rails = rails
        self.interval_s = interval_s
        self.source = "Jetson INA3221 rails " + " + ".join(r.name for r in rails)
        self._pts: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self) -> str:
        return ""

    def _sample(self) -> None:
        self._pts.append((time.perf_counter(), sum(r.read_mw() for r in self.rails)))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._sample()
            except (OSError, ValueError):
                pass

    def start(self) -> None:
        self._pts = []
        self._stop.clear()
        self._sample()
        self._thread = threading.Thread(target=self._run, name="energy-rails", daemon=True)
        self._thread.start()

    def stop(self) -> EnergyReading:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        pts = self._pts
        mj = sum((t1 - t0) * (p0 + p1) / 2.0 for (t0, p0), (t1, p1) in zip(pts[:-1], pts[1:], strict=True))
        src = f"{self.source} (power sampled every {self.interval_s * 1e3:.0f} ms, integrated)"
        return EnergyReading(mj / 1e3, pts[-1][0] - pts[0][0], src, {"power_samples": len(pts)})


# ---- the meter the harness uses --------------------------------------------------------------------------


class EnergyMeter:
    """Energy of a window, from the first source this machine can read.

    ``start()`` before the measured loop, ``stop()`` after it: an :class:`EnergyReading`
    (joules, seconds, source), or None, with ``reason`` saying why. Never raises.
    """

    def __init__(self, root: str = "/", interval_s: float = 0.05):
        self.root = root
        self.reason = ""
        self.source = ""
        self._impl: _CounterMeter | _RailMeter | None = None
        self._started = False
        reasons = []
        for make in (self._rapl, self._amd, self._jetson):
            impl, why = make(interval_s)
            if impl is not None:
                why = impl.check()
                if not why:
                    self._impl, self.source = impl, impl.source
                    return
            reasons.append(why)
        self.reason = "no energy counter readable here: " + "; ".join(reasons)

    def _rapl(self, _interval: float):
        cs, why = rapl_counters(self.root)
        return (_CounterMeter(cs, "RAPL powercap package energy") if cs else None), why

    def _amd(self, _interval: float):
        cs, why = amd_energy_counters(self.root)
        return (_CounterMeter(cs, "amd_energy hwmon socket energy") if cs else None), why

    def _jetson(self, interval: float):
        rails, why = jetson_rails(self.root)
        return (_RailMeter(select_rails(rails), interval) if rails else None), why

    @property
    def available(self) -> bool:
        return self._impl is not None

    def start(self) -> None:
        if self._impl is None:
            return
        try:
            self._impl.start()
            self._started = True
        except (OSError, ValueError) as e:
            self.reason = f"energy counter failed at start: {type(e).__name__}: {e}"
            self._impl = None

    def stop(self) -> EnergyReading | None:
        if self._impl is None or not self._started:
            self.reason = self.reason or "start() was not called"
            return None
        self._started = False
        try:
            return self._impl.stop()
        except (OSError, ValueError) as e:
            self.reason = f"energy counter failed at stop: {type(e).__name__}: {e}"
            return None


def energy_fields(reading: EnergyReading | None, images: int, reason: str = "") -> dict[str, Any]:
    """A row's ``extra`` entries for a reading over ``images`` images (what flops.efficiency reads)."""
    if reading is None or images <= 0:
        return {"energy": f"not measured: {reason or 'no images'}"}
    out: dict[str, Any] = {"energy_j_per_image": reading.joules / images, "energy_source": reading.source,
                           "energy_window_s": round(reading.seconds, 4), "energy_images": int(images)}
    if reading.watts is not None:
        out["energy_avg_power_w"] = round(reading.watts, 2)
    return out
