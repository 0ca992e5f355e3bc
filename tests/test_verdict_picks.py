"""The verdict's picks (issue 23, point 8): rows whose parity was judged and passed come first; a pick among
rows that were only reported (int8 with random weights) says so in its title; no pick repeats another."""

import io

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
from infer_compare.report import render
from infer_compare.report.verdict import verdict

RANDOM = "int8 with random weights: reported, not judged"


def _row(backend, fmt, prec, batch, p50_ms, *, judged=True, size=1_000_000, top1=1.0):
    samples = tuple(int(p50_ms * 1e6) + i for i in range(40))
    par = ParityResult(32, 1e-3, 1e-4, 1e-3, 0.99, 0.98, top1, 1.0, judged=judged,
                       note="" if judged else RANDOM)
    art = ExportRecord(fmt, prec, f"/x/{fmt}-{prec}", size, 1.0, False)
    return RunRecord(backend, fmt, prec, "cpu", batch, OK, latency=LatencyStats.from_samples_ns(samples),
                     throughput=batch * 1000 / p50_ms, parity=par, samples_ns=samples, export=art)


def _report(rows, batches=(1,)):
    env = Environment("abc", "Linux", "6.1", "x86_64", "CPython 3.11.7", "Some CPU", ("avx2",), 2, 4, 24.0,
                      "0.1.0", {"numpy": "2.4.6"}, (), {})
    minfo = ModelInfo("resnet50", "torchvision", "random", "x", "h" * 16, (3, 224, 224), 1000)
    settings = Settings({"cpu": batches}, 2, 3, 10, 1.0, 32, 600.0)
    return Report(SCHEMA_VERSION, "0.1.0", "2026-11-25T06:00:00+0000", ("infer-compare",), minfo, env,
                  settings, tuple(rows))


def _mixed(batches=(1,)):
    rows = []
    for b in batches:
        k = b if b == 1 else b / 2  # batching doubles the throughput
        rows += [_row("pytorch", "pytorch", "fp32", b, 10.0 * k, size=100_000_000),
                 _row("onnxruntime", "onnx", "fp32", b, 6.0 * k, size=100_000_000),
                 _row("onnxruntime", "onnx", "int8", b, 2.0 * k, judged=False, size=25_000_000, top1=0.31)]
    return _report(rows, tuple(batches))


def test_judged_rows_are_picked_before_faster_rows_that_were_not_judged():
    v = verdict(_mixed((1, 8)))
    assert [p.row.precision for p in v.picks] == ["fp32", "fp32", "fp32"]
    assert all(p.row.backend == "onnxruntime" for p in v.picks[:2])
    assert all("not judged" not in p.title for p in v.picks)
    assert "not picked: 2 rows that passed parity without being judged (random weights)" in v.notes


def test_a_pick_among_rows_that_were_not_judged_says_so():
    rep = _report([_row("pytorch", "pytorch", "fp32", 1, 10.0, judged=False, size=100_000_000),
                   _row("onnxruntime", "onnx", "int8", 1, 2.0, judged=False, size=25_000_000, top1=0.47)])
    v = verdict(rep)
    assert v.picks and all(p.title.endswith("(not judged: random weights)") for p in v.picks)
    fast = v.picks[0]
    assert fast.row.precision == "int8" and fast.text().startswith(
        "fastest at batch 1 and highest throughput (not judged: random weights): onnxruntime")
    assert "parity reported, not judged" not in fast.text()  # said once, in the title


def test_one_batch_size_gives_one_line_for_fastest_and_highest_throughput():
    v = verdict(_mixed((1,)))
    titles = [p.title for p in v.picks]
    assert titles == ["fastest at batch 1 and highest throughput", "smallest artifact"]
    fast = v.picks[0]
    assert "p50 6.00 ms" in fast.value and "167 img/s" in fast.value
    lines = v.lines()
    assert len(lines) == len(set(lines)) and sum("img/s" in line for line in lines) == 1


def test_different_rows_keep_their_own_lines():
    v = verdict(_mixed((1, 8)))
    assert [p.title for p in v.picks] == ["fastest at batch 1", "highest throughput", "smallest artifact"]
    assert v.picks[0].row.batch_size == 1 and v.picks[1].row.batch_size == 8
    assert v.picks[0].row is not v.picks[1].row


def test_a_judged_row_at_another_batch_does_not_hide_the_only_batch_1_candidate():
    rows = [_row("pytorch", "pytorch", "fp32", 8, 80.0, size=100_000_000),
            _row("onnxruntime", "onnx", "int8", 1, 2.0, judged=False, size=25_000_000)]
    v = verdict(_report(rows, (1, 8)))
    fast = next(p for p in v.picks if p.title.startswith("fastest at batch 1"))
    assert fast.title == "fastest at batch 1 (not judged: random weights)"
    thr = next(p for p in v.picks if p.title.startswith("highest throughput"))
    assert thr.row.backend == "pytorch" and "not judged" not in thr.title


def test_renderers_show_the_not_judged_title():
    from rich.console import Console

    from infer_compare.report.terminal import print_verdict

    rep = _report([_row("onnxruntime", "onnx", "int8", 1, 2.0, judged=False)])
    buf = io.StringIO()
    print_verdict(rep, Console(file=buf, width=200, no_color=True))
    assert "fastest at batch 1 and highest throughput (not judged: random weights): onnxruntime onnx int8" \
        in buf.getvalue()
    assert "- fastest at batch 1 and highest throughput (not judged: random weights): onnxruntime" \
        in render(rep, "md")
    assert "(not judged: random weights)" in render(rep, "html")
