"""The verdict's timings as rankings with ties (report/verdict.py): a line names one row only where its
interval is clear of the next row's; otherwise the tie within the noise. Rows from simulated windows."""

import re
from dataclasses import replace

import numpy as np

from infer_compare.base.records import (
    OK,
    SCHEMA_VERSION,
    Environment,
    ExportRecord,
    LatencyStats,
    ModelInfo,
    ParityResult,
    Report,
    RunRecord,
    Settings,
)
from infer_compare.measure.bench import LoopSettings, time_loop
from infer_compare.report import render
from infer_compare.report.verdict import tied_label, verdict
from tests.test_windows import DEFAULT, Sim


def row(backend, fmt, prec, batch, p50_ms=None, *, latency=None, device="cpu", size=1_000_000,
        throughput=None):
    """A row that passed parity; its latency from ``latency``, else 40 samples around ``p50_ms``."""
    if latency is None:
        latency = LatencyStats.from_samples_ns(tuple(int(p50_ms * 1e6) + i for i in range(40)))
    par = ParityResult(32, 1e-3, 1e-4, 1e-3, 0.99, 0.98, 1.0, 1.0)
    art = ExportRecord(fmt, prec, f"/x/{fmt}-{prec}", size, 1.0, False)
    tp = throughput if throughput is not None else batch * 1000 / latency.p50_ms
    return RunRecord(backend, fmt, prec, device, batch, OK, latency=latency, throughput=tp, parity=par,
                     export=art)


def report(rows, batches=(1,)):
    env = Environment("abc", "Linux", "6.1", "x86_64", "CPython 3.11.7", "Some CPU", ("avx2",), 2, 4, 24.0,
                      "0.1.0", {"numpy": "2.4.6"}, (), {})
    minfo = ModelInfo("resnet50", "torchvision", "random", "x", "h" * 16, (3, 224, 224), 1000)
    settings = Settings({"cpu": batches}, 2, 3, 10, 1.0, 32, 600.0)
    return Report(SCHEMA_VERSION, "0.1.0", "2026-11-25T06:00:00+0000", ("infer-compare",), minfo, env,
                  settings, tuple(rows))


def measured(seed: int, base_ms: float, noise: float, s: LoopSettings = DEFAULT) -> LatencyStats:
    """A row's latency as the comparison measures it: the windowed loop on a fake clock whose speed moves by
    ``noise`` (lognormal) from window to window, its statistics from the windows it kept (measure/rows.py)."""
    sim = Sim(seed, base_ns=int(base_ms * 1e6), between=noise, within=0.01)
    r = time_loop(sim.fn, 0, s, first_call_done=True, clock=sim, load_meter=sim)
    return LatencyStats.from_samples_ns(r.used_samples(), target_ci=r.target_ci, stopped_by=r.stopped_by,
                                        windows=r.used_sizes(), disturbed=r.disturbed)


def _pair(seed: int, apart: float, noise: float):
    ref = row("pytorch", "pytorch", "fp32", 1, 10.0)
    a = row("onnxruntime", "onnx", "fp32", 1, latency=measured(2 * seed, 2.0, noise))
    b = row("onnxruntime", "onnx", "fp16", 1, latency=measured(2 * seed + 1, 2.0 * (1 + apart), noise))
    return verdict(report([ref, a, b])), a, b


def test_two_rows_one_percent_apart_with_three_percent_noise_are_a_tie():
    ties = 0
    for seed in range(20):
        v, a, b = _pair(seed, 0.01, 0.03)
        fast = v.picks[0]
        ties += bool(fast.ties)
        if fast.ties:
            assert {id(fast.row), *(id(r) for r in fast.ties)} == {id(a), id(b)}
            text = fast.text()
            assert text.startswith("fastest at batch 1")
            assert "tie within the noise: onnxruntime onnx fp" in text
            assert "fp32 and fp16 on cpu, batch 1" in text or "fp16 and fp32 on cpu, batch 1" in text
            assert " / " in fast.value and fast.value.startswith("p50 ")
    # their intervals (about +-1.7 % each after 15 windows) overlap unless the windows put them 3.4 % apart
    assert ties >= 18


def test_rows_clearly_apart_are_not():
    for seed in range(10):
        v, a, b = _pair(seed, 0.2, 0.03)
        fast = v.picks[0]
        assert fast.row is a and fast.ties == () and "tie" not in fast.text()
        assert fast.text().startswith("fastest at batch 1 and highest throughput: onnxruntime onnx fp32 on "
                                      "cpu")


def test_a_tie_names_its_rows_with_their_figures_and_the_speed_ups():
    lat = [LatencyStats.from_samples_ns(np.full(30, int(ms * 1e6)) + np.arange(30) * 1000,
                                        windows=(10, 10, 10)) for ms in (1.79, 1.84)]
    lat = [x.replace(median_ci_low_ms=x.p50_ms * 0.97, median_ci_high_ms=x.p50_ms * 1.03) for x in lat]
    rows = [row("pytorch", "pytorch", "fp32", 1, 3.6, device="cuda:0"),
            row("onnxruntime", "onnx", "tf32", 1, latency=lat[0], device="cuda:0"),
            row("onnxruntime", "onnx", "fp16", 1, latency=lat[1], device="cuda:0"),
            row("tensorrt", "engine", "fp16", 1, 2.5, device="cuda:0")]
    v = verdict(report(rows, (1,)))
    fast = v.picks[0]
    assert fast.text().startswith("fastest at batch 1 and highest throughput: tie within the noise: "
                                  "onnxruntime onnx tf32 and fp16 on cuda:0, batch 1 (p50 1.80 / 1.85 ms, ")
    assert "× the reference (PyTorch fp32 on cuda:0: 3.60 ms)" in fast.text()
    assert re.search(r"\), 1\.9\d-2× the reference", fast.text())  # each tied row's speed-up
    assert "tensorrt" not in fast.text()
    assert tied_label([rows[1], rows[3]]) == ("onnxruntime onnx tf32 on cuda:0, batch 1 and tensorrt engine "
                                              "fp16 on cuda:0, batch 1")
    md = render(report(rows, (1,)), "md")
    assert "- fastest at batch 1 and highest throughput: tie within the noise: onnxruntime onnx tf32 and " \
        "fp16" in md


def test_highest_throughput_names_the_tie_too():
    rows = [row("pytorch", "pytorch", "fp32", 8, 80.0),
            row("onnxruntime", "onnx", "fp32", 8, latency=measured(1, 10.0, 0.03)),
            row("openvino", "openvino", "fp32", 8, latency=measured(2, 10.05, 0.03)),
            row("onnxruntime", "onnx", "fp32", 1, 2.0)]
    v = verdict(report(rows, (1, 8)))
    thr = next(p for p in v.picks if p.title == "highest throughput")
    assert len(thr.ties) == 1 and "tie within the noise: " in thr.text()
    assert {r.backend for r in (thr.row, *thr.ties)} == {"onnxruntime", "openvino"}
    assert "onnx fp32 on cpu, batch 8 and " in thr.text()
    assert thr.value.endswith(" img/s") and " / " in thr.value


def test_rows_of_older_files_are_ranked_by_their_old_interval():
    # no windows: the within-loop CI of files written before them, as stored
    a = row("onnxruntime", "onnx", "fp32", 1, 2.0)
    b = row("onnxruntime", "onnx", "fp16", 1, 2.000002)
    assert a.latency.windows is None and a.latency.median_ci_high_ms >= b.latency.median_ci_low_ms
    fast = verdict(report([a, b])).picks[0]
    assert [id(r) for r in (fast.row, *fast.ties)] == [id(a), id(b)]
    c = row("onnxruntime", "onnx", "fp16", 1, 2.5)
    assert verdict(report([a, c])).picks[0].ties == ()


def test_a_tie_is_a_ratio_inside_its_own_interval_not_two_intervals_that_overlap():
    """Rows 1.95x apart with ±36 % intervals each overlap ([15.5, 31.9] and [30.2, 62.4] ms, as a noisy run's
    OpenVINO bf16 and fp32 rows did) and are no tie: the ratio's interval is ±54 %; rows 10 % apart are."""
    def wide(p50):
        lat = LatencyStats.from_samples_ns(tuple(int(p50 * 1e6) + i for i in range(40)))
        return replace(lat, median_ci_low_ms=p50 / 1.44, median_ci_high_ms=p50 * 1.44)
    fast, slow, near = (row("openvino", "openvino", p, 1, latency=wide(v))
                        for p, v in (("bf16", 22.7), ("fp32", 44.2), ("fp16", 25.0)))
    assert fast.latency.median_ci_high_ms > slow.latency.median_ci_low_ms  # the intervals overlap
    assert verdict(report([fast, slow])).picks[0].ties == ()
    assert [r.precision for r in verdict(report([fast, slow, near])).picks[0].ties] == ["fp16"]
