"""The regression gate's flags (``--baseline``, ``--confirm``, ``--fail-on``, ``--timing``, the allowances),
shared by the main command and ``diff``."""

from __future__ import annotations

from infer_compare.regress.judge import BEST, TIMINGS
from infer_compare.regress.rules import CONFIRM, DEFAULT_RULES


def add_gate_args(g, with_baseline: bool) -> None:
    if with_baseline:
        g.add_argument("--baseline", nargs="+", action="extend", metavar="FILE|DIR",
                       help="results.json files of the baseline code (or directories of them) to compare "
                            "this run with after measuring; pool several runs (each row is judged at its "
                            "fastest level over them)")
        g.add_argument("--confirm", type=int, default=CONFIRM, metavar="N",
                       help="when the run cannot pass on timings alone (a timing beyond a rule, a row "
                            "disturbed, on a busy host or within a rule only once normalized), measure those "
                            "rows again N times, every time (no stopping at a pass), and judge each side's "
                            "median run (default: as many as make the current runs as many as the baseline "
                            "runs; 0: judge the one run); saved in OUTPUT_DIR/confirm-K. For small changes "
                            "use 'infer-compare gate A B' (both sides in one run)")
    g.add_argument("--allow-incomplete", action="store_true",
                   help="compare even when a file is incomplete (an interrupted or killed run; refused by "
                        "default: its missing rows would pass unchecked); the rows that did not "
                        "run are listed, not judged")
    g.add_argument("--fail-on", action="append", default=None, metavar="RULE",
                   help="exit 1 when a row gets worse than RULE, e.g. p50:+10%%, throughput:-5%%, "
                        "accuracy:-0.5 (repeatable; metrics: p50 p90 p95 p99 mean min max throughput "
                        "accuracy top1 top5 cosine rel_err load memory size); "
                        "default: " + ", ".join(DEFAULT_RULES).replace("%", "%%"))
    g.add_argument("--timing", choices=TIMINGS, default=BEST,
                   help="judge latency and throughput with each side at its fastest sustained level, the "
                        "fastest block of consecutive calls over its runs (best, the default; measured on a "
                        "shared 2-core machine in docs/gate.md); as ratios to each run's PyTorch fp32 row "
                        "(reference); to a calibration workload timed before each row (calibrated); or as "
                        "measured, the most favourable pair of runs (absolute)")
    g.add_argument("--allow-unjudged", action="store_true",
                   help="exit 0 although rows could not be judged (disturbed, busy host, within a rule only "
                        "once normalized, the baseline did not run them): listed with the "
                        "reason, exit 3 by default")
    g.add_argument("--allow-condition-change", action="store_true",
                   help="accept rows measured under other threads or runner options than in the baseline (a "
                        "violation by default)")
    g.add_argument("--allow-missing", action="append", nargs="?", const="*", metavar="LABEL",
                   help="accept the row LABEL (fnmatch pattern, repeatable) ok in the baseline and missing, "
                        "skipped, not built or not loadable now (a violation by default); without LABEL: "
                        "every row missing or skipped now")
    g.add_argument("--allow-environment-change", action="store_true",
                   help="compare with a baseline from another machine or other library versions")


def missing_allowed(given: list[str] | None) -> bool | tuple[str, ...]:
    """--allow-missing as the judges take it: False, True (bare flag: every row missing or skipped), or the
    labels' patterns."""
    if not given:
        return False
    named = tuple(g for g in given if g != "*")
    return named if len(named) == len(given) else True
