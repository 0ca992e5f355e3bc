"""The subcommands that read or write saved results: ``env``, ``report``, ``diff`` and
``merge``."""

from __future__ import annotations

import sys
from pathlib import Path

from infer_compare.base.errors import UsageError
from infer_compare.base.records import load_report
from infer_compare.base.version import __version__
from infer_compare.cli.gate_args import missing_allowed
from infer_compare.regress import check_regression, print_result


def _env_table(title: str, first: tuple[str, str], items: list[dict], key: str, second) -> object:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=title, header_style="bold")
    for c in (*first, "available", "version", "reason"):
        t.add_column(c, no_wrap=c != "reason")
    for r in items:
        t.add_row(r[key], second(r), "[green]yes[/]" if r["available"] else "[red]no[/]", r["version"] or "–",
                  escape(r["reason"]))
    return t


def _print_hints(con, items: list[dict], key: str) -> None:
    """Install hints under the table, one per line and never wrapped by us, so that each can be copied."""
    from rich.markup import escape

    hints = [(r[key], r["hint"]) for r in items if r["hint"] and not r["available"]]
    if hints:
        con.print("[bold]to install[/]")
    for name, hint in dict(hints).items():
        con.print(f"  {escape(name)}: [cyan]{escape(hint)}[/]", soft_wrap=True)


def cmd_env(args) -> int:
    # deferred: the CLI's start (--help, report) stays light without them (+5 modules)
    from infer_compare.catalog import device_kinds
    from infer_compare.host import env as envmod
    from infer_compare.host.probes import env_rows

    # deferred: the CLI's start (--help, env, report) stays light without it (+5 modules)
    from infer_compare.report.terminal import console_for_stdout

    environment = envmod.collect()
    present = device_kinds.present()
    rows, exporters = env_rows(present)
    if args.json:
        import json

        print(json.dumps({"environment": environment.to_dict(), "backends": rows, "exporters": exporters},
                         indent=1))
        return 0
    con = console_for_stdout(160)
    e = environment
    con.print(f"[bold]infer-compare {__version__}[/] on {e.cpu_model} ({e.cores_physical} physical / "
              f"{e.cores_logical} logical cores, {e.ram_gb} GiB), {e.os}, {e.python}")
    con.print(f"CPU features: {', '.join(e.cpu_flags) or 'none of interest'}")
    con.print(f"GPUs: {', '.join(g['name'] for g in e.gpus) or 'none'}; "
              f"Edge TPUs: {', '.join(present['edgetpu']) or 'none'}")
    con.print(_env_table("runners", ("backend", "device"), rows, "backend",
                         lambda r: ", ".join(r["devices"]) or r["device"]))
    _print_hints(con, rows, "backend")
    con.print(_env_table("exporters", ("format", "precisions"), exporters, "format",
                         lambda r: ", ".join(r["precisions"])))
    _print_hints(con, exporters, "format")
    return 0


def cmd_report(args) -> int:
    # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
    from infer_compare.report import render

    if args.format == "terminal":
        if args.output:
            raise UsageError("--output writes a file: give --format html, md, csv or json with it")
        # deferred: the CLI's start (--help, env, report) stays light without it (+5 modules)
        from infer_compare.report.terminal import print_report

        print_report(load_report(args.results))
        return 0
    text = render(load_report(args.results), args.format)
    if not args.output:
        sys.stdout.write(text)
        return 0
    out = Path(args.output)
    try:
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
    except OSError as e:
        raise UsageError(f"cannot write {out}: {e.strerror or e}") from None
    print(f"wrote {out}", file=sys.stderr)
    return 0


def cmd_diff(args) -> int:
    result = check_regression(args.current, args.baseline, args.fail_on,
                              allow_environment_change=args.allow_environment_change,
                              allow_incomplete=args.allow_incomplete,
                              allow_missing=missing_allowed(args.allow_missing),
                              allow_condition_change=args.allow_condition_change, timing=args.timing,
                              confidence=args.confidence)
    if args.json:
        import json

        print(json.dumps(result.to_dict(), indent=1))
    else:
        print_result(result, show_all=args.all)
    # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
    from infer_compare.cli.gate import gate_status

    return gate_status(result, args.allow_unjudged)


def cmd_merge(args, argv: list[str]) -> int:
    # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
    from infer_compare.report import write_all

    # deferred: the CLI's start (--help, env, report) stays light without it (+2 modules)
    from infer_compare.report.merge import check_merge_target, merge_reports

    labels = [x.strip() for lab in args.label for x in lab.split(",")]  # --label a,b as --label a --label b
    if any(not x for x in labels):
        raise UsageError(f"--label {','.join(args.label)}: an empty machine label")
    reps = [load_report(p) for p in args.results]
    merged = merge_reports(reps, labels=labels, sources=args.results,
                           command=["infer-compare", "merge", *argv])
    out = Path(args.output_dir)
    said = check_merge_target(out, args.results, args.overwrite)  # never over results a merge did not write
    if said:
        print(f"infer-compare: {said}", file=sys.stderr)
    try:
        paths = write_all(merged, out)
    except OSError as e:
        raise UsageError(f"cannot write to {out}: {e.strerror or e}") from None
    # deferred: the CLI's start (--help, env, report) stays light without it (+5 modules)
    from infer_compare.report.terminal import print_report

    print_report(merged)
    print(f"merged {len(reps)} results ({', '.join(merged.machines)}): "
          f"{', '.join(str(p) for p in paths.values())}")
    return 0
