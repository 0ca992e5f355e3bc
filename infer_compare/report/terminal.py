"""The terminal table (rich)."""

from __future__ import annotations

from ..records import OK, SKIPPED, Report
from . import common

STATUS_STYLE = {"ok": "green", "skipped": "dim", "export_failed": "red", "run_failed": "red",
                "parity_failed": "bold red"}


NARROW_DROP = ("export s", "peak RSS MB", "load s", "n", "p99 ms")


def print_report(rep: Report, console=None) -> None:
    import sys

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    # Not a terminal (a log, CI): a wide table rather than one squeezed into 80 columns.
    con = console or (Console() if sys.stdout.isatty() else Console(width=200))
    con.print(f"[bold]{escape(common.model_line(rep))}[/]")
    if common.incomplete_banner(rep):
        con.print(f"[bold red]{escape(common.incomplete_banner(rep))}[/]")
    for w in rep.warnings:
        con.print(f"[bold yellow]WARNING:[/] {escape(w)}")
    cols = list(common.COLUMNS)
    drop = [c for c in NARROW_DROP if con.width < 150] if con.width < 150 else []
    keep = [i for i, c in enumerate(cols) if c not in drop]
    t = Table(show_lines=False, header_style="bold", pad_edge=False)
    for i in keep:
        c = cols[i]
        t.add_column(c, justify="right" if c not in ("backend", "format", "precision", "device", "status") else "left",
                     no_wrap=c not in ("precision",))
    for r in common.measured_rows(rep):
        cells = [escape(x) for x in common.row_cells(r)]
        style = STATUS_STYLE.get(r.status, "")
        cells[-1] = f"[{style}]{cells[-1]}[/]" if style else cells[-1]
        t.add_row(*[cells[i] for i in keep], style="red" if r.status not in (OK, SKIPPED) else None)
    con.print(t)
    if drop:
        con.print(f"[dim](narrow terminal: {', '.join(drop)} columns are in results.md)[/]")
    for line in common.latency_notes(rep):
        con.print(f"[dim]{escape(line)}[/]")
    print_verdict(rep, con)
    for r in common.failures(rep):
        con.print(f"[red]{r.status}[/] {escape(r.label)}: {escape(r.reason)}")
    skips = common.grouped_skips(rep)
    if skips:
        con.print(f"[dim]skipped ({sum(1 for r in rep.rows if r.status == SKIPPED)} rows):[/]")
        for what, reason, hint in skips:
            con.print(f"  [dim]{escape(what)}[/]: {escape(reason)}" + (f"\n      [cyan]→ {escape(hint)}[/]" if hint else ""))
    if common.time_summary(rep):
        con.print(f"[dim]{escape(common.time_summary(rep))}[/]")
    e = rep.environment
    con.print(f"[dim]{e.cpu_model}, {rep.settings.threads} threads, {e.python}, "
              + ", ".join(f"{k} {v}" for k, v in e.libraries.items() if k in (
                  "torch", "onnxruntime", "openvino", "nncf", "ai-edge-litert", "tensorrt")) + "[/]")


def print_verdict(rep: Report, con) -> None:
    """The verdict under the table (report.verdict.verdict)."""
    from rich.markup import escape

    from .verdict import verdict

    v = verdict(rep)
    if not v.picks and not v.notes:
        return
    con.print("[bold]Verdict[/]")
    for p in v.picks:
        con.print(f"  [bold]{escape(p.title)}[/]: {escape(p.text()[len(p.title) + 2:])}")
    for n in v.notes:
        con.print(f"  [dim]{escape(n)}[/]")
