"""The terminal at every width from 80 up (issue 23 points 3 and 4): precision and status always visible,
nothing cut, dropped columns named; $COLUMNS honoured when piped; `report` prints the table by default;
`merge` shows what it merged; `env`'s install hints are whole lines; --help names every subcommand first."""

from __future__ import annotations

import io
import json
import subprocess

import pytest

from infer_compare.base.records import OK, PARITY_FAILED, LatencyStats, ParityResult, Report

from .test_faults import _report


def _rows_report() -> Report:
    base = _report()
    r0 = base.rows[0]
    lat = LatencyStats.from_samples_ns(tuple(1_234_567 + 1000 * i for i in range(200)))
    par = ParityResult(32, 1e-3, 1e-4, 1e-4, 0.99991, 0.9995, 1.0, 1.0, accuracy=0.9711)
    rows = (r0.replace(backend="pytorch", format="pytorch", exec_precision="fp32", latency=lat, parity=par),
            r0.replace(exec_precision="fp32", latency=lat, parity=par),
            r0.replace(precision="fp16", exec_precision="fp32", latency=lat, parity=par),
            r0.replace(precision="int8", latency=lat, parity=par,
                       exec_precision="int8: 10 of 12 nodes integer (U8S8, 7-bit weights, AVX2 (no VNNI))"),
            r0.replace(backend="onnxruntime-openvino", precision="int8", status=PARITY_FAILED, latency=lat,
                       parity=par, exec_precision="int8+fp32: 11 of 12 layers int8 (AVX2 (no VNNI))"),
            r0.replace(backend="openvino", format="openvino", batch_size=32, status=OK, latency=lat,
                       parity=par, throughput=123456.7, exec_precision="fp32"))
    return base.replace(rows=rows)


def _render(rep: Report, width: int) -> str:
    from rich.console import Console

    from infer_compare.report.terminal import print_report

    buf = io.StringIO()
    print_report(rep, Console(file=buf, width=width, force_terminal=False))
    return buf.getvalue()


@pytest.mark.parametrize("width", [80, 100, 120, 160, 200])
def test_precision_and_status_are_visible_at_every_width(width):
    text = _render(_rows_report(), width)
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.lstrip().startswith("backend"))
    table = lines[head:head + 8]  # header, rule, six rows
    assert all(len(line) <= width for line in table), "\n".join(table)
    body = "\n".join(table)
    for want in ("fp16→fp32", "int8 10/12", "int8 11/12", "parity_failed", "ok"):
        assert want in body, (want, body)
    assert "…" not in body  # nothing cut
    assert sum(" fp32 " in line for line in table[2:]) == 3  # fp32 rows are told apart from fp16 and int8
    if width < 160:  # columns with one value in every row are said once above the table
        assert "every row: device cpu" in text
    if width == 80:
        assert "not shown (results.md has them)" in text  # the dropped columns are named
    assert "p50 ms" in table[0] and "batch" in table[0]


def test_short_precision_labels():
    from infer_compare.report.terminal import short_precision

    r = _rows_report().rows
    assert [short_precision(x) for x in r] == ["fp32", "fp32", "fp16→fp32", "int8 10/12", "int8 11/12",
                                               "fp32"]
    assert short_precision(r[3].replace(exec_precision="fp32: no integer kernel")) == "int8→fp32"


def _cli(args: list[str], columns: str | None, tmp_path) -> subprocess.CompletedProcess:
    from .conftest import PY, python_env

    env = python_env()
    env.pop("COLUMNS", None)
    if columns:
        env["COLUMNS"] = columns
    return subprocess.run([PY, "-m", "infer_compare", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)


def test_report_prints_the_terminal_table_and_honours_columns_when_piped(tmp_path):
    rep = _rows_report()
    rep.save(tmp_path / "results.json")
    out = _cli(["report", str(tmp_path / "results.json")], "90", tmp_path)
    assert out.returncode == 0, out.stderr
    assert "<html" not in out.stdout and "backend" in out.stdout and "int8 10/12" in out.stdout
    table = [line for line in out.stdout.splitlines() if "onnxruntime" in line and "int8" in line]
    assert table and all(len(line) <= 90 for line in table)
    wide = _cli(["report", str(tmp_path / "results.json")], None, tmp_path)  # piped, no COLUMNS: 200
    assert any(len(line) > 90 for line in wide.stdout.splitlines())
    html = _cli(["report", str(tmp_path / "results.json"), "--format", "html"], None, tmp_path)
    assert html.stdout.lstrip().lower().startswith("<!doctype html")
    bad = _cli(["report", str(tmp_path / "results.json"), "--out", str(tmp_path / "x.txt")], None, tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_merge_shows_the_merged_table(tmp_path, capsys):
    from infer_compare.cli import main

    rep = _rows_report()
    rep.save(tmp_path / "a.json")
    rep.save(tmp_path / "b.json")
    assert main(["merge", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                 "--label", "box-a", "--label", "box-b", "-o", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    assert "p50 ms" in out and "box-a" in out and "box-b" in out and "merged 2 results" in out


def test_env_install_hints_are_whole_lines(tmp_path):
    out = _cli(["env"], "80", tmp_path)
    assert out.returncode == 0, out.stderr
    js = json.loads(_cli(["env", "--json"], None, tmp_path).stdout)
    hints = {r["hint"] for r in js["backends"] + js["exporters"] if r["hint"] and not r["available"]}
    assert hints, "this machine lacks TensorRT and the Edge TPU: there are hints to show"
    flat = out.stdout
    for h in hints:
        assert h in flat, h  # on one line, as a command to copy


def test_help_names_every_subcommand(capsys):
    from infer_compare.cli import SUBCOMMANDS, main

    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out.splitlines()[:16]  # each on a line of its own, before the options
    for sub in SUBCOMMANDS:
        assert any(ln.startswith(f"  {sub} ") for ln in top), (sub, top)
