"""Argument parsing only; the work is in api.py.

Enters: argv. Leaves: an exit status, files and the terminal view. May import: every package below
it (api, fleet, soak, regress, bundle, ...); nothing imports it.

    infer-compare --model resnet50 [options]     compare every backend present
    infer-compare env                            list every backend: available or why not
    infer-compare report RESULTS.json --format html|md|csv|json [-o FILE]       re-render saved results
    infer-compare gate A_BUNDLE B_BUNDLE [--python-b PY]   the A/B gate: both measured side by side, B judged
    infer-compare diff BASELINE.json CURRENT.json [--fail-on RULE ...]       the regression gate across runs
    infer-compare export --model M -o DIR        a bundle to measure on another machine (docs/edge.md)
    infer-compare run DIR                         measure a bundle here (no torch needed)
    infer-compare merge R1.json R2.json -o DIR   one comparison across machines
    infer-compare soak --model M --duration 10m   run configurations for long, per time window (docs/soak.md)
    infer-compare fleet run DIR --address H:P     a bundle on every node of a Ray cluster (docs/fleet.md)

Exit codes: 0 ok, 1 parity failure or regression (or an explicitly requested backend
skipped or failed, or no row measured), 2 usage error, 3 rows not judged by the gates (or none
compared) or measured disturbed; 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP (what was measured is saved,
marked incomplete).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import NoReturn

from infer_compare.base import interrupts
from infer_compare.base.errors import InferCompareError, UsageError
from infer_compare.cli.args import (
    build_diff_parser,
    build_env_parser,
    build_export_parser,
    build_merge_parser,
    build_parser,
    build_report_parser,
    build_run_parser,
    build_soak_parser,
)
from infer_compare.cli.compare import cmd_compare, cmd_export, cmd_run
from infer_compare.cli.files import cmd_diff, cmd_env, cmd_merge, cmd_report
from infer_compare.cli.flags import runner_options_from_args  # noqa: F401
from infer_compare.cli.output import requested_not_run  # noqa: F401
from infer_compare.cli.parser import unknown_subcommand
from infer_compare.cli.soak import cmd_soak
from infer_compare.host.process_end import end_process

SUBCOMMANDS = ("env", "compare", "report", "diff", "export", "run", "gate", "merge", "soak", "fleet")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if threading.current_thread() is threading.main_thread():
        interrupts.install()  # SIGTERM and SIGHUP stop a run as Ctrl-C does (what was measured is saved)
    try:
        code = _dispatch(argv)
        sys.stdout.flush()  # a reader that closed the pipe early is seen here, not at the interpreter's exit
        return code
    except InferCompareError as e:
        hint = getattr(e, "hint", "")
        print(f"infer-compare: error: {e}" + (f" (install: {hint})" if hint else ""), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt as e:
        code, said = interrupts.exit_status(e)
        print(f"infer-compare: {said}", file=sys.stderr)
        return code
    except BrokenPipeError:
        return _pipe_closed()


def command() -> NoReturn:
    """The ``infer-compare`` command (and ``python -m infer_compare``): ``main()``, then the process's end
    without the interpreter's teardown (host/process_end.py). Tests call ``main()``."""
    end_process(main())


def _pipe_closed() -> int:
    """The reader of stdout went away (``diff --json | head``): end quietly, as a program killed by
    SIGPIPE would (status 141), with no traceback at the interpreter's exit either."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (a test's capture)
        pass
    return 141


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] == "env":
        return cmd_env(build_env_parser().parse_args(argv[1:]))
    if argv and argv[0] == "report":
        return cmd_report(build_report_parser().parse_args(argv[1:]))
    if argv and argv[0] == "diff":
        return cmd_diff(build_diff_parser().parse_args(argv[1:]))
    if argv and argv[0] == "export":
        return cmd_export(build_export_parser().parse_args(argv[1:]), argv[1:])
    if argv and argv[0] == "run":
        return cmd_run(build_run_parser().parse_args(argv[1:]), argv[1:])
    if argv and argv[0] == "gate":
        # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
        from infer_compare.cli.gate_ab import cmd_gate

        return cmd_gate(argv[1:])
    if argv and argv[0] == "merge":
        return cmd_merge(build_merge_parser().parse_args(argv[1:]), argv[1:])
    if argv and argv[0] == "soak":
        return cmd_soak(build_soak_parser().parse_args(argv[1:]), argv[1:])
    if argv and argv[0] == "fleet":
        # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
        from infer_compare.cli.fleet import cmd_fleet

        return cmd_fleet(argv[1:])
    if argv and argv[0] == "compare":
        argv = argv[1:]
    elif argv and not argv[0].startswith("-"):  # the comparison takes no positional argument
        raise unknown_subcommand(argv[0], SUBCOMMANDS)
    elif not argv:
        raise UsageError("give --model MODEL, or a subcommand (infer-compare --help lists them)")
    return cmd_compare(build_parser().parse_args(argv), argv)


if __name__ == "__main__":
    sys.exit(main())
