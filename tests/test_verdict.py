"""The verdict under the table: fastest at batch 1, highest throughput (rows that passed parity), each with
its speed-up over PyTorch fp32 on the CPU at the same batch, and the smallest artifact."""

import io
from pathlib import Path

import pytest

from infer_compare.base.records import PARITY_FAILED, LatencyStats, load_report
from infer_compare.report import render
from infer_compare.report import verdict as common

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def cpu_report():
    # 16 measured rows: pytorch/onnxruntime/openvino (fp32, bf16, fp16, int8)/tflite, batch 1 and 8
    return load_report(ROOT / "tests" / "data" / "reports" / "cpu-resnet50-v1.json")


def _row(rep, backend, precision, batch, device="cpu"):
    return next(r for r in rep.rows if (r.backend, r.precision, r.batch_size, r.device)
                == (backend, precision, batch, device))


def _with(rep, old, new):
    return rep.replace(rows=tuple(new if r is old else r for r in rep.rows))


def _all_judged(rep):
    """The fixture's int8 rows (random weights) were reported, not judged, and the verdict prefers judged rows
    (tests/test_verdict_picks.py): judged here, so that these tests pick among every row."""
    return rep.replace(rows=tuple(r.replace(parity=r.parity.replace(judged=True)) if r.parity else r
                                  for r in rep.rows))


def test_verdict_picks_fastest_highest_throughput_and_smallest(cpu_report):
    rep = _all_judged(cpu_report)
    v = common.verdict(rep)
    fast, thr, small = v.picks
    int8_b1, ref_b1 = _row(rep, "openvino", "int8", 1), _row(rep, "pytorch", "fp32", 1)
    int8_b8, ref_b8 = _row(rep, "openvino", "int8", 8), _row(rep, "pytorch", "fp32", 8)
    assert fast.row is int8_b1
    assert fast.speedup == pytest.approx(ref_b1.latency.p50_ms / int8_b1.latency.p50_ms)
    assert thr.row is int8_b8 and thr.speedup == pytest.approx(int8_b8.throughput / ref_b8.throughput)
    assert small.row.format == "openvino" and small.row.precision == "int8"
    assert "3.93× smaller than the PyTorch fp32 weights" in small.text()
    assert "8.92× the reference (PyTorch fp32 on cpu: 117 ms)" in fast.text()


def test_rows_that_failed_parity_are_left_out(cpu_report):
    rep = cpu_report
    for b in (1, 8):
        r = _row(rep, "openvino", "int8", b)
        rep = _with(rep, r, r.replace(status=PARITY_FAILED, parity=r.parity.replace(passed=False)))
    v = common.verdict(rep)
    assert v.picks[0].row is _row(rep, "openvino", "bf16", 1)
    assert v.picks[1].row is _row(rep, "openvino", "bf16", 8)
    assert v.picks[2].row.precision != "int8"
    assert "left out: 2 rows that failed parity" in v.notes


def test_throughput_at_a_batch_the_reference_did_not_run(cpu_report):
    rep = cpu_report
    r = _row(rep, "onnxruntime", "fp32", 8)
    big = r.replace(batch_size=256, throughput=5000.0)
    rep = rep.replace(rows=rep.rows + (big,))
    thr = common.verdict(rep).picks[1]
    ref_b8 = _row(rep, "pytorch", "fp32", 8)  # the reference's best throughput
    assert thr.row is big and thr.speedup == pytest.approx(5000.0 / ref_b8.throughput)
    assert "has no batch 256" in thr.versus and "batch 8" in thr.versus


def test_rows_apart_by_less_than_their_noise_are_a_tie(cpu_report):
    """1 % apart, each p50 within about ±1 %: the ratio is inside its own interval, a tie (rows whose
    intervals merely overlap while their ratio is clear of it are not: tests/test_verdict_ties.py)."""
    rep = _all_judged(cpu_report)
    a, b = _row(rep, "openvino", "int8", 1), _row(rep, "openvino", "bf16", 1)
    la = LatencyStats.from_samples_ns([9_850_000 + i * 20_000 for i in range(30)])
    lb = LatencyStats.from_samples_ns([9_950_000 + i * 20_000 for i in range(30)])
    rep = _with(_with(rep, a, a.replace(latency=la)), b, b.replace(latency=lb))
    fast = common.verdict(rep).picks[0]
    # within the noise: the line names the tie (it named the faster row with a caveat before)
    assert fast.row.precision == "int8" and [r.precision for r in fast.ties] == ["bf16"]
    assert "tie within the noise: openvino openvino int8 (ran int8+bf16) and bf16 on cpu, batch 1 (p50 " \
        "10.1 / 10.2 ms)" in fast.text()
    lb_far = LatencyStats.from_samples_ns([20_000_000 + i * 10_000 for i in range(30)])
    b2 = _row(rep, "openvino", "bf16", 1)
    far = common.verdict(_with(rep, b2, b2.replace(latency=lb_far))).picks[0]
    assert far.ties == () and "tie" not in far.text()


def test_merged_report_compares_within_a_machine():
    rep = load_report(ROOT / "reports" / "merged-cpu-h200-resnet50" / "results.json")
    fast = common.verdict(rep).picks[0]
    assert fast.row.device.startswith("h200:")
    assert "h200:cuda:0" in fast.versus  # that machine ran no CPU rows: its own PyTorch fp32 row
    assert common.reference_rows(rep, "xeon-2vcpu:cpu")[0].device == "xeon-2vcpu:cpu"


def test_no_row_passed_parity(cpu_report):
    rep = cpu_report.replace(rows=tuple(r.replace(status=PARITY_FAILED) if r.status == "ok" else r
                                        for r in cpu_report.rows))
    v = common.verdict(rep)
    assert v.picks == () and any("nothing to pick" in n for n in v.notes)


def test_terminal_and_markdown_show_the_verdict(cpu_report):
    from rich.console import Console

    buf = io.StringIO()
    from infer_compare.report.terminal import print_report

    cpu_report = _all_judged(cpu_report)
    print_report(cpu_report, Console(file=buf, width=220, no_color=True))
    out = buf.getvalue()
    table_end = out.index("precision: asked→ran")  # the legend right under the table
    # the verdict last
    assert out.index("Verdict") > table_end and out.index("Verdict") > out.index("skipped (")
    assert "fastest at batch 1: openvino openvino int8" in out and "highest throughput:" in out
    md = render(cpu_report, "md")
    assert "**Verdict**" in md and "- smallest artifact: openvino openvino int8" in md
    html = render(cpu_report, "html")
    assert "fastest at batch 1" in html and "8.92× the reference" in html
