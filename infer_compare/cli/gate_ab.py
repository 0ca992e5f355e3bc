"""``infer-compare gate A B``: the baseline and the candidate measured side by side in one run (the A/B
gate, regress/ab.py), one report with both sides and the ratio per row.

Exit codes: 0 pass, 1 regression, 3 rows not judged (too noisy, too few pairs, the baseline side did not
run; unless --allow-unjudged), 2 usage error.
"""

from __future__ import annotations

import sys
from pathlib import Path

from infer_compare.cli.args import _add_measure_args, _Parser, add_output
from infer_compare.cli.flags import measure_options
from infer_compare.cli.gate import gate_status, save_verdict
from infer_compare.cli.gate_args import missing_allowed
from infer_compare.cli.output import Saver, output_dir
from infer_compare.cli.progress import RichProgress


def build_gate_parser() -> _Parser:
    p = _Parser(prog="infer-compare gate",
                description="The regression gate in one run: measure bundle A (the baseline, e.g. exported "
                            "from main) and bundle B (the candidate) side by side on this machine, each "
                            "configuration's two sides loaded at once and timed in alternating blocks, and "
                            "judge B against A per row on the paired ratios of adjacent blocks. Each side "
                            "may run under its own interpreter (another runtime version, another "
                            "infer-compare checkout).",
                epilog="Exit codes: 0 pass, 1 regression, 3 rows not judged (unless --allow-unjudged), "
                       "2 usage error. docs/gate.md has the recipe and the measured error rates.")
    p.add_argument("bundle_a", metavar="A", help="the baseline bundle (infer-compare export)")
    p.add_argument("bundle_b", metavar="B", help="the candidate bundle (may be A itself when only the "
                                                 "interpreter differs)")
    _add_pairing_args(p.add_argument_group("the two sides and the pairing"))
    _add_measure_args(p)
    o = p.add_argument_group("output")
    add_output(p, o, "where B's results, A's (baseline/) and gate.json go (default ./infer-compare-results/"
                     "gate-<B>-<time>/)")
    o.add_argument("--cache-dir", metavar="DIR", help="cache for artifacts built on this machine")
    o.add_argument("--no-cache", action="store_true", help="rebuild what is built here")
    o.add_argument("--quiet", "-q", action="store_true", help="no progress display")
    return p


def _add_pairing_args(g) -> None:
    """The two sides' interpreters, the pairing (its defaults: PairPlan's), the rules and what they accept."""
    # deferred: the CLI's start (--help, env, report) stays light without it (+2 modules)
    from infer_compare.measure.ab import PairPlan
    from infer_compare.measure.ab_plan import GATE_BUDGET_S
    from infer_compare.regress.ab_judge import AB_RULES

    d = PairPlan()
    g.add_argument("--python-a", metavar="PATH", help="interpreter of side A's processes (default: this one)")
    g.add_argument("--python-b", metavar="PATH", help="interpreter of side B's processes (default: this one)")
    g.add_argument("--pairs", type=int, default=d.pairs, metavar="N",
                   help=f"pairs of blocks per row, over all process pairs (default {d.pairs}; fewer where a "
                        "call is so slow that blocks of 3 calls would overrun --side-time, at "
                        "least 2 per process pair)")
    g.add_argument("--replicates", type=int, default=d.replicates, metavar="R",
                   help=f"process pairs per configuration, one after the other (default {d.replicates}): the "
                        "verdict rests on their spread, which holds the lasting difference between two "
                        "processes of the same code; more see smaller changes. 1: one process pair, judged "
                        "on its blocks alone (cheaper; its interval does not cover that difference)")
    g.add_argument("--max-replicates", type=int, default=d.max_replicates, metavar="R",
                   help="at most this many process pairs for a row whose first --replicates show it too "
                        "noisy for the gate's plan: unchanged code passing every timing check in 95 %% of "
                        f"runs, a change of twice a rule caught (default {d.max_replicates}; decided once, "
                        "from their spread alone; --replicates or less: never more)")
    g.add_argument("--budget", type=float, default=GATE_BUDGET_S, metavar="S",
                   help="seconds of measuring for all the gate's process pairs, shared among its "
                        f"configurations (default {GATE_BUDGET_S:g}; 0: no bound): each configuration's "
                        "first --replicates are always measured, those added to a noisy row fit in what is "
                        "left")
    g.add_argument("--side-time", type=float, default=d.side_time_s, metavar="S",
                   help="seconds of timed calls per side and row, split into the blocks "
                        f"(default {d.side_time_s}; with a p90/p95/p99 rule, longer blocks where the tail "
                        f"needs more calls, at most {d.tail_time_s:g} s)")
    g.add_argument("--malloc", choices=("fixed", "default"), default="fixed" if d.malloc else "default",
                   help="glibc's malloc thresholds in both sides' processes: fixed (the default: the same in "
                        "every process whatever it did before, so that no process is lastingly slower for "
                        "where its buffers came from) or default (moving with each process's "
                        "history, as in a plain run)")
    g.add_argument("--seed", type=int, default=0,
                   help="seed of the order of the sides in each pair (default 0)")
    g.add_argument("--fail-on", action="append", default=None, metavar="RULE",
                   help="exit 1 when B is worse than A beyond RULE (repeatable); default: "
                        + ", ".join(AB_RULES).replace("%", "%%"))
    g.add_argument("--allow-unjudged", action="store_true",
                   help="exit 0 although rows could not be judged (listed with the reason)")
    g.add_argument("--allow-missing", action="append", nargs="?", const="*", metavar="LABEL",
                   help="accept the row LABEL (fnmatch pattern, e.g. 'openvino/*'; repeatable) being "
                        "missing, skipped, not built or not loadable in B although A measured it (each such "
                        "row fails the gate by default); without LABEL: every row missing or skipped in B")
    g.add_argument("--allow-condition-change", action="store_true",
                   help="accept rows measured under other threads or runner options in B than in A")


def cmd_gate(argv: list[str]) -> int:
    # deferred: the CLI's start (--help, env, report) stays light without it (+20 modules)
    from infer_compare.regress.ab_servers import launch_early
    from infer_compare.report.writers import import_writers

    args = build_gate_parser().parse_args(argv)
    if args.pairs < 6 or args.side_time <= 0:
        args_error("--pairs must be 6 or more and --side-time above 0")
    if args.replicates == 2 or args.replicates < 1 or args.pairs < 2 * args.replicates:
        args_error("--replicates must be 1, or 3 or more with at least 2 --pairs each")
    refused = _refused(args)
    if refused:
        args_error(refused)
    _say_tail_cost(args)
    opts = measure_options(args)
    args.model = f"gate-{Path(args.bundle_b).resolve().name}"
    out = output_dir(args)
    saver = Saver(out)
    try:
        with RichProgress(args.quiet) as prog:
            # the fork servers first: PyTorch's import in its server (3-5 s on the 2-core VM) then overlaps
            # the gate's own imports below (0.3 s) as well as the verification; the report writers' imports go
            # into the wait for the servers (regress/ab_servers.py)
            servers = launch_early(args.bundle_a, opts, {"a": args.python_a, "b": args.python_b}, prog,
                                   idle=import_writers)
            got = _gate(args, argv, opts, prog, saver, servers)
    except KeyboardInterrupt:
        saver.interrupted()
        raise
    paths = saver.write(got.b)
    # A's rows without an HTML page of their own: B's page holds the verdict with both sides' figures per row
    # (its plots took 0.85 s of a 20 s MobileNet v2 gate on the 2-core VM)
    Saver(out / "baseline", formats=("json", "md", "csv")).write(got.a)
    # deferred: loaded with the gate (regress/ab.py imports it)
    from infer_compare.regress import print_result

    print_result(got.result)
    save_verdict(got.result, out, got.b)
    print(f"results: {', '.join(str(p) for p in paths.values())}; side A in {out / 'baseline'}; verdict in "
          f"{out / 'gate.json'}")
    return gate_status(got.result, args.allow_unjudged)


def _gate(args, argv: list[str], opts, prog, saver: Saver, servers):
    try:
        # deferred: imported after the fork servers' launch (+200 modules, 0.3 s on the 2-core VM)
        from infer_compare.measure.ab import PairPlan
        from infer_compare.regress.ab import ab_gate
        from infer_compare.regress.tails import calls_for
    except BaseException:
        servers.close()  # ab_gate closes them from here on
        raise

    plan = PairPlan(pairs=args.pairs, replicates=args.replicates, side_time_s=args.side_time, seed=args.seed,
                    max_replicates=max(args.replicates, args.max_replicates), malloc=args.malloc == "fixed",
                    budget_s=max(0.0, args.budget),
                    tail_calls=calls_for(args.fail_on or ()))
    return ab_gate(args.bundle_a, args.bundle_b, rules=args.fail_on, python_a=args.python_a,
                   python_b=args.python_b, plan=plan, options=opts, progress=prog,
                   command=["infer-compare", "gate", *argv], on_row=saver,
                   allow_missing=missing_allowed(args.allow_missing),
                   allow_condition_change=args.allow_condition_change, servers=servers)


def _refused(args) -> str:
    """Why a --fail-on rule cannot be judged by the A/B gate ('' when all can): before anything is measured,
    never a rule silently reported and not judged."""
    # deferred: the CLI's start (--help, env, report) stays light without them (+3 modules)
    from infer_compare.regress.ab_judge import AB_RULES
    from infer_compare.regress.tails import refused_rules

    return refused_rules(args.fail_on or AB_RULES, replicates=args.replicates)


def _say_tail_cost(args) -> None:
    # deferred as in _refused
    from infer_compare.measure.ab_plan import PairPlan
    from infer_compare.regress.tails import tail_cost

    note = tail_cost(args.fail_on or (), PairPlan.tail_time_s)
    if note and not args.quiet:
        print(terminal_lines(f"infer-compare gate: {note}", sys.stderr), file=sys.stderr)


def terminal_lines(text: str, stream) -> str:
    """``text`` wrapped at word boundaries to the terminal's width where ``stream`` is a terminal (as the
    progress lines are); one line where it is piped (a CI log keeps it whole)."""
    import shutil
    import textwrap

    if not stream.isatty():
        return text
    return "\n".join(textwrap.wrap(text, shutil.get_terminal_size().columns, break_on_hyphens=False))


def args_error(msg: str) -> None:
    print(f"infer-compare gate: error: {msg}", file=sys.stderr)
    raise SystemExit(2)
