"""Every renderer leaves out a percentile that the row's sample count does not support, shows the median's
CI, and says why in a note; old files (every percentile stored) still load and render."""

import csv
import io
import re
from pathlib import Path

import numpy as np
import pytest

from infer_compare.base.records import LatencyStats, load_report
from infer_compare.report import common, render

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def rep():
    """The committed CPU ResNet-50 report (an old file: every percentile stored, n = 5..76), with two rows
    re-measured the new way: n = 12 (budget ran out) and n = 150."""
    old = load_report(ROOT / "tests" / "data" / "reports" / "cpu-resnet50-v1.json")
    rng = np.random.default_rng(0)
    few = LatencyStats.from_samples_ns((rng.lognormal(0, 0.3, 12) * 1e7).astype(int), target_ci=0.02,
                                       stopped_by="budget")
    many = LatencyStats.from_samples_ns((rng.lognormal(0, 0.01, 150) * 1e7).astype(int), target_ci=0.02,
                                        stopped_by="target")
    rows = list(old.rows)
    i = next(k for k, r in enumerate(rows) if r.backend == "onnxruntime" and r.batch_size == 1)
    j = next(k for k, r in enumerate(rows) if r.backend == "openvino" and r.batch_size == 1)
    rows[i] = rows[i].replace(latency=few)
    rows[j] = rows[j].replace(latency=many)
    return old.replace(rows=tuple(rows))


def _row(rep, backend, batch=1):
    return next(r for r in rep.rows if r.backend == backend and r.batch_size == batch)


def test_stats_of_the_fixture(rep):
    few, many = _row(rep, "onnxruntime").latency, _row(rep, "openvino").latency
    assert few.p90_ms is not None and few.p95_ms is None and few.p99_ms is None and few.budget_ran_out
    assert many.p99_ms is not None and many.median_ci_rel < 0.02 and not many.budget_ran_out


def test_terminal_shows_dashes_ci_and_the_reason(rep):
    from rich.console import Console

    from infer_compare.report.terminal import print_report

    buf = io.StringIO()
    print_report(rep, Console(file=buf, width=240, no_color=True))
    out = buf.getvalue()
    cols = list(common.COLUMNS)
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("backend"))
    assert re.split(r"\s{2,}", lines[head].strip()) == cols  # 240 columns: every column shown
    rows = [re.split(r"\s{2,}", ln.strip()) for ln in lines[head + 2:] if ln.strip()]
    cells = {(c[0], c[2], c[4]): c for c in rows if len(c) == len(cols)}
    few, many = cells[("onnxruntime", "fp32", "1")], cells[("openvino", "fp32", "1")]
    assert few[cols.index("p99 ms")].strip() == "–" and few[cols.index("n")].strip() == "12"
    assert few[cols.index("±CI")].strip().endswith("%*")  # the budget ran out before the target
    assert many[cols.index("p99 ms")].strip() != "–" and re.fullmatch(r"(<0\.1|\d\.\d)%",
                                                                      many[cols.index("±CI")].strip())
    flat = " ".join(out.split())
    assert "p99 >= 100" in flat and "ran out of their time budget" in flat and \
        "95 % confidence interval" in flat


def test_markdown_percentile_table(rep):
    md = render(rep, "md")
    table = md[md.index("Latency percentiles"):]
    line = next(ln for ln in table.splitlines() if ln.startswith("| onnxruntime | onnx | fp32 | cpu | 1 |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    # backend format precision device batch n mean std min p50 p50-CI p90 p95 p99 max
    assert cells[5] == "12" and cells[10] != "–" and cells[11] != "–" and cells[12] == "–" and \
        cells[13] == "–"
    old = next(ln for ln in table.splitlines() if ln.startswith("| pytorch | pytorch | fp32 | cpu | 8 |"))
    # n = 5, stored values hidden
    assert [c.strip() for c in old.strip("|").split("|")][11:14] == ["–", "–", "–"]
    assert "p99 >= 100" in md


def test_html_leaves_the_cells_empty_and_says_why(rep):
    html = render(rep, "html")
    pct = html[html.index('id="percentiles"'):]
    row = next(tr for tr in pct.split("<tr>") if "onnxruntime" in tr and '<td data-v="1.0">1</td>' in tr)
    tds = re.findall(r"<td[^>]*>([^<]*)</td>", row)
    assert tds[-2] == "–" and tds[-3] == "–"  # p99, p95
    assert "p99 &gt;= 100" in html


def test_csv_leaves_the_field_empty_with_a_note(rep):
    lines = {x["label"]: x for x in csv.DictReader(io.StringIO(render(rep, "csv")))}
    few = lines[_row(rep, "onnxruntime").label]
    assert few["latency_p99_ms"] == "" and few["latency_p95_ms"] == "" and few["latency_p90_ms"] != ""
    assert few["latency_note"].startswith("p95, p99 left empty: n = 12")
    assert few["latency_stopped_by"] == "budget" and float(few["latency_median_ci_low_ms"]) > 0
    many = lines[_row(rep, "openvino").label]
    assert many["latency_p99_ms"] != "" and many["latency_note"] == ""
