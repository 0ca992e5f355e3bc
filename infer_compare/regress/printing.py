"""The terminal view of a RegressionResult (rich)."""

from __future__ import annotations

from ..records import SKIPPED
from .metrics import fmt_value
from .results import NOISE, REGRESSION, RegressionResult, RowDiff


def _cell(d: RowDiff, metric: str, rel: bool = True) -> str:
    va, vb = d.value(metric)
    if va is None and vb is None:
        return "–"
    if va is None or vb is None:
        return f"{fmt_value(va)} → {fmt_value(vb)}"
    ch = f"{(vb / va - 1) * 100:+.1f}%" if rel and va else f"{vb - va:+.3g}"
    return f"{fmt_value(va)} → {fmt_value(vb)} ({ch})"


def _verdicts(d: RowDiff, escape) -> str:
    out = []
    for c in d.checks:
        if c.verdict == REGRESSION:
            out.append(f"[bold red]{escape(str(c.rule))} broken[/]")
        elif c.verdict == NOISE:
            out.append(f"[yellow]{escape(str(c.rule))} within noise[/]")
    if d.status_regressed:
        out.insert(0, "[bold red]now failing[/]")
    if d.checks and not out:
        out.append("[green]ok[/]")
    return ", ".join(out) or "–"


def _table(result: RegressionResult, show_all: bool):
    from rich.markup import escape
    from rich.table import Table

    t = Table(header_style="bold", pad_edge=False, title="changes against the baseline "
              f"({escape(result.baseline_created)} -> {escape(result.current_created)})")
    for col in ("row", "status", "p50 ms", "p99 ms", "img/s", "cos", "acc %", "rules"):
        t.add_column(col, justify="left" if col in ("row", "status", "rules") else "right")
    for d in result.rows:
        if d.baseline is None or d.current is None:
            continue
        if not show_all and d.baseline.status == SKIPPED and d.current.status == SKIPPED:
            continue
        status = escape(d.status_change)
        t.add_row(escape(d.label), status if "->" not in status else f"[red]{status}[/]",
                  _cell(d, "p50"), _cell(d, "p99"), _cell(d, "throughput"), _cell(d, "cosine", rel=False),
                  _cell(d, "accuracy", rel=False), _verdicts(d, escape))
    return t


def print_result(result: RegressionResult, console=None, show_all: bool = False) -> None:
    """A rich table of the changes per row, then the notes and the verdict."""
    import sys

    from rich.console import Console
    from rich.markup import escape

    con = console or (Console() if sys.stdout.isatty() else Console(width=200))
    con.print(_table(result, show_all))
    for n in result.notes:
        con.print(f"[dim]note:[/] {escape(n)}")
    for d in result.rows:
        for n in d.notes:
            con.print(f"[dim]{escape(d.label)}:[/] {escape(n)}")
    if result.environment_differences:
        con.print(f"[yellow]environment changed (allowed):[/] {escape('; '.join(result.environment_differences))}")
    if result.only_in_baseline:
        con.print(f"[dim]only in the baseline: {escape(', '.join(result.only_in_baseline))}[/]")
    if result.only_in_current:
        con.print(f"[dim]only in the current run: {escape(', '.join(result.only_in_current))}[/]")
    for c in result.checks:
        if c.verdict == NOISE:
            con.print(f"[yellow]within noise[/] {escape(c.label)}: {escape(c.message)}")
    if result.method:
        con.print(f"[dim]noise allowance: {result.confidence:.0%} confidence intervals by {escape(result.method)}[/]")
    if result.passed:
        con.print(f"[bold green]no regression[/] ({len(result.matched)} rows compared; rules: "
                  f"{escape(', '.join(map(str, result.rules)) or 'none (status changes only)')})")
    else:
        con.print(f"[bold red]REGRESSION[/] ({len(result.violations)}):")
        for v in result.violations:
            con.print(f"  [red]{escape(v)}[/]")
