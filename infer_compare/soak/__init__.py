"""Soak: run one or more configurations for a long time and watch them per time window.

Enters: a model or a bundle and the run's MeasureOptions. Leaves: a Report with ``Report.soak``.
May import: bundle, measure and every layer below them (never regress).

    from infer_compare.soak import soak
    report = soak("lenet5", backends=["onnxruntime"], precisions=["fp32"], batch_sizes=[1],
                  duration_s=600, window_s=10)
    for res in report.soak:
        print(res.label, res.rss_start_mb, res.rss_end_mb, res.rss_growth_mb_per_10k_calls, res.p50_drift)

Each configuration soaks in one isolated child process (child.py) that loads the
runtime once, then calls it for the whole duration and writes one line per window as
soon as the window ends: calls, throughput, latency percentiles, RSS, GPU memory,
temperatures and clocks. The parent (run.py) reads the lines as they come, so an
interrupt or a crash keeps every finished window. base/soak_records.py holds the records and the
summary (RSS growth per 10,000 calls, latency and throughput drift); sensors.py the
readers of /proc, sysfs and NVML.
"""

from __future__ import annotations

from infer_compare.base.soak_records import SoakResult, SoakWindow, rss_growth_exceeds

__all__ = ["SoakResult", "SoakWindow", "parse_duration", "rss_growth_exceeds", "soak"]


def __getattr__(name: str):  # PEP 562: the runner side imports measuring code, load it only when used
    if name in ("soak", "parse_duration"):
        # deferred: the soaking child's start stays light without it (+41 modules)
        from infer_compare.soak import run

        return getattr(run, name)
    raise AttributeError(name)
