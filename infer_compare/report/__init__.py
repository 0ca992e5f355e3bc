"""Renderers: each takes a Report and returns text (or writes a file).

Enters: a Report. Leaves: text and files (terminal, JSON, Markdown, CSV, HTML), and merged Reports
(report/merge.py). May import: prepare and every layer below it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from infer_compare.base.records import Report
from infer_compare.report.beside import write_beside, write_text
from infer_compare.report.csv import render as csv_render
from infer_compare.report.html import render as html_render
from infer_compare.report.markdown import render as md

RENDERERS = ("json", "md", "csv", "html")


def render(report: Report, fmt: str) -> str:
    if fmt == "json":
        import json

        return json.dumps(report.to_dict(), indent=1) + "\n"
    if fmt in ("md", "markdown"):
        return md(report)
    if fmt == "csv":
        return csv_render(report)
    if fmt == "html":
        return html_render(report)
    raise ValueError(f"unknown report format {fmt!r}")


def write_all(report: Report, out_dir: Path, formats=("json", "md", "csv", "html"),
              pending: list[Callable[[], None]] | None = None) -> dict[str, Path]:
    """Every format into ``out_dir`` (each file atomically). With ``pending`` (a list), results.html is written by
    a forked child meanwhile (report/beside.py) and the function that waits for it is appended: call it before
    naming the file."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {fmt: out_dir / f"results.{fmt}" for fmt in formats}
    beside = pending is not None and "html" in paths
    if beside:
        assert pending is not None
        pending.append(write_beside(report, paths["html"], html_render))
    for fmt, p in paths.items():
        if fmt == "json":
            report.save(p)
        elif not (fmt == "html" and beside):
            write_text(p, render(report, fmt))
    return paths
