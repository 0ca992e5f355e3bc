"""The subcommands that read or write saved results: ``env``, ``report``, ``diff`` and
``merge``."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import __version__
from ..errors import UsageError


def _probe(cls, device: str):
    from ..records import Availability

    try:
        return cls.probe(device) if device else cls.probe()
    except Exception as e:  # noqa: BLE001 - a broken backend is a row, not a crash
        return Availability(False, f"{type(e).__name__}: {e}")


def env_rows(present: dict[str, list[str]]) -> tuple[list[dict], list[dict]]:
    """(runner rows, exporter rows) of `infer-compare env`: every backend, available or why not."""
    from ..backends import load_impl
    from ..device_kinds import DEVICE_KINDS
    from ..formats import FORMATS, RUNNERS
    from ..records import Availability

    rows = []
    for r in RUNNERS.values():
        for kind in r.device_kinds:
            devs = present.get(kind, [])
            try:
                av = _probe(load_impl(r.impl), devs[0] if devs else kind)
            except (ImportError, AttributeError) as e:
                av = Availability(False, f"{type(e).__name__}: {e}")
            if not devs and av.available:
                av = Availability(False, DEVICE_KINDS[kind].absent_reason, av.hint, av.version)
            rows.append({"backend": r.name, "device": kind, "available": av.available, "version": av.version,
                         "devices": list(devs) if av.available else [], "reason": av.reason, "hint": av.hint})
    exporters = []
    for f in FORMATS.values():
        for prec in dict.fromkeys(f.artifact_for(p) for p in f.precisions):
            try:
                av = _probe(load_impl(f.exporter_for(prec)), "")
            except (ImportError, AttributeError) as e:
                av = Availability(False, f"{type(e).__name__}: {e}")
            if any(x["format"] == f.name and x["exporter"] == f.exporter_for(prec) for x in exporters):
                continue
            exporters.append({"format": f.name, "exporter": f.exporter_for(prec), "available": av.available,
                              "version": av.version, "reason": av.reason, "hint": av.hint,
                              "precisions": [p for p in f.precisions if f.exporter_for(f.artifact_for(p)) ==
                                             f.exporter_for(prec)]})
    return rows, exporters


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
    from .. import device_kinds
    from .. import env as envmod
    from ..report.terminal import console_for_stdout

    environment = envmod.collect()
    present = device_kinds.present()
    rows, exporters = env_rows(present)
    if args.json:
        import json

        print(json.dumps({"environment": environment.to_dict(), "backends": rows, "exporters": exporters}, indent=1))
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
    from ..records import load_report
    from ..report import render

    if args.format == "terminal":
        if args.out:
            raise UsageError("--out writes a file: give --format html, md, csv or json with it")
        from ..report.terminal import print_report

        print_report(load_report(args.results))
        return 0
    text = render(load_report(args.results), args.format)
    if not args.out:
        sys.stdout.write(text)
        return 0
    out = Path(args.out)
    try:
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
    except OSError as e:
        raise UsageError(f"cannot write {out}: {e.strerror or e}") from None
    print(f"wrote {out}", file=sys.stderr)
    return 0


def cmd_diff(args) -> int:
    from ..regress import check_regression, print_result

    result = check_regression(args.current, args.baseline, args.fail_on,
                              allow_environment_change=args.allow_environment_change,
                              allow_incomplete=args.allow_incomplete, allow_missing=args.allow_missing,
                              timing=args.timing, confidence=args.confidence)
    if args.json:
        import json

        print(json.dumps(result.to_dict(), indent=1))
    else:
        print_result(result, show_all=args.all)
    return 0 if result.passed else 1


def cmd_merge(args, argv: list[str]) -> int:
    from ..merge import merge_reports
    from ..records import load_report
    from ..report import write_all

    reps = [load_report(p) for p in args.results]
    merged = merge_reports(reps, labels=args.label, sources=args.results, command=["infer-compare", "merge", *argv])
    out = Path(args.out)
    try:
        paths = write_all(merged, out)
    except OSError as e:
        raise UsageError(f"cannot write to {out}: {e.strerror or e}") from None
    from ..report.terminal import print_report

    print_report(merged)
    print(f"merged {len(reps)} results ({', '.join(merged.machines)}): "
          f"{', '.join(str(p) for p in paths.values())}")
    return 0
