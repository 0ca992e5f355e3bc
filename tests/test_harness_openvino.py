"""benchmarks/harness_openvino.py: how it reads benchmark_app's console report (real ones, saved from
benchmark_app 2026.4.1 on the 2-core machine) and the like-for-like ratios it forms from both sides' figures.
The numbers are benchmark_app's saved report and stand-ins: no assertion is on a measured time."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.bench_modules import bench_module

DATA = Path(__file__).parent / "data" / "benchmark_app"


def _harness():
    return bench_module("harness_openvino")


def test_benchmark_app_reports_are_read():
    h = _harness()
    lat = h.parse_benchmark_app((DATA / "latency.txt").read_text())
    assert lat["api"] == "sync" and lat["infer_requests"] == 1 and lat["PERFORMANCE_HINT"] == "LATENCY"
    assert lat["median_ms"] == 2.02 and lat["average_ms"] == 2.09 and lat["count"] == 469
    assert lat["duration_ms"] == 1002.23 and lat["wall_per_iteration_ms"] == pytest.approx(1002.23 / 469)
    assert lat["first_inference_ms"] == 5.11 and lat["fps"] == 467.96
    assert lat["properties"]["ENABLE_CPU_PINNING"] == "True" and lat["NUM_STREAMS"] == "1"
    assert lat["properties"]["INFERENCE_PRECISION_HINT"] == "<Type: 'float32'>"
    tp = h.parse_benchmark_app((DATA / "throughput.txt").read_text())
    assert tp["api"] == "async" and tp["infer_requests"] == 2 and tp["PERFORMANCE_HINT"] == "THROUGHPUT"
    assert tp["count"] == 504 and tp["fps"] == 501.07 and tp["NUM_STREAMS"] == "2"
    us = (DATA / "latency.txt").read_text().replace("Median:        2.02 ms", "Median:        512.50 us")
    assert h.parse_benchmark_app(us)["median_ms"] == pytest.approx(0.5125)
    with pytest.raises(RuntimeError, match="Median"):
        h.parse_benchmark_app("[ ERROR ] nothing measured")


def test_harness_ratios_compare_like_with_like():
    h = _harness()
    ba = h.parse_benchmark_app((DATA / "latency.txt").read_text())
    bridge = dict(ba, median_ms=2.5)
    row = SimpleNamespace(latency=SimpleNamespace(p50_ms=2.2, mean_ms=2.3, count=100),
                          extra={"openvino_ms_p50": 2.0, "openvino_ms_mean": 2.25},
                          options={"INFERENCE_NUM_THREADS": 2, "NUM_STREAMS": 1})
    p = h.latency_pair(row, ba, bridge)
    assert p["tool_python_per_call_ms"] == pytest.approx(0.05)
    assert p["benchmark_app_python_per_call_ms"] == pytest.approx(1002.23 / 469 - 2.09)
    assert p["ratio"] == pytest.approx(2.2 / 2.02)  # the figure: wall p50 over OpenVINO's own Median
    assert p["ratio_own"] == pytest.approx(2.0 / 2.02) and p["ratio_tool_bridge"] == pytest.approx(2.0 / 2.5)
    assert p["ratio_wall_mean"] == pytest.approx(2.3 / (1002.23 / 469))
    assert p["ratio_bridge_ba"] == pytest.approx(2.5 / 2.02)
    tpa = h.parse_benchmark_app((DATA / "throughput.txt").read_text())
    trow = SimpleNamespace(throughput=400.0, samples_ns=(4_000_000,) * 400, measured_wall_s=1.0,
                           options={"infer_requests": 2, "NUM_STREAMS": 2, "INFERENCE_NUM_THREADS": 2},
                           extra={"loop": {"warmup_calls": 6}})
    t = h.throughput_pair(trow, tpa, dict(tpa, fps=450.0))
    assert t["tool_occupancy"] == pytest.approx(400 * 4.0 / (1000 * 2)) and t["tool_warmup_requests"] == 6
    assert t["benchmark_app_occupancy"] == pytest.approx(504 * 3.88 / (1005.85 * 2))
    assert t["ratio"] == pytest.approx(400 / 501.07) and t["ratio_tool_bridge"] == pytest.approx(400 / 450)
    assert h.property_diff({"A": "1", "B": "2", "C": "x"},
                           {"A": "1", "B": "3", "D": "y"}) == {"B": ("2", "3")}


