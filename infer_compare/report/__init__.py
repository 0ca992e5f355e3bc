"""Renderers: each takes a Report and returns text (or writes a file).

Enters: a Report. Leaves: text and files (terminal, JSON, Markdown, CSV, HTML), and merged Reports
(report/merge.py). May import: prepare and every layer below it.
"""

from __future__ import annotations

from infer_compare.base import report_files
from infer_compare.base.records import Report
from infer_compare.base.report_files import write_all  # noqa: F401  (re-exported: every format in a folder)
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


# Report.save(path) writes the format its suffix names (base/report_files.py): the renderers above
report_files.register(".md", md)
report_files.register(".csv", csv_render)
report_files.register(".html", html_render)
