"""The regression gate after a comparison (``--baseline``): judge the run, and when only timings broke
the rules, measure the rows that broke them again (``--confirm N``, until they pass) and judge the runs
pooled, each row at its fastest level over them.

One run on a shared machine can land at a slower speed level than the baseline runs did (other
tenants, frequency), which reads as a timing regression though the code did not change; later runs
rarely all land there too, while a real slowdown shows in every run. A row slower only in runs where the
host itself ran slow (the calibration workload, regress/judge.py BUSY_HOST) is not judged, and measured
again the same way. docs/reports-and-regression.md has the figures.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from infer_compare.cli.output import Saver
from infer_compare.regress import check_regression, print_result
from infer_compare.regress.results import BUSY
from infer_compare.regress.rules import confirm_wait


def _check(args, runs: list, baseline, rules):
    return check_regression(runs, baseline, rules, allow_environment_change=args.allow_environment_change,
                            allow_incomplete=args.allow_incomplete, allow_missing=args.allow_missing,
                            allow_condition_change=args.allow_condition_change, timing=args.timing)


def judge_run(args, gate, rep, out: Path, measure: Callable) -> bool:
    """Print the gate's verdict on ``rep`` against ``gate`` (baselines, rules); True when it passed.
    ``measure(saver, only)`` runs the comparison again (only: a selection, broken_cells), into ``saver``'s folder."""
    baseline, rules = gate
    runs = [rep]
    result = _check(args, runs, baseline, rules)
    last = time.monotonic()
    for k in range(1, max(0, args.confirm) + 1):
        if not _unsettled(result):
            break
        again = out / f"confirm-{k}"
        only = broken_cells(result)
        wait = max(0.0, last + confirm_wait(k) - time.monotonic())
        why = ", ".join(x for x in (f"{len(result.violations)} timing(s) beyond the rules" if result.violations else "",
                                    f"{len(result.busy)} row(s) slower on a busy host" if result.busy else "",
                                    f"{len(result.provisional)} row(s) within the rules only once normalized"
                                    if result.provisional else "") if x)
        print(f"infer-compare: {why}: measuring {', '.join(sorted(_pending(result)))} again "
              f"in {wait:.0f} s ({k} of {args.confirm}; results in {again})", file=sys.stderr)
        time.sleep(wait)  # not the same speed level of the machine as the runs before
        last = time.monotonic()
        saver = Saver(again)
        again.mkdir(parents=True, exist_ok=True)
        try:
            runs.append(measure(saver, only))
        except KeyboardInterrupt:
            saver.interrupted()
            raise
        saver.write(runs[-1])
        result = _check(args, runs, baseline, rules)
    print_result(result)
    save_verdict(result, out)
    return result.passed


def _unsettled(result) -> bool:
    """Only timings broke the rules, or none did but a row was slower on a busy host or within the rules only
    once normalized by the machine's change: another run may settle it."""
    return result.timing_only or (result.passed and bool(result.busy or result.provisional))


def _pending(result) -> set[str]:
    """The rows whose timings broke a rule, were slower on a busy host, or were within the rules only once
    normalized (what a confirming run measures)."""
    return {d.label for d in result.rows if any(c.broken or c.provisional or c.verdict == BUSY for c in d.checks)}


def broken_cells(result) -> dict:
    """The selection (backends, formats, precisions, devices, batch sizes) that measures again every row
    that _pending names (and may measure a few more: the product of their backends, formats, precisions...)."""
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
