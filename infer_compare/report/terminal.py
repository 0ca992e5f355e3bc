"""The terminal view of a report (rich): the table fitted to the width, its notes, the skipped rows and
the verdict last. Text from the data is made printable first (terminal_text.safe)."""

from __future__ import annotations

import re

from infer_compare.base.printable import printable
from infer_compare.base.records import OK, SKIPPED, THROUGHPUT, Report
from infer_compare.report import common
from infer_compare.report.terminal_text import print_skips, print_wrapped, safe
from infer_compare.report.verdict import verdict

KEEP_CONTROLS = "\n\t"  # in free text (a warning): line breaks and tabs stay, every other control is shown

STATUS_STYLE = {"ok": "green", "skipped": "dim", "export_failed": "red", "run_failed": "red",
                "parity_failed": "bold red"}


# Dropped first when the table does not fit, least needed first; backend, precision, batch, p50 and status
# always stay. Columns with one value in every row go before any of these, said once above the table.
# cos (parity with the PyTorch reference) goes last: a fast row is worth choosing only when it computes the
# same thing. img/s goes before it where every row ran the latency scenario (one call after another: img/s
# is then about batch / p50, which the table shows); with throughput rows it is their headline, acc goes
# first.
DROP_ORDER = ("export s", "peak RSS MB", "load s", "n", "p99 ms", "size MB", "±CI", "top-1", "img/s",
              "acc", "cos")
DROP_ORDER_THROUGHPUT = (*DROP_ORDER[:-3], "acc", "img/s", "cos")
KEEP = ("backend", "precision", "batch", "p50 ms", "status")
SHORT_BACKEND = {"onnxruntime": "ort", "onnxruntime-trt": "ort-trt", "onnxruntime-openvino": "ort-ov",
                 "openvino": "ov", "pytorch": "torch", "tensorrt": "trt", "tflite": "litert",
                 "edgetpu": "edgetpu"}


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
    ran = r.exec_precision or ""
    head = ran.split(":")[0].split(" (")[0].strip()
    out = r.precision
    # "int8, float output"
    qualifier = head[len(r.precision) + 2:] if head.startswith(r.precision + ", ") else ""
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


def fit(rows: list[list[str]], width: int,
        throughput: bool = False) -> tuple[list[int], list[str], dict[str, str], bool]:
    """Which columns to show at ``width``: (their indices, dropped columns, constant columns shown once
    above the table {name: value}, whether backend names were abbreviated). ``throughput``: some rows ran
    the throughput scenario (their img/s is kept longer)."""
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
    for c in DROP_ORDER_THROUGHPUT if throughput else DROP_ORDER:
        if w(keep) <= width:
            break
        i = cols.index(c)
        if i in keep:
            keep.remove(i)
            dropped.append(c)
    return keep, dropped, consts, w(keep) > width


def _table(rep: Report, width: int):
    from rich import box
    from rich.table import Table

    rows = common.measured_rows(rep)
    cells = [_cells(r) for r in rows]
    keep, dropped, consts, short = fit(cells, width, any(getattr(r, "scenario", "") == THROUGHPUT
                                                         for r in rows))
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold", pad_edge=False)
    for i in keep:
        c = common.COLUMNS[i]
        t.add_column(c, justify="left" if c in ("backend", "format", "precision",
                                                "device", "status") else "right",
                     no_wrap=True, overflow="fold")
    for r, row in zip(rows, cells, strict=True):
        row = [safe(SHORT_BACKEND.get(x, x) if short and common.COLUMNS[i] == "backend" else x)
               for i, x in enumerate(row)]
        si = common.COLUMNS.index("status")
        style = STATUS_STYLE.get(r.status, "")
        row[si] = f"[{style}]{row[si]}[/]" if style else row[si]
        t.add_row(*[row[i] for i in keep], style="red" if r.status not in (OK, SKIPPED) else None)
    notes = []
    if consts:
        notes.append("every row: " + ", ".join(f"{k} {v}" for k, v in consts.items()))
    if dropped or short:
        notes.append(f"{width} columns: " + (f"{', '.join(dropped)} not shown (results.md "
                                             "has them)" if dropped else "")
                     + ("; " if dropped and short else "") + ("backend names abbreviated" if short else ""))
    return t, notes, dropped, consts


def print_report(rep: Report, console=None) -> None:
    """The model, the machine and where the time went; the table and its notes; failures; the skipped rows
    (a line per runtime); the verdict last, where the terminal's last screen shows it under the table."""
    con = console or console_for_stdout()
    _print_head(rep, con)
    t, notes, dropped, consts = _table(rep, con.width)
    for n in notes[:1] if notes and notes[0].startswith("every row") else []:
        con.print(f"[dim]{safe(n)}[/]")
    con.print(t)
    if any("→" in c[2] or re.search(r" \d+/\d+", c[2]) for c in map(_cells, common.measured_rows(rep))):
        con.print("[dim]precision: asked→ran where they differ; N/M: nodes or layers that ran in that "
                  "precision (int8: integer kernels)[/]")
    for n in notes:
        if not n.startswith("every row"):
            con.print(f"[dim]({safe(n)})[/]")
    hidden = set(dropped) | set(consts)
    for line in common.latency_notes(rep):
        if any(line.startswith(mark) for col, mark in _COLUMN_NOTES if col in hidden):
            continue  # it explains a column the table does not show (results.md has both)
        con.print(f"[dim]{safe(line)}[/]")
    for r in common.failures(rep):
        print_wrapped(con, f"{r.status} {r.label}: {r.reason}", indent=0, head=len(r.status),
                      head_style="red")
    print_skips(rep, con)
    print_verdict(rep, con)


# a note under the table that explains a column: left out where the table does not show that column (dropped,
# or one value in every row); results.md has the column and the note
_COLUMN_NOTES = (("±CI", "±CI:"), ("p99 ms", "– in a percentile column"))


def _print_head(rep: Report, con) -> None:
    """The model, the machine (threads, the runtimes' versions), where the time went; then what makes the
    results incomplete, and the warnings."""
    con.print(f"[bold]{safe(common.model_line(rep))}[/]", highlight=False)
    e = rep.environment
    con.print("[dim]" + safe(f"{e.cpu_model}, {rep.settings.threads} threads, {e.python}, " + ", ".join(
        f"{k} {v}" for k, v in e.libraries.items() if k in (
            "torch", "onnxruntime", "openvino", "nncf", "ai-edge-litert", "tensorrt"))) + "[/]")
    if common.time_summary(rep):
        con.print(f"[dim]{safe(common.time_summary(rep))}[/]")
    if common.incomplete_banner(rep):
        con.print(f"[bold red]{safe(common.incomplete_banner(rep))}[/]")
    for w in rep.warnings:
        con.print(f"[bold yellow]WARNING:[/] {safe(w, keep=KEEP_CONTROLS)}")


def print_verdict(rep: Report, con) -> None:
    """The verdict (report.verdict.verdict): each pick on its own lines, wrapped at word boundaries."""
    v = verdict(rep)
    if not v.picks and not v.notes:
        return
    con.print("[bold]Verdict[/]")
    for p in v.picks:
        print_wrapped(con, f"{p.title}: {p.text()[len(p.title) + 2:]}", head=len(printable(p.title)) + 1)
    for n in v.notes:
        print_wrapped(con, n, style="dim")
