"""The regression gate after a comparison (``--baseline``): judge the run, and when only timings broke
the rules, measure again (``--confirm N``) and judge the runs pooled, each row by its best run.

One run on a shared machine can land at a slower speed level than the baseline runs did (other
tenants, frequency), which reads as a timing regression though the code did not change; a second
run rarely lands there too, while a real slowdown shows in every run. docs/reports-and-regression.md
has the figures.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def _check(args, runs: list, baseline, rules):
    from ..regress import check_regression

    return check_regression(runs, baseline, rules, allow_environment_change=args.allow_environment_change,
                            allow_incomplete=args.allow_incomplete, allow_missing=args.allow_missing,
                            allow_condition_change=args.allow_condition_change, timing=args.timing)


def judge_run(args, gate, rep, out: Path, measure: Callable) -> bool:
    """Print the gate's verdict on ``rep`` against ``gate`` (baselines, rules); True when it passed.
    ``measure(saver)`` runs the same comparison again, saving into ``saver``'s folder."""
    from ..regress import print_result
    from .measure import Saver

    baseline, rules = gate
    runs = [rep]
    result = _check(args, runs, baseline, rules)
    for k in range(1, max(0, args.confirm) + 1):
        if result.passed or not result.timing_only:
            break
        again = out / f"confirm-{k}"
        print(f"infer-compare: {len(result.violations)} timing(s) beyond the rules: measuring again to confirm "
              f"({k} of {args.confirm}; results in {again})", file=sys.stderr)
        saver = Saver(again)
        again.mkdir(parents=True, exist_ok=True)
        try:
            runs.append(measure(saver))
        except KeyboardInterrupt:
            saver.interrupted()
            raise
        saver.write(runs[-1])
        result = _check(args, runs, baseline, rules)
    print_result(result)
    return result.passed
