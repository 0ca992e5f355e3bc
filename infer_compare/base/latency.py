"""Latency statistics of one row: the summary of its raw per-call samples (records.LatencyStats)."""

from __future__ import annotations

from dataclasses import dataclass

from infer_compare.base.serial import Record
from infer_compare.base.statistics import MIN_WINDOWS, ci_rel, row_interval

UNSTABLE_WITHOUT_TARGET = 0.02  # --target-ci 0: windows whose interval is wider than +-2 % are unstable

# A percentile is reported only when n >= 1 / (1 - q): at least one sample is then expected beyond
# it. Below that, the interpolated value is the maximum, or a blend towards it, under another name.
PERCENTILE_MIN_SAMPLES: dict[str, int] = {"p90": 10, "p95": 20, "p99": 100}


def percentile_rule() -> str:
    """The rule above in words, for the reports' notes."""
    need = ", ".join(f"{k} >= {v}" for k, v in PERCENTILE_MIN_SAMPLES.items())
    return (f"a percentile is shown only where the row has enough samples for it ({need}: at least one call "
            "expected beyond it); with fewer it would be the maximum under another name, so it shows –")


@dataclass(frozen=True)
class LatencyStats(Record):
    """Summary of raw per-call latencies. No outlier clipping: tails matter.

    ``p90_ms``/``p95_ms``/``p99_ms`` are None where ``count`` is below
    :data:`PERCENTILE_MIN_SAMPLES`. ``median_ci_low_ms``/``median_ci_high_ms``: the 95 % interval
    of the p50. Measured in windows (``windows`` set): from the spread between the window medians,
    never narrower than the within-window CI of the median, which ``within_ci_low_ms``/``within_ci_high_ms``
    keep (``statistics.row_interval``); files written before windows: that within-window CI
    (distribution-free, order statistics), None below 6 samples. Files written before these rules
    keep their stored percentiles; :meth:`percentile` applies the rule to them too.
    """

    count: int
    mean_ms: float
    std_ms: float
    min_ms: float
    p50_ms: float
    p90_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    max_ms: float
    median_ci_low_ms: float | None = None
    median_ci_high_ms: float | None = None
    target_ci: float | None = None  # the relative half-width the loop aimed at
    stopped_by: str = ""  # how the measured loop ended: target, budget, max_iters, min (bench.STOP_*)
    # measured in windows (None: a file written before them): how many the figures come from, the smallest and
    # largest window median, the within-window CI of the median, and the flags
    windows: int | None = None
    window_min_ms: float | None = None
    window_max_ms: float | None = None
    within_ci_low_ms: float | None = None
    within_ci_high_ms: float | None = None
    unstable: bool = False  # the windows' interval is wider than the target: they disagree beyond it
    disturbed: bool = False  # other processes used the cores while windows it keeps were measured
    # measured in several processes a pass apart (None: one process; measure/passes.py): how many, their
    # medians' range, and the spread the interval comes from: the log-scale sd of one process's median,
    # pooled over ``pooled_rows`` rows of this device and batch band
    processes: int | None = None
    process_min_ms: float | None = None
    process_max_ms: float | None = None
    pooled_sd: float | None = None
    pooled_rows: int | None = None

    @classmethod
    def from_samples_ns(cls, samples_ns, *, target_ci: float | None = None, stopped_by: str = "",
                        windows: tuple[int, ...] | None = None, disturbed: bool = False) -> LatencyStats:
        """``windows``: how many of ``samples_ns`` (in time order) each window measured; the interval of
        the p50 then comes from them (see the class)."""
        import numpy as np

        a = np.asarray(samples_ns, dtype=np.float64) / 1e6
        if a.size == 0:
            raise ValueError("no latency samples")
        if windows is not None and sum(windows) != a.size:
            raise ValueError(f"windows of {sum(windows)} samples for {a.size} samples")
        p = np.percentile(a, [90, 95, 99])
        ri = row_interval(a, windows)
        med, lo, hi = ri.median, ri.low, ri.high
        shown = {k: float(v) if a.size >= PERCENTILE_MIN_SAMPLES[k] else None
                 for k, v in zip(("p90", "p95", "p99"), p, strict=True)}
        return cls(
            count=int(a.size),
            mean_ms=float(a.mean()),
            std_ms=float(a.std(ddof=1)) if a.size > 1 else 0.0,
            min_ms=float(a.min()),
            p50_ms=med,
            p90_ms=shown["p90"],
            p95_ms=shown["p95"],
            p99_ms=shown["p99"],
            max_ms=float(a.max()),
            median_ci_low_ms=lo,
            median_ci_high_ms=hi,
            target_ci=target_ci,
            stopped_by=stopped_by,
            **_window_fields(ri, windows, target_ci, disturbed),
        )

    def percentile(self, name: str) -> float | None:
        """``"p50"``, ``"p90"``, ``"p95"`` or ``"p99"`` in ms, None where ``count`` does not support it."""
        if self.count < PERCENTILE_MIN_SAMPLES.get(name, 1):
            return None
        return getattr(self, f"{name}_ms")

    @property
    def omitted_percentiles(self) -> tuple[str, ...]:
        return tuple(k for k in PERCENTILE_MIN_SAMPLES if self.percentile(k) is None)

    @property
    def median_ci_rel(self) -> float | None:
        """Half-width of the p50's 95 % interval (from its windows where it has them) relative to the p50;
        None where not known."""
        return ci_rel(self.p50_ms, self.median_ci_low_ms, self.median_ci_high_ms)

    @property
    def budget_ran_out(self) -> bool:
        """The loop ended on its time budget with the interval still wider than its target."""
        r = self.median_ci_rel
        return self.stopped_by == "budget" and bool(self.target_ci) and (r is None
                                                                          or r > (self.target_ci or 0))


def _window_fields(ri, windows: tuple[int, ...] | None, target_ci: float | None, disturbed: bool) -> dict:
    """The window fields of a row measured in windows (statistics.RowInterval ``ri``); none without them."""
    if windows is None:
        return {}
    meds = ri.window_medians
    b = ri.between_rel
    limit = target_ci or UNSTABLE_WITHOUT_TARGET
    return {"windows": len(meds), "window_min_ms": min(meds) if meds else None,
            "window_max_ms": max(meds) if meds else None, "within_ci_low_ms": ri.within_low,
            "within_ci_high_ms": ri.within_high, "disturbed": bool(disturbed),
            "unstable": len(meds) >= MIN_WINDOWS and b is not None and b > limit}
