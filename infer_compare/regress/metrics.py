"""The metrics a rule can name: how to read each from a row, its unit, which direction is worse."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from infer_compare.base.records import RunRecord


@dataclass(frozen=True)
class Metric:
    name: str
    title: str
    unit: str  # unit of absolute thresholds
    worse: int  # +1: higher is worse (latency), -1: lower is worse (throughput, accuracy)
    get: Callable[[RunRecord], float | None]
    # "quantile:<q>", "mean", "min", "max", "throughput": bootstrap statistic on raw samples
    samples: str = ""
    aliases: tuple[str, ...] = ()
    percent: bool = False  # a value in percent, whose changes and absolute thresholds are percentage points

    @property
    def value_unit(self) -> str:
        """The unit of the metric's values (accuracy: %), where ``unit`` is that of its changes (pp)."""
        return "%" if self.percent else self.unit


def _lat(attr: str) -> Callable[[RunRecord], float | None]:
    return lambda r: getattr(r.latency, attr) if r.latency is not None else None


def _par(attr: str, scale: float = 1.0) -> Callable[[RunRecord], float | None]:
    def get(r: RunRecord) -> float | None:
        v = getattr(r.parity, attr, None) if r.parity is not None else None
        return None if v is None else float(v) * scale

    return get


def _size(r: RunRecord) -> float | None:
    return r.export.size_bytes / 1e6 if r.export is not None else None


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("p50", "p50 latency", "ms", +1, _lat("p50_ms"), "quantile:50", ("median",)),
    Metric("p90", "p90 latency", "ms", +1, _lat("p90_ms"), "quantile:90"),
    Metric("p95", "p95 latency", "ms", +1, _lat("p95_ms"), "quantile:95"),
    Metric("p99", "p99 latency", "ms", +1, _lat("p99_ms"), "quantile:99"),
    Metric("mean", "mean latency", "ms", +1, _lat("mean_ms"), "mean"),
    Metric("min", "min latency", "ms", +1, _lat("min_ms"), "min"),
    Metric("max", "max latency", "ms", +1, _lat("max_ms"), "max"),
    Metric("throughput", "throughput", "img/s", -1, lambda r: r.throughput, "throughput",
           ("img/s", "thr", "ips")),
    Metric("accuracy", "accuracy", "pp", -1, _par("accuracy", 100.0), "", ("acc",), percent=True),
    Metric("top1", "top-1 agreement", "pp", -1, _par("top1_agreement", 100.0), "", ("top-1",), percent=True),
    Metric("top5", "top-5 agreement", "pp", -1, _par("top5_agreement", 100.0), "", ("top-5",), percent=True),
    Metric("cosine", "mean cosine similarity", "", -1, _par("cosine_mean"), "", ("cos", "parity")),
    Metric("rel_err", "max relative error", "", +1, _par("rel_max"), "", ("rel_max",)),
    Metric("load", "load time", "s", +1, lambda r: r.load_s, "", ("load_s",)),
    Metric("memory", "peak RSS", "MB", +1, lambda r: r.peak_rss_mb, "", ("rss", "peak_rss")),
    Metric("size", "artifact size", "MB", +1, _size, "", ()),
)}
_ALIASES = {a: m.name for m in METRICS.values() for a in (m.name, *m.aliases)}


def fmt_value(v: float | None, unit: str = "") -> str:
    if v is None:
        return "–"
    a = abs(v)
    s = f"{v:.4g}" if a < 1000 else f"{v:,.0f}"
    return f"{s} {unit}".rstrip()
