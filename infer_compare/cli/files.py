"""The subcommands that read or write saved results: ``env``, ``report``, ``diff`` and
``merge``."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import __version__
from ..errors import UsageError


def cmd_env(args) -> int:
    from .. import env as envmod
    from ..formats import FORMATS, RUNNERS, load_impl
    from ..records import Availability

    environment = envmod.collect()
    present = envmod.devices()
    rows = []
    for r in RUNNERS.values():
        for kind in r.device_kinds:
            devs = present.get(kind, [])
            try:
                cls = load_impl(r.impl)
                av = cls.probe(devs[0] if devs else kind)
            except Exception as e:  # noqa: BLE001 - a broken backend is a row, not a crash
                av = Availability(False, f"{type(e).__name__}: {e}")
            if not devs and av.available:
                av = Availability(False, f"no {kind} device found", av.hint, av.version)
            rows.append({"backend": r.name, "device": kind, "available": av.available, "version": av.version,
                         "devices": list(devs) if av.available else [], "reason": av.reason, "hint": av.hint})
    exporters = []
    for f in FORMATS.values():
        try:
            av = load_impl(f.exporter).probe()
        except Exception as e:  # noqa: BLE001
            av = Availability(False, f"{type(e).__name__}: {e}")
        exporters.append({"format": f.name, "available": av.available, "version": av.version, "reason": av.reason,
                          "hint": av.hint, "precisions": list(f.precisions)})
    if args.json:
        import json

        print(json.dumps({"environment": environment.to_dict(), "backends": rows, "exporters": exporters}, indent=1))
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    con = Console() if sys.stdout.isatty() else Console(width=160)
    e = environment
    con.print(f"[bold]infer-compare {__version__}[/] on {e.cpu_model} ({e.cores_physical} physical / "
              f"{e.cores_logical} logical cores, {e.ram_gb} GiB), {e.os}, {e.python}")
    con.print(f"CPU features: {', '.join(e.cpu_flags) or 'none of interest'}")
    con.print(f"GPUs: {', '.join(g['name'] for g in e.gpus) or 'none'}; "
              f"Edge TPUs: {', '.join(present['edgetpu']) or 'none'}")
    t = Table(title="runners", header_style="bold")
    for c in ("backend", "device", "available", "version", "reason / install hint"):
        t.add_column(c)
    for r in rows:
        why = escape(r["reason"]) + (f"\n[cyan]→ {escape(r['hint'])}[/]" if r["hint"] and not r["available"] else "")
        t.add_row(r["backend"], ", ".join(r["devices"]) or r["device"],
                  "[green]yes[/]" if r["available"] else "[red]no[/]", r["version"] or "–", why)
    con.print(t)
    t = Table(title="exporters", header_style="bold")
    for c in ("format", "precisions", "available", "version", "reason / install hint"):
        t.add_column(c)
    for x in exporters:
        why = escape(x["reason"]) + (f"\n[cyan]→ {escape(x['hint'])}[/]" if x["hint"] and not x["available"] else "")
        t.add_row(x["format"], ", ".join(x["precisions"]), "[green]yes[/]" if x["available"] else "[red]no[/]",
                  x["version"] or "–", why)
    con.print(t)
    return 0


def cmd_report(args) -> int:
    from ..records import load_report
    from ..report import render

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
                              allow_incomplete=args.allow_incomplete, confidence=args.confidence)
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
    print(f"merged {len(reps)} results ({', '.join(merged.machines)}): "
          f"{', '.join(str(p) for p in paths.values())}")
    return 0
