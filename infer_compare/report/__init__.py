"""Renderers: each takes a Report and returns text (or writes a file)."""

from __future__ import annotations

from pathlib import Path

from ..records import Report

RENDERERS = ("json", "md", "csv", "html")


def render(report: Report, fmt: str) -> str:
    if fmt == "json":
        import json

        return json.dumps(report.to_dict(), indent=1) + "\n"
    if fmt in ("md", "markdown"):
        from .markdown import render as md

        return md(report)
    if fmt == "csv":
        from .csv import render as csv_render

        return csv_render(report)
    if fmt == "html":
        from .html import render as html_render

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
