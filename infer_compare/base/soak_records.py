"""The soak's records: one :class:`SoakWindow` per time window of one configuration, and
one :class:`SoakResult` per configuration (its windows and their summary).

A soak's ``results.json`` is a :class:`~infer_compare.base.records.Report` whose rows are the
soaked configurations and whose ``soak`` holds these. The summary is computed from the
windows alone (``SoakResult.build``), so a report cut short by an interrupt or a crash is
summarized the same way from the windows it kept.

Summary rules:

* RSS growth per 10,000 calls: least-squares slope of the windows' RSS against the calls
  made so far, over the windows after the first (the first one still sees allocator and
  runtime caches fill), times 10,000. None with fewer than two such windows.
* latency drift: the last full window's p50 over the first full window's p50 (a window is
  full when it lasted at least half the requested window; the soak's last window may be
  shorter or longer); the slope: least-squares slope of the full windows' p50 against
  time, as percent of their median per minute. Throughput the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from infer_compare.base.serial import Record

GROWTH_PER_CALLS = 10_000  # RSS growth is stated per this many calls
MIN_FULL_FRACTION = 0.5  # a window that lasted at least this share of --window is a full one


@dataclass(frozen=True)
class SoakWindow(Record):
    """One time window of a soak: its calls, latency, throughput, memory and the machine's sensors."""

    index: int
    start_s: float  # since the first window began
    end_s: float  # the end of its last call; end_s - start_s is the wall time its throughput is over
    calls: int
    images: int
    throughput: float  # images / (end_s - start_s)
    mean_ms: float
    std_ms: float
    min_ms: float
    p50_ms: float
    p90_ms: float | None  # None where the window has too few calls (records.PERCENTILE_MIN_SAMPLES)
    p99_ms: float | None
    max_ms: float
    rss_mb: float | None = None  # VmRSS of the soaking process at the window's end
    gpu_memory_mib: float | None = None  # memory used on the whole GPU (NVML), CUDA devices only
    # this process's GPU memory (NVML), where the driver reports it
    gpu_process_memory_mib: float | None = None
    temperatures_c: dict[str, float] = field(default_factory=dict)  # sensor -> degrees C at the window's end
    clocks_mhz: dict[str, float] = field(default_factory=dict)  # clock -> MHz at the window's end

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class SoakResult(Record):
    """One configuration's soak: the windows and their summary (see the module's rules)."""

    label: str  # the configuration's row label (RunRecord.label)
    duration_s: float  # asked for
    window_s: float  # asked for
    windows: tuple[SoakWindow, ...] = ()
    calls: int = 0
    images: int = 0
    rss_start_mb: float | None = None  # after loading and warm-up, before the first window
    rss_end_mb: float | None = None  # at the end of the last window
    rss_growth_mb_per_10k_calls: float | None = None
    p50_drift: float | None = None  # last full window's p50 / first full window's p50
    p50_slope_pct_per_min: float | None = None
    throughput_drift: float | None = None  # last full window's throughput / first full window's
    throughput_slope_pct_per_min: float | None = None
    stopped_by: str = ""  # duration, interrupted, crashed, timed_out, failed
    reason: str = ""  # why it stopped early
    sensors: tuple[str, ...] = ()  # what the child could read (and why not, for what it could not)

    @property
    def interrupted(self) -> bool:
        return self.stopped_by == "interrupted"

    @classmethod
    def build(cls, label: str, duration_s: float, window_s: float, windows: Sequence[SoakWindow], *,
              rss_start_mb: float | None = None, stopped_by: str = "duration", reason: str = "",
              sensors: Sequence[str] = ()) -> SoakResult:
        """The result of ``windows`` with its summary computed."""
        ws = tuple(windows)
        return cls(label=label, duration_s=float(duration_s), window_s=float(window_s), windows=ws,
                   calls=sum(w.calls for w in ws), images=sum(w.images for w in ws),
                   rss_start_mb=rss_start_mb, rss_end_mb=ws[-1].rss_mb if ws else None,
                   rss_growth_mb_per_10k_calls=rss_growth(ws),
                   **drift(ws, window_s), stopped_by=stopped_by, reason=reason, sensors=tuple(sensors))


def _slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Least-squares slope of ys on xs; None with fewer than two distinct xs."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def rss_growth(windows: Sequence[SoakWindow]) -> float | None:
    """MB of RSS per 10,000 calls: the slope over the windows after the first (see the module)."""
    pts, calls = [], 0
    for i, w in enumerate(windows):
        calls += w.calls
        if i > 0 and w.rss_mb is not None:
            pts.append((float(calls), float(w.rss_mb)))
    s = _slope([p[0] for p in pts], [p[1] for p in pts])
    return None if s is None else s * GROWTH_PER_CALLS


def full_windows(windows: Sequence[SoakWindow], window_s: float) -> list[SoakWindow]:
    return [w for w in windows if w.calls > 0 and w.duration_s >= MIN_FULL_FRACTION * window_s]


def _median(v: Sequence[float]) -> float:
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def drift(windows: Sequence[SoakWindow], window_s: float) -> dict[str, float | None]:
    """Latency and throughput drift (last/first full window) and slopes (% of the median per minute)."""
    full = full_windows(windows, window_s)
    out: dict[str, float | None] = {"p50_drift": None, "p50_slope_pct_per_min": None,
                                    "throughput_drift": None, "throughput_slope_pct_per_min": None}
    if len(full) < 2:
        return out
    t = [(w.start_s + w.end_s) / 2 / 60 for w in full]
    for key, vals in (("p50", [w.p50_ms for w in full]), ("throughput", [w.throughput for w in full])):
        if vals[0] > 0:
            out[f"{key}_drift"] = vals[-1] / vals[0]
        s, med = _slope(t, vals), _median(vals)
        if s is not None and med > 0:
            out[f"{key}_slope_pct_per_min"] = 100 * s / med
    return out


def rss_growth_exceeds(result: SoakResult, bound_mb_per_10k_calls: float) -> bool:
    """True when the measured RSS growth per 10,000 calls is above the bound (False when unknown)."""
    g = result.rss_growth_mb_per_10k_calls
    return g is not None and g > bound_mb_per_10k_calls
