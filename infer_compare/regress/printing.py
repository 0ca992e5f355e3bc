"""The terminal view of a RegressionResult: reads at 80 columns (rows as blocks, never cut), lists
only rows that were measured, says how many were compared, which rules and which timing applied."""

from __future__ import annotations

from infer_compare.regress.family import family_size, family_text
from infer_compare.regress.metrics import METRICS, fmt_value
from infer_compare.regress.results import (
    BUSY,
    DISTURBED,
    FEW_PAIRS,
    NOISE,
    NOT_JUDGED,
    PASS,
    REGRESSION,
    TOO_NOISY,
    Check,
    RegressionResult,
    RowDiff,
)

_SHOWN = ("p50", "throughput", "accuracy")  # shown for every measured row, ruled or not


def _change(c: Check) -> str:
    m, rule = METRICS[c.rule.metric], c.rule

    def f(x: float | None) -> str:
        if x is None:
            return "–"
        return f"{x * 100:+.1f}%" if rule.relative else f"{x:+.3g} {m.unit}".rstrip()

    out = f"{fmt_value(c.baseline, m.value_unit)} → {fmt_value(c.current, m.value_unit)} ({f(c.raw_change)})"
    if c.calibrated:
        out += f", normalized {f(c.change)}"
    if c.n_baselines > 1 and c.judged_change is not None:
        out += f", judged {f(c.judged_change)}"
    return out


_MARK = {REGRESSION: "[bold red]REGRESSION[/]", NOISE: "[yellow]noise[/]", PASS: "[green]ok[/]",
         DISTURBED: "[yellow]not judged[/]", BUSY: "[yellow]not judged[/]",
         TOO_NOISY: "[yellow]cannot tell[/]", FEW_PAIRS: "[yellow]not judged[/]"}


def _row_lines(d: RowDiff, result: RegressionResult, escape) -> list[str]:
    status = d.status_change
    bad = [v for v in result.violations if v.startswith(d.label + ":")]
    head = f"[bold]{escape(d.label)}[/]  " + (f"[red]{escape(status)}[/]" if "->" in status or bad
                                              else escape(status))
    if bad:
        head += "  [bold red]VIOLATES[/]"
    lines = [head]
    ruled = {c.rule.metric for c in d.checks}
    for c in d.checks:
        lines.append(f"  {c.rule.metric:<10} {escape(_change(c))}  {_MARK.get(c.verdict, c.verdict)}")
        if c.verdict in NOT_JUDGED:
            lines.append(f"    [yellow]{escape(c.message)}[/]")
        elif c.verdict == PASS and c.grounds:  # what the interval rules out (A/B)
            lines.append(f"    [dim]{escape(c.grounds)}[/]")
    for metric in _SHOWN:
        va, vb = d.value(metric)
        if metric not in ruled and (va is not None or vb is not None):
            lines.append(f"  [dim]{metric:<10} {fmt_value(va, METRICS[metric].value_unit)} → "
                         f"{fmt_value(vb, METRICS[metric].value_unit)}[/]")
    lines += [f"  [red]{escape(v.split(': ', 1)[1])}[/]" for v in bad if not any(
        v.endswith(c.message) for c in d.checks)]
    lines += [f"  [dim]{escape(n)}[/]" for n in d.notes if not _said(n, bad)]
    return lines


def _said(note: str, violations) -> bool:
    """A note that repeats a changed condition a violation already names ('threads 2 -> 1', 'setting threads:
    2 -> 1'): each changed condition is printed once."""
    core = note.removeprefix("setting ").replace(":", "")
    return "->" in core and any(core in v for v in violations)


# how the heading describes each timing (any other: "absolute")
_TIMINGS = {"best": "each side's median run at its fastest sustained level (the fastest block of consecutive "
                    "calls of a run): the figures shown",
            "calibrated": "calibrated (each row's time over a fixed workload timed before it; the absolute "
                          "change in brackets)",
            "reference": "relative to the reference (each row's time over its run's PyTorch fp32 row; the "
                         "absolute change in brackets)",
            "paired (A/B)": "A and B measured side by side in one run, in alternating blocks; each change is "
                            "B over A on the paired blocks"}


def print_result(result: RegressionResult, console=None, show_all: bool = False) -> None:
    """Each measured row as a short block (label, then one line per metric), the notes, the verdict."""
    from rich.markup import escape

    # deferred: the CLI's start (--help, env, report) stays light without it (+5 modules)
    from infer_compare.report.terminal import console_for_stdout

    con = console or console_for_stdout(80)
    _print_heading(con, result, escape)
    shown = [d for d in result.rows if show_all or d.measured_in_either]
    for d in shown:
        for line in _row_lines(d, result, escape):
            con.print(line)
    hidden = len(result.rows) - len(shown)
    if hidden:
        con.print(f"[dim]{hidden} row(s) measured in neither run (skipped) not shown[/]")
    for n in result.notes:
        if not _said(n, result.violations):
            con.print(f"[dim]note:[/] {escape(n)}")
    if result.environment_differences:
        con.print("[yellow]environment changed (allowed):[/] "
                  f"{escape('; '.join(result.environment_differences))}")
    if result.disturbed:
        busy = len(result.busy)
        why = ("other processes took CPU time while they were measured" if not busy else
               f"{busy} slower only in runs on a busy host" if busy == len(result.disturbed) else
               f"other processes' load, or ({busy}) slower only in runs on a busy host")
        con.print(f"[bold yellow]timings not judged for {len(result.disturbed)} row(s)[/]: {why} (see each "
                  "row); status, precision and accuracy were judged")
    if result.method:
        con.print(f"[dim]within-run intervals: {result.confidence:.0%} by {escape(result.method)}[/]")
    _print_verdict(con, result, escape)


def _print_heading(con, result: RegressionResult, escape) -> None:
    """What was compared with what, the rules, and how the timings were judged."""
    n_b = result.n_baselines
    n_c = result.n_currents
    if result.timing.startswith("paired"):
        con.print(f"[bold]side B (candidate) against side A (baseline)[/], measured side by side "
                  f"({escape(result.current_created)})")
    else:
        con.print(f"[bold]against {n_b} baseline run{'s' if n_b != 1 else ''}[/] "
                  f"({escape(result.baseline_created)}) -> {n_c} current run{'s' if n_c != 1 else ''} "
                  f"({escape(result.current_created)})")
    con.print(f"rules: {escape(result.rules_text)}; always: a row ok in the baseline must be measured ok "
              "now, executing the same precision under the same threads and runner options")
    con.print("timings: " + _TIMINGS.get(result.timing, "absolute"))


def _print_verdict(con, result: RegressionResult, escape) -> None:
    """The last lines: nothing compared, not judged (and which rows), no regression, or the regressions; then
    how often unchanged code fails a gate of this many timing checks (A/B)."""
    unjudged = result.unjudged
    family = family_text(family_size(result.checks))
    if result.passed and not result.matched:
        con.print("[bold yellow]NOTHING COMPARED[/] (0 rows measured in both runs): this is not a pass "
                  "(exit 3)")
    elif result.passed and unjudged:
        con.print(f"[bold yellow]NOT JUDGED[/] ({len(unjudged)}; no regression found in what was judged, "
                  f"{len(result.matched)} rows compared): this is not a pass "
                  "(exit 3 unless --allow-unjudged)")
        for u in unjudged:
            con.print(f"  [yellow]{escape(u)}[/]")
    elif result.passed:
        con.print(f"[bold green]no regression[/] ({len(result.matched)} rows compared; rules: "
                  f"{escape(result.rules_text)})")
    else:
        con.print(f"[bold red]REGRESSION[/] ({len(result.violations)}; {len(result.matched)} rows compared):")
        for v in result.violations:
            con.print(f"  [red]{escape(v)}[/]")
    if family:
        con.print(f"[dim]false failures: {escape(family)}; a pass: every timing check's one-sided 95 % upper "
                  "bound within its rule[/]")
