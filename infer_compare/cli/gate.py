"""The cross-run regression gate after a comparison (``--baseline``): judge the run against results stored
earlier; when it cannot pass on timings alone, measure the rows it could not pass ``--confirm N`` more times,
every time (no stopping at a pass), and judge each side's median run. Rows not judged exit 3, not 0, and so
does a gate that compared no row.

One run on a shared machine can land at a slower speed level than the baseline runs did (other
tenants, frequency), which reads as a timing regression though the code did not change. A row slower only
in runs where the host itself ran slow (the calibration workload, regress/judge.py BUSY_HOST) is not
judged. Where the baseline can be run again, the A/B gate (``infer-compare gate``, cli/gate_ab.py) measures
both sides in one run instead. docs/gate.md has the figures.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from infer_compare.cli.gate_args import missing_allowed
from infer_compare.cli.output import Saver
from infer_compare.regress import check_regression, print_result
from infer_compare.regress.results import MEASURED, NOT_JUDGED
from infer_compare.regress.rules import confirm_wait

NOT_JUDGED_EXIT = 3


def _check(args, runs: list, baseline, rules):
    return check_regression(runs, baseline, rules, allow_environment_change=args.allow_environment_change,
                            allow_incomplete=args.allow_incomplete,
                            allow_missing=missing_allowed(args.allow_missing),
                            allow_condition_change=args.allow_condition_change, timing=args.timing)


def judge_run(args, gate, rep, out: Path, measure: Callable) -> int:
    """Print the gate's verdict on ``rep`` against ``gate`` (baselines, rules); the exit status: 0 pass, 1
    regression, 3 rows not judged (unless --allow-unjudged). When the first run cannot pass on timings alone,
    the rows it could not pass are measured ``--confirm`` more times, all of them whatever they show (no
    stopping at a pass), and judged once on each side's median run.
    ``measure(saver, only)`` runs the comparison again (only: a selection, broken_cells), into ``saver``'s
    folder."""
    baseline, rules = gate
    runs = [rep]
    result = _check(args, runs, baseline, rules)
    n = len(baseline) - 1 if args.confirm is None else max(0, args.confirm)
    if _unsettled(result) and n:
        only = broken_cells(result)
        print(f"infer-compare: {_why(result)}: measuring {', '.join(sorted(_pending(result)))} again {n} "
              "time(s), whatever they show, then judging each side's median run", file=sys.stderr)
        last = time.monotonic()
        for k in range(1, n + 1):
            # another speed level of the machine
            time.sleep(max(0.0, last + confirm_wait(k) - time.monotonic()))
            last = time.monotonic()
            runs.append(_again(out / f"confirm-{k}", only, measure))
        result = _check(args, runs, baseline, rules)
    print_result(result)
    save_verdict(result, out)
    return gate_status(result, args.allow_unjudged)


def gate_status(result, allow_unjudged: bool) -> int:
    """0 pass, 1 regression, 3 rows not judged (unless allowed): a row the gate could not judge is no pass,
    and a gate that compared no row at all (neither side measured one; --allow-unjudged does not accept it)
    is none either."""
    if not result.passed:
        return 1
    if not result.matched:
        print(f"infer-compare: no row was measured on both sides ({_sides(result)}): nothing was compared, "
              "not a pass", file=sys.stderr)
        return NOT_JUDGED_EXIT
    if result.unjudged and not allow_unjudged:
        print(f"infer-compare: {len(result.unjudged)} check(s) not judged (listed above): not a pass "
              "(--allow-unjudged accepts it)", file=sys.stderr)
        return NOT_JUDGED_EXIT
    return 0


def _sides(result) -> str:
    """How many rows each side measured: 'baseline 0 rows, current 2 rows'."""
    base = sum(1 for d in result.rows if any(a.status in MEASURED for a in (d.baselines or (d.baseline,))
                                             if a is not None))
    cur = sum(1 for d in result.rows if d.current is not None and d.current.status in MEASURED)
    return f"baseline {base} row(s) measured, current {cur}"


def _why(result) -> str:
    return ", ".join(x for x in (f"{len(result.violations)} timing(s) beyond the rules"
                                 if result.violations else "",
                                 f"{len(result.busy)} row(s) slower on a busy host" if result.busy else "",
                                 f"{len(set(result.disturbed) - set(result.busy))} row(s) disturbed"
                                 if set(result.disturbed) - set(result.busy) else "",
                                 f"{len(result.provisional)} row(s) within the rules only once normalized"
                                 if result.provisional else "") if x)


def _again(folder: Path, only: dict, measure: Callable):
    saver = Saver(folder)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        rep = measure(saver, only)
    except KeyboardInterrupt:
        saver.interrupted()
        raise
    saver.write(rep)
    return rep


def _unsettled(result) -> bool:
    """Only timings broke the rules, or none did but a row's timings were not judged (disturbed, busy host) or
    were within the rules only once normalized by the machine's change: more runs may settle it."""
    return result.timing_only or (result.passed and bool(result.disturbed or result.provisional))


def _pending(result) -> set[str]:
    """The rows whose timings broke a rule, were not judged, or were within the rules only once normalized
    (what the confirming runs measure)."""
    return {d.label for d in result.rows if any(c.broken or c.provisional or c.verdict in NOT_JUDGED
                                                for c in d.checks)}


def broken_cells(result) -> dict:
    """The selection (backends, formats, precisions, devices, batch sizes) that measures again every row that
    _pending names (and may measure a few more: the product of their backends, formats, precisions...)."""
    pending = _pending(result)
    rows = [d.current for d in result.rows if d.current is not None and d.label in pending]
    return {"backends": sorted({r.backend for r in rows}), "formats": sorted({r.format for r in rows}),
            "precisions": sorted({r.precision for r in rows}), "devices": sorted({r.device for r in rows}),
            "batch_sizes": sorted({r.batch_size for r in rows if r.batch_size})}


def save_verdict(result, out: Path, rep=None) -> None:
    """The verdict beside the results: gate.json (what ``diff --json`` prints, for a CI job to read), gate.md,
    and a section at the end of results.md and inside results.html (the report it judges)."""
    import json

    # deferred: the CLI's start (--help, env, report) stays light without it (+2 modules)
    from infer_compare.regress.gate_text import to_html, to_markdown

    md = to_markdown(result)
    try:
        (out / "gate.json").write_text(json.dumps(result.to_dict(), indent=1))
        (out / "gate.md").write_text(md)
        if (out / "results.md").exists():
            with open(out / "results.md", "a") as f:
                f.write("\n" + md)
        page = out / "results.html"
        if page.exists():
            text = page.read_text()
            cut = text.rfind("</body>")
            page.write_text(text[:cut] + to_html(result) + text[cut:] if cut >= 0 else text + to_html(result))
    except OSError as e:
        print(f"infer-compare: could not write the verdict into {out} ({e.strerror or e})", file=sys.stderr)
