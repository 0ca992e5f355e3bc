"""The terminal table (rich)."""

from __future__ import annotations

from infer_compare.base.records import OK, SKIPPED, Report
from infer_compare.report import common
from infer_compare.report.verdict import verdict

STATUS_STYLE = {"ok": "green", "skipped": "dim", "export_failed": "red", "run_failed": "red",
                "parity_failed": "bold red"}


# Dropped first when the table does not fit, least needed first; backend, precision, batch, p50 and status
# always stay. Columns with one value in every row go before any of these, said once above the table.
DROP_ORDER = ("export s", "peak RSS MB", "load s", "n", "p99 ms", "size MB", "±CI", "top-1", "cos", "img/s", "acc")
KEEP = ("backend", "precision", "batch", "p50 ms", "status")
SHORT_BACKEND = {"onnxruntime": "ort", "onnxruntime-trt": "ort-trt", "onnxruntime-openvino": "ort-ov",
                 "openvino": "ov", "pytorch": "torch", "tensorrt": "trt", "tflite": "litert", "edgetpu": "edgetpu"}


def console_for_stdout(default: int = 200):
    """A terminal: its own width. Piped (a log, CI): $COLUMNS when set, else ``default`` columns."""
    import os
    import sys

    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    cols = os.environ.get("COLUMNS", "")
    return Console(width=int(cols) if cols.isdigit() and int(cols) >= 40 else default)


def short_precision(r) -> str:
    """The asked precision and, in a few characters, what ran: 'fp16→fp32', 'int8 10/12' (10 of 12
    nodes or layers integer); results.md and the HTML report have the full text."""
    import re

    ran = r.exec_precision or ""
    head = ran.split(":")[0].split(" (")[0].strip()
    out = r.precision
    qualifier = head[len(r.precision) + 2:] if head.startswith(r.precision + ", ") else ""  # "int8, float output"
    if head and head != r.precision and not head.startswith(r.precision + "+") and not qualifier:
        out += f"→{head}"
    m = re.search(r"(\d+) of (\d+)", ran)
    if m and head.startswith(r.precision):
        out += f" {m[1]}/{m[2]}"
    if qualifier:
        out += ", " + qualifier.replace("output", "out").replace("input", "in")
    mode = common.mode_label(r).replace("throughput", "thr")
    return f"{out} · {mode}" if mode else out


def _cells(r) -> list[str]:
    cells = common.row_cells(r)
    cells[common.COLUMNS.index("precision")] = short_precision(r)
    return cells


def _width(headers: list[str], rows: list[list[str]]) -> int:
    """Rendered width of the table the way print_report builds it (box-less, one space of padding)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(x)) for w, x in zip(widths, row, strict=True)]
    return sum(widths) + 2 * len(widths) - 2 + (len(widths) - 1)


def fit(rows: list[list[str]], width: int) -> tuple[list[int], list[str], dict[str, str], bool]:
    """Which columns to show at ``width``: (their indices, dropped columns, constant columns shown once
    above the table {name: value}, whether backend names were abbreviated)."""
    cols = list(common.COLUMNS)
    keep = list(range(len(cols)))

    def w(idx: list[int], short: bool = False) -> int:
        body = [[(SHORT_BACKEND.get(x, x) if short and cols[i] == "backend" else x) for i, x in
                 ((i, r[i]) for i in idx)] for r in rows]
        return _width([cols[i] for i in idx], body)

    consts: dict[str, str] = {}
    dropped: list[str] = []
    if w(keep) <= width:
        return keep, dropped, consts, False
    for i, c in enumerate(cols):
        vals = {r[i] for r in rows}
        if c not in KEEP and len(rows) > 1 and len(vals) == 1:
            consts[c] = vals.pop()
            keep.remove(i)
    for c in DROP_ORDER:
        if w(keep) <= width:
            break
        i = cols.index(c)
        if i in keep:
            keep.remove(i)
            dropped.append(c)
    return keep, dropped, consts, w(keep) > width


def _table(rep: Report, width: int):
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    rows = common.measured_rows(rep)
    cells = [_cells(r) for r in rows]
    keep, dropped, consts, short = fit(cells, width)
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold", pad_edge=False)
    for i in keep:
        c = common.COLUMNS[i]
        t.add_column(c, justify="left" if c in ("backend", "format", "precision", "device", "status") else "right",
                     no_wrap=True, overflow="fold")
    for r, row in zip(rows, cells, strict=True):
        row = [escape(SHORT_BACKEND.get(x, x) if short and common.COLUMNS[i] == "backend" else x)
               for i, x in enumerate(row)]
        si = common.COLUMNS.index("status")
        style = STATUS_STYLE.get(r.status, "")
        row[si] = f"[{style}]{row[si]}[/]" if style else row[si]
        t.add_row(*[row[i] for i in keep], style="red" if r.status not in (OK, SKIPPED) else None)
    notes = []
    if consts:
        notes.append("every row: " + ", ".join(f"{k} {v}" for k, v in consts.items()))
    if dropped or short:
        notes.append(f"{width} columns: " + (f"{', '.join(dropped)} not shown (results.md has them)" if dropped else "")
                     + ("; " if dropped and short else "") + ("backend names abbreviated" if short else ""))
    return t, notes


def print_report(rep: Report, console=None) -> None:
    from rich.markup import escape

    con = console or console_for_stdout()
    con.print(f"[bold]{escape(common.model_line(rep))}[/]")
    if common.incomplete_banner(rep):
        con.print(f"[bold red]{escape(common.incomplete_banner(rep))}[/]")
    for w in rep.warnings:
        con.print(f"[bold yellow]WARNING:[/] {escape(w)}")
    t, notes = _table(rep, con.width)
    for n in notes[:1] if notes and notes[0].startswith("every row") else []:
        con.print(f"[dim]{escape(n)}[/]")
    con.print(t)
    con.print("[dim]precision: asked→ran where they differ; N/M: nodes or layers that ran in that precision (int8: integer kernels)[/]")
    for n in notes:
        if not n.startswith("every row"):
            con.print(f"[dim]({escape(n)})[/]")
    for line in common.latency_notes(rep):
        con.print(f"[dim]{escape(line)}[/]")
    print_verdict(rep, con)
    _print_tail(rep, con)


def _print_tail(rep: Report, con) -> None:
    """Failures, skips (grouped, with the install hint), where the time went, the environment line."""
    from rich.markup import escape

    for r in common.failures(rep):
        con.print(f"[red]{r.status}[/] {escape(r.label)}: {escape(r.reason)}")
    skips = common.grouped_skips(rep)
    if skips:
        n = sum(1 for r in rep.rows if r.status == SKIPPED)
        con.print(f"[dim]skipped ({n} row{'s' if n != 1 else ''}):[/]")
        for what, reason, hint in skips:
            con.print(f"  [dim]{escape(what)}[/]: {escape(reason)}")
            if hint:  # its own line, never cut: it is a command to copy
                con.print(f"      [cyan]→ {escape(hint)}[/]", soft_wrap=True)
    if common.time_summary(rep):
        con.print(f"[dim]{escape(common.time_summary(rep))}[/]")
    e = rep.environment
    con.print(f"[dim]{e.cpu_model}, {rep.settings.threads} threads, {e.python}, "
              + ", ".join(f"{k} {v}" for k, v in e.libraries.items() if k in (
                  "torch", "onnxruntime", "openvino", "nncf", "ai-edge-litert", "tensorrt")) + "[/]")


def print_verdict(rep: Report, con) -> None:
    """The verdict under the table (report.verdict.verdict)."""
    from rich.markup import escape

    v = verdict(rep)
    if not v.picks and not v.notes:
        return
    con.print("[bold]Verdict[/]")
    for p in v.picks:
        con.print(f"  [bold]{escape(p.title)}[/]: {escape(p.text()[len(p.title) + 2:])}")
    for n in v.notes:
        con.print(f"  [dim]{escape(n)}[/]")
