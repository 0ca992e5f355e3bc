"""Renderers: each takes a Report and returns text (or writes a file).

Enters: a Report. Leaves: text and files (terminal, JSON, Markdown, CSV, HTML), and merged Reports
(report/merge.py). May import: prepare and every layer below it.
"""

from __future__ import annotations

from pathlib import Path

from infer_compare.base.records import Report
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


def write_all(report: Report, out_dir: Path, formats=("json", "md", "csv", "html")) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for fmt in formats:
        p = out_dir / f"results.{fmt}"
        if fmt == "json":
            report.save(p)
        else:
            tmp = p.with_suffix(p.suffix + ".tmp")
            tmp.write_text(render(report, fmt), encoding="utf-8")
            tmp.replace(p)
        paths[fmt] = p
    return paths
