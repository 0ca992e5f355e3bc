"""The HTML report: written by the main command, parses, holds every row, every skip
and failure with its reason, embeds its plots as inline SVG and references nothing
outside the file."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from infer_compare.base.records import RUN_FAILED, SKIPPED, RunRecord
from infer_compare.report import html as html_report
from infer_compare.report import plots


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.stack: list[str] = []
        self.rows: list[list[str]] = []  # cells of the results table
        self._in_results = False
        self._cell: list[str] | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            self.attrs.append((tag, k, v or ""))
        d = dict(attrs)
        if tag == "table" and d.get("id") == "results":
            self._in_results = True
        if self._in_results and tag == "tr":
            self.rows.append([])
        if self._in_results and tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "table":
            self._in_results = False
        if tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def _parse(text: str) -> _Collect:
    p = _Collect()
    p.feed(text)
    p.close()
    return p


def _with_failure(rep):
    bad = RunRecord(backend="onnxruntime", format="onnx", precision="fp32", device="cpu", batch_size=2,
                    status=RUN_FAILED, reason="child process killed by signal 9 <after 3 calls> & co",
                    hint="lower the batch size")
    return rep.replace(rows=rep.rows + (bad,))


def _assert_self_contained(p: _Collect, text: str) -> None:
    for tag, k, v in p.attrs:
        if k in ("src", "href", "xlink:href", "action", "poster", "data"):
            assert not re.match(r"^\s*(https?:)?//", v), (tag, k, v)
            assert v.startswith("#") or v == "", (tag, k, v)  # only in-page references
    assert "<link" not in text and "@import" not in text and "url(http" not in text
    assert "<script src" not in text and "<iframe" not in text and "<img" not in text


@pytest.mark.slow
def test_html_has_every_row_skip_failure_and_inline_plots(lenet_report, tmp_path):
    pytest.importorskip("matplotlib")
    rep = _with_failure(lenet_report)
    text = html_report.render(rep)
    p = _parse(text)
    assert p.tags[0] == "html" and "body" in p.tags
    _assert_self_contained(p, text)
    # every measured row is one line of the results table, in order
    measured = [r for r in rep.rows if r.batch_size is not None and r.status != SKIPPED]
    body = p.rows[1:]
    assert len(body) == len(measured) >= 4
    for cells, r in zip(body, measured, strict=True):
        assert cells[:4] == [r.backend, r.format, cells[2], r.device] and cells[4] == str(r.batch_size)
        assert cells[2].startswith(r.precision)
        assert cells[-1].startswith(r.status if r.status != "ok" else "ok")
    # plots: inline SVG, one per figure, unique element ids across figures
    assert text.count("<svg") == 4, "latency distribution, throughput, accuracy/latency, sizes"
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids)), "element ids collide between inline SVGs"
    # every skip with its reason and hint, every failure with its reason
    flat = " ".join(" ".join(p.text).split())
    for r in rep.rows:
        if r.status == SKIPPED:
            assert " ".join(r.reason.split()) in flat
            if r.hint:
                assert " ".join(r.hint.split()) in flat
    assert "child process killed by signal 9 <after 3 calls> & co" in flat
    assert "onnxruntime/onnx/fp32/cpu/b2" in flat
    # environment and efficiency
    assert rep.environment.cpu_model in flat and "onnxruntime " in flat
    assert rep.model.flops_per_image and "GFLOP/s" in flat and "No peak is given for CPUs" in flat


@pytest.mark.slow
def test_main_command_writes_all_four_files(cache_dir, tmp_path):
    from infer_compare.cli import main

    out = tmp_path / "run"
    code = main(["--model", "lenet5", "--backends", "onnxruntime", "--formats", "onnx", "--precisions",
                 "fp32", "--device", "cpu", "-b", "1,2", "--warmup", "1", "--min-iters", "5", "--min-time",
                 "0.05", "--cache-dir", str(cache_dir), "-q", "-o", str(out)])
    assert code == 0
    for name in ("results.json", "results.md", "results.csv", "results.html"):
        assert (out / name).stat().st_size > 200, name
    text = (out / "results.html").read_text(encoding="utf-8")
    p = _parse(text)
    _assert_self_contained(p, text)
    assert len(p.rows) == 1 + 2  # header + batch 1 and 2
    # `report` re-renders the saved file to the same page
    html2 = tmp_path / "again.html"
    assert main(["report", str(out / "results.json"), "--format", "html", "--out", str(html2)]) == 0
    assert html2.read_text(encoding="utf-8") == text


def test_html_without_matplotlib_says_why(lenet_report, monkeypatch):
    from html import unescape

    from infer_compare.catalog import deps

    real = deps.has
    monkeypatch.setattr(deps, "has", lambda m: False if m == "matplotlib" else real(m))
    text = html_report.render(lenet_report)
    assert "<svg" not in text
    assert "Plots are omitted: matplotlib is not installed" in text
    assert "pip install 'matplotlib>=3.6'" in unescape(text)  # the extra's requirement: not on an index
    p = _parse(text)
    assert len(p.rows) - 1 == len([r for r in lenet_report.rows if r.batch_size is not None
                                   and r.status != SKIPPED])


def test_pareto_front():
    pts = [(1.0, 90.0), (2.0, 95.0), (3.0, 94.0), (0.5, 80.0), (2.0, 95.0), (4.0, 99.0)]
    # (3, 94) is dominated by (2, 95); the duplicate (2, 95) points do not dominate each other
    assert plots.pareto_front(pts) == {0, 1, 3, 4, 5}
    # a tolerance turns near-equal quality into a tie: the slower of two "equal" rows is dominated
    near = [(1.0, 0.99999), (5.0, 1.0), (0.5, 0.97)]
    assert plots.pareto_front(near) == {0, 1, 2}
    assert plots.pareto_front(near, tol=1e-4) == {0, 2}


def test_report_subcommand_errors(tmp_path, capsys):
    from infer_compare.cli import main

    newer = tmp_path / "newer.json"
    newer.write_text('{"schema_version": 99, "rows": []}')
    assert main(["report", str(newer), "--format", "html"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "schema_version 99" in err and "upgrade infer-compare" in err
    assert main(["report", str(tmp_path / "missing.json")]) == 2
    assert "not found" in capsys.readouterr().err
    notjson = tmp_path / "x.json"
    notjson.write_text("<html>")
    assert main(["report", str(notjson)]) == 2
    assert main(["report", str(newer), "--format", "pdf"]) == 2


def test_old_file_without_new_fields_still_loads_and_renders(lenet_report, tmp_path):
    """A schema-1 file written before the FLOPs fields existed reads back and renders (no efficiency
    columns)."""
    import json

    from infer_compare.base.records import load_report
    from infer_compare.report import render

    d = lenet_report.to_dict()
    d["model"].pop("flops_per_image", None)
    d["model"].pop("flops_source", None)
    f = tmp_path / "old.json"
    f.write_text(json.dumps(d))
    old = load_report(f)
    assert old.model.flops_per_image is None
    text = render(old, "html")
    assert "GFLOP/s" not in text and _parse(text).rows
    assert render(old, "csv").count("\n") == len(old.rows) + 1


def test_a_font_list_without_matplotlibs_math_fonts_prints_nothing(caplog):
    """matplotlib warns "findfont: Font family ... not found" for each math font missing from its cached font
    list (about 20 lines printed before the gate's verdict on this project's VM); the plots fall back either
    way."""
    import logging

    assert plots.available()[0]
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("matplotlib.font_manager").warning("findfont: Font family ['cmr10'] not found.")
        logging.getLogger("matplotlib.font_manager").error("a real font error")
    said = [r.getMessage() for r in caplog.records if r.name == "matplotlib.font_manager"]
    assert said == ["a real font error"], said
