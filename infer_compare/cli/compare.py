"""The subcommands that measure: the comparison, ``export`` and ``run`` (bundles), and
the exit-code rule they share."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from infer_compare.base.diskfull import DISK_FULL, is_disk_full
from infer_compare.base.errors import UsageError
from infer_compare.base.records import SKIPPED
from infer_compare.catalog.formats import FORMATS
from infer_compare.cli.data_args import data_options
from infer_compare.cli.flags import measure_options, refuse_build_flags, runner_options_from_args
from infer_compare.cli.output import (
    Saver,
    cleans_up,
    finish,
    keep_bytecode,
    log_bytecode,
    make_dir,
    output_dir,
)
from infer_compare.cli.progress import RichProgress
from infer_compare.regress import check_complete, check_environment, parse_rules
from infer_compare.regress.check import load_baselines


@cleans_up
def cmd_compare(args, argv: list[str]) -> int:
    from dataclasses import replace

    # first: the imports below (numpy, the measuring code) find their bytecode there too
    pyc = keep_bytecode(args)
    # deferred: the CLI's start (--help, env, report) stays light without it (+34 modules)
    from infer_compare.api import compare

    opts = measure_options(args)  # a bad batch list fails before any work
    if args.weights not in ("auto", "random") and not os.path.isfile(args.weights):
        raise UsageError(f"weights file not found: {args.weights}")
    gate = _gate_setup(args)  # a bad baseline, rule or environment fails before any work
    saver = Saver(output_dir(args))

    def measure(into: Saver, only: dict | None = None):
        with RichProgress(args.quiet) as prog:
            log_bytecode(prog, pyc)
            return compare(
                args.model, options=replace(opts, **(only or {})), weights=args.weights,
                parity_samples=args.parity_samples, input_shape=args.input_shape, data=data_options(args),
                output_kinds=args.output_kind, command=["infer-compare", *argv], progress=prog, on_row=into)

    try:
        rep = measure(saver)
    except KeyboardInterrupt:
        saver.interrupted()
        raise
    code = finish(rep, saver)
    if gate is not None:
        # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
        from infer_compare.cli.gate import judge_run

        code = max(code, judge_run(args, gate, rep, saver.out, measure))
    return code


def _gate_setup(args):
    """(baseline Reports, rules or None for the defaults) for --baseline, or None. Raises
    UsageError/SchemaError/EnvironmentMismatch before anything is measured."""
    if not args.baseline:
        for flag, given in (("--fail-on", args.fail_on), ("--allow-missing", args.allow_missing),
                            ("--allow-condition-change", args.allow_condition_change)):
            if given:
                raise UsageError(f"{flag} needs --baseline FILE (a results.json to compare with)")
        return None
    # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
    from infer_compare.host import env as envmod

    rules = None if args.fail_on is None else parse_rules(args.fail_on)
    baselines = [rep for _, rep in load_baselines(args.baseline)]
    here = envmod.collect()
    for b in baselines:
        check_complete(None, b, args.allow_incomplete)
        check_environment(b.environment, here, args.allow_environment_change)
        _same_model_and_selection(args, b)
    return baselines, rules


def _same_model_and_selection(args, base) -> None:
    """A baseline of another model, or one that measured none of the rows this run selects, is one line
    before anything is measured."""
    names = {args.model, Path(args.model).name, Path(args.model).stem}
    if base.model.name not in names:
        raise UsageError(f"the baseline is of model {base.model.name!r} and this run of {args.model!r}: "
                         "nothing to compare")
    bs = str(getattr(args, "batch_sizes", None) or "").split(",")
    batches = bs if all(b.strip().isdigit() for b in bs) else []  # per-device forms: not filtered here
    picked = [r for r in base.rows if r.status in ("ok", "parity_failed")
              and all(not want or have in want for have, want in (
                  (r.backend, args.backends), (r.format, args.formats), (r.precision, args.precisions),
                  (str(r.batch_size), [b.strip() for b in batches])))]
    if base.rows and not picked:
        had = sorted({f"{r.backend} {r.format} {r.precision} b{r.batch_size}" for r in base.rows
                      if r.status in ("ok", "parity_failed")})
        raise UsageError(f"the baseline measured none of the rows this run selects (it has: "
                         f"{', '.join(had[:6]) or 'no measured row'}{' ...' if len(had) > 6 else ''})")


@cleans_up
def cmd_export(args, argv: list[str]) -> int:
    keep_bytecode(args)  # first: the imports below find their bytecode there too (host/pycache.py)
    # deferred: the CLI's start (--help, env, report) stays light without it (+30 modules)
    from infer_compare.bundle import export_bundle

    if args.weights not in ("auto", "random") and not os.path.isfile(args.weights):
        raise UsageError(f"weights file not found: {args.weights}")
    if args.calibration_samples is not None and args.calibration_samples < 1:
        raise UsageError(f"--calibration-samples must be >= 1, got {args.calibration_samples}")
    out = Path(args.output_dir)
    try:  # an unusable bundle folder is one line before any work
        make_dir(out)
        probe = out.parent / f".{out.name}.write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"bundle directory {out} is not writable: {e.strerror or e}") from None
    try:
        with RichProgress(args.quiet) as prog:
            man = export_bundle(args.model, args.output_dir, weights=args.weights, formats=args.formats,
                                precisions=args.precisions, parity_samples=args.parity_samples,
                                calibration_samples=args.calibration_samples, max_batch=args.max_batch,
                                seed=args.seed, cache_dir=args.cache_dir, use_cache=not args.no_cache,
                                command=["infer-compare", "export", *argv], progress=prog,
                                export_timeout_s=args.export_timeout,
                                runner_options=runner_options_from_args(args),
                                output_kinds=args.output_kind, input_shape=args.input_shape)
    except OSError as e:  # disk full, permissions: one line, and the half-written bundle was removed
        raise UsageError(f"cannot write the bundle {out}: {e.strerror or e}"
                         + (f" ({e.filename})" if getattr(e, "filename", None) else "")) from None
    _print_bundle(man, args.output_dir)
    return export_status(man, args.output_dir, args.allow_partial)


def _print_bundle(man: dict, out: str) -> None:
    """What the bundle holds, what the device still builds, and what it lacks (stdout)."""
    size = sum(m["size"] for m in man["files"].values())
    print(f"bundle {out}: {len(man['artifacts'])} artifacts, {len(man['files'])} files, "
          f"{size / 2**20:.1f} MiB")
    for a in man["artifacts"]:
        print(f"  {a['format']} {a['precision']}: {a['path']}")
        for note in a["export"]["notes"]:
            if note.startswith(("Edge TPU", "int8 with float parts", "MOSTLY ON THE CPU")):
                print(f"      {note}")
    for d in man["deferred"]:
        # compiled off the device (the Edge TPU model): the step still to do, and what it maps
        if d.get("drop_in"):
            step = d["note"].split("`")[1] if d["note"].count("`") >= 2 else d["note"]
            print(f"  {d['format']} {d['precision']}: still to compile, into {d['drop_in']}: `{step}` in the "
                  "bundle's folder on an x86-64 Linux host (the warning above says how)")
            if d.get("precheck"):
                print(f"      {d['precheck']}")
            continue
        print(f"  {d['format']} {d['precision']}: built on the device from {' '.join(d['source'])}"
              + (f" ({d['note']})" if d.get("note") else ""))
    for d in man["not_built"]:
        print(f"  {d['format']} {d['precision']}: not in the bundle ({d['reason']})")
    print(f"on the device: infer-compare run {out}")


def missing_asked(man: dict) -> list[dict]:
    """The manifest's not_built entries that fail the export: every build that failed, and a skip of what
    the user named: software missing here ("unavailable") counts when --formats named the format, a format
    this model cannot have ("unsupported") when --formats named it or --precisions its precision. Skips of
    the default selection (all formats) are what this machine or model cannot have, not failures; an
    artifact left to the device (deferred) is in the plan, not missing."""
    sel = man.get("selection") or {}
    formats, precisions = set(sel.get("formats") or ()), set(sel.get("precisions") or ())
    bad = []
    for d in man["not_built"]:
        fmt, prec = d.get("format"), d.get("precision")
        named_prec = fmt in FORMATS and any(FORMATS[fmt].artifact_for(p) == prec for p in precisions)
        if (d.get("status") != SKIPPED or fmt in formats
                or d.get("skip_kind") == "unsupported" and named_prec):
            bad.append(d)
    return bad


def export_status(man: dict, out: str, allow_partial: bool) -> int:
    """0, or 1 when an artifact asked for is not in the bundle (written all the same) and --allow-partial
    was not given, or when a full disk kept one out (whatever --allow-partial says: export again)."""
    bad = missing_asked(man)
    for d in bad:
        what = "was asked for and not built" if d.get("status") == SKIPPED else "failed to build"
        print(f"infer-compare: {d['format']} {d['precision']} {what}: {d.get('reason', '')}", file=sys.stderr)
    full = [d for d in man["not_built"] if is_disk_full(d.get("reason", ""))]
    if bad:
        asked = len((man.get("selection") or {}).get("exported") or ()) or len(bad)
        said = ("accepted by --allow-partial" if allow_partial and not full
                else "exit 1" + ("" if full else " (--allow-partial accepts it)"))
        print(f"infer-compare: bundle {out} written without {len(bad)} of {asked} artifacts asked for: "
              f"{said}", file=sys.stderr)
    if full:
        print(f"infer-compare: {len(full)} artifact(s) could not be built: {DISK_FULL}; free space and "
              "export again", file=sys.stderr)
        return 1
    return 1 if bad and not allow_partial else 0


@cleans_up
def cmd_run(args, argv: list[str]) -> int:
    pyc = keep_bytecode(args)  # first: the imports below find their bytecode there too (host/pycache.py)
    # deferred: the CLI's start (--help, env, report) stays light without it (+30 modules)
    from infer_compare.bundle import run_bundle, verify

    refuse_build_flags(args)
    if args.verify_only:
        v = verify(args.bundle)
        print(f"bundle {args.bundle}: ok ({v.n_files} files, {v.n_bytes / 2**20:.1f} MiB, sha256 verified; "
              f"model {v.manifest['model'].get('name')})")
        return 0
    opts = measure_options(args)
    args.model = f"{Path(args.bundle).resolve().name}"
    saver = Saver(output_dir(args))
    try:
        with RichProgress(args.quiet) as prog:
            log_bytecode(prog, pyc)
            rep = run_bundle(args.bundle, options=opts, output_kinds=args.output_kind,
                             command=["infer-compare", "run", *argv], progress=prog, on_row=saver)
    except KeyboardInterrupt:
        saver.interrupted()
        raise
    return finish(rep, saver)
