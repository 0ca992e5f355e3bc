"""The subcommands that measure: the comparison, ``export`` and ``run`` (bundles), and
the exit-code rule they share."""

from __future__ import annotations

import functools
import os
import re
import sys
import time
from pathlib import Path

from ..errors import UsageError
from .args import data_options
from .flags import refuse_build_flags, runner_options_from_args
from .progress import RichProgress


def _loop_args(args) -> dict:
    """The sampling flags as compare()/run_bundle() keywords."""
    return {"target_ci": args.target_ci or None, "max_time_s": args.max_time, "warmup_time_s": args.warmup_time,
            "export_timeout_s": args.export_timeout, **_scenario_args(args)}


def _scenario_args(args) -> dict:
    """--scenario, --io and --concurrency as compare()/run_bundle() keywords."""
    return {"scenarios": args.scenario, "io": args.io, "concurrency": args.concurrency}


def keep_bytecode(args) -> str | None:
    """Before the heavy imports: bytecode under the tool's cache where the installation keeps none
    (pycache.py; not with --no-cache); the folder, or None."""
    from ..cache import default_root
    from ..pycache import keep_bytecode as keep

    if getattr(args, "no_cache", False):
        return None
    return keep(str(Path(args.cache_dir).expanduser() if args.cache_dir else default_root()))


def _log_bytecode(prog, prefix: str | None) -> None:
    if prefix:
        prog.log(f"the installation keeps no bytecode: Python's is kept in {prefix} (INFER_COMPARE_PYCACHE=0: off)")


def output_dir(args) -> Path:
    """The result folder, created (with its missing parents, which ``created_dirs`` remembers for
    ``remove_if_empty``) and checked writable before any work."""
    if args.output_dir:
        out = Path(args.output_dir)
    else:
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(str(args.model).split(":")[-1]).stem) or "model"
        out = Path("infer-compare-results") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        _make_dir(out)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"output directory {out} is not writable: {e.strerror or e}") from None
    return out


_created: list[Path] = []


def _make_dir(out: Path) -> None:
    """``out.mkdir(parents=True)``, remembering which folders it made."""
    new = [p for p in (out, *out.parents) if not p.exists()]
    out.mkdir(parents=True, exist_ok=True)
    _created.extend(new)


def remove_if_empty() -> None:
    """The folders ``_make_dir`` made that are still empty (a usage error, a crash before any row was
    saved) are removed, deepest first: an error leaves no empty result or bundle folder behind."""
    while _created:
        p = _created.pop(0)
        try:
            p.rmdir()  # only an empty folder
        except OSError:
            pass


def cleans_up(cmd):
    """A subcommand that removes the folders it made and left empty, however it ends."""
    @functools.wraps(cmd)
    def wrapped(*a, **kw):
        try:
            return cmd(*a, **kw)
        finally:
            remove_if_empty()
    return wrapped


class Saver:
    """Saves each partial report (``on_row``) and writes the final one: every format, atomically, to the
    output directory, or to a fresh temporary one when that fails (nothing measured is lost)."""

    def __init__(self, out: Path):
        self.out = out
        self.last = None

    def __call__(self, rep) -> None:
        self.last = rep
        try:
            rep.save(self.out / "results.json")
        except OSError:
            pass  # write() says so at the end

    def write(self, rep) -> dict:
        import tempfile

        from ..report import write_all

        try:
            return write_all(rep, self.out)
        except OSError as e:
            fallback = Path(tempfile.mkdtemp(prefix="infer-compare-results-"))
            paths = write_all(rep, fallback)
            print(f"infer-compare: could not write to {self.out} ({e.strerror or e}); results saved in {fallback}",
                  file=sys.stderr)
            return paths

    def interrupted(self) -> None:
        """On Ctrl-C/SIGTERM: the partial report (marked incomplete by the measuring code) in every format."""
        if self.last is not None:
            paths = self.write(self.last)
            print(f"infer-compare: partial results ({len(self.last.rows)} rows, incomplete) saved: "
                  f"{', '.join(str(p) for p in paths.values())}", file=sys.stderr)


def _finish(rep, saver: Saver) -> int:
    from ..report.terminal import print_report

    paths = saver.write(rep)
    print_report(rep)
    print(f"results: {', '.join(str(p) for p in paths.values())}")
    return exit_code(rep)


@cleans_up
def cmd_compare(args, argv: list[str]) -> int:
    from ..api import compare, parse_batch_sizes

    batch = parse_batch_sizes(args.batch_sizes) if args.batch_sizes is not None else None  # fail before any work
    if args.weights not in ("auto", "random") and not os.path.isfile(args.weights):
        raise UsageError(f"weights file not found: {args.weights}")
    gate = _gate_setup(args)  # a bad baseline, rule or environment fails before any work
    saver = Saver(output_dir(args))
    pyc = keep_bytecode(args)

    def measure(into: Saver, only: dict | None = None):
        sel = {"backends": args.backends, "formats": args.formats, "precisions": args.precisions,
               "devices": args.devices, "batch_sizes": batch, **(only or {})}
        with RichProgress(args.quiet) as prog:
            _log_bytecode(prog, pyc)
            return compare(
                args.model, weights=args.weights, **sel, threads=args.threads,
                warmup_iters=args.warmup, min_iters=args.min_iters, min_time_s=args.min_time, **_loop_args(args),
                parity_samples=args.parity_samples, cell_timeout_s=args.cell_timeout, cache_dir=args.cache_dir,
                use_cache=not args.no_cache, seed=args.seed, command=["infer-compare", *argv], progress=prog,
                on_row=into, runner_options=runner_options_from_args(args),
                parity_every_batch=args.parity_every_batch, input_shape=args.input_shape,
                data=data_options(args), artifacts=args.artifact, output_kinds=args.output_kind)

    try:
        rep = measure(saver)
    except KeyboardInterrupt:
        saver.interrupted()
        raise
    code = _finish(rep, saver)
    if gate is not None:
        from .gate import judge_run

        if not judge_run(args, gate, rep, saver.out, measure):
            code = 1
    return code


def _ran_elsewhere(rep, skipped) -> bool:
    """The skipped row's backend measured the same precision and device (and batch size, where the skip has
    one) in another format (OpenVINO's float rows run its own IR, not the ONNX file): nothing was left out."""
    return any(r.backend == skipped.backend and r.precision == skipped.precision and r.device == skipped.device
               and skipped.batch_size in (None, r.batch_size) and r.status in ("ok", "parity_failed")
               for r in rep.rows)


def requested_not_run(rep) -> list:
    """Rows that count as failures because the user asked for that backend by name.

    A skip is not a failure unless the user asked for that backend explicitly: then a
    failed row, a skip for missing software, a skip for an absent device or an
    unsupported precision that the user also named, or no measured row at all, is.
    """
    req = rep.settings.requested
    asked = set(req.get("backends") or ())
    if not asked:
        return []
    devs, precs = set(req.get("devices") or ()), set(req.get("precisions") or ())
    bad = []
    for r in rep.rows:
        if r.backend not in asked:
            continue
        if r.status in ("run_failed", "export_failed"):
            bad.append(r)
        elif r.status == "skipped" and (
            r.skip_kind == "unavailable"
            or r.skip_kind == "no_device" and (r.device in devs or r.device.split(":")[0] in devs)
            or r.skip_kind == "unsupported" and r.precision in precs and not _ran_elsewhere(rep, r)
        ):
            bad.append(r)
    for name in asked:
        if not any(r.backend == name and r.status in ("ok", "parity_failed") for r in rep.rows):
            bad += [r for r in rep.rows if r.backend == name and r not in bad]
    return bad


def _gate_setup(args):
    """(baseline Reports, rules or None for the defaults) for --baseline, or None. Raises
    UsageError/SchemaError/EnvironmentMismatch before anything is measured."""
    if not args.baseline:
        for flag, given in (("--fail-on", args.fail_on), ("--allow-missing", args.allow_missing),
                            ("--allow-condition-change", args.allow_condition_change)):
            if given:
                raise UsageError(f"{flag} needs --baseline FILE (a results.json to compare with)")
        return None
    from .. import env as envmod
    from ..regress import check_complete, check_environment, parse_rules
    from ..regress.check import load_baselines

    rules = None if args.fail_on is None else parse_rules(args.fail_on)
    baselines = [rep for _, rep in load_baselines(args.baseline)]
    here = envmod.collect()
    for b in baselines:
        check_complete(None, b, args.allow_incomplete)
        check_environment(b.environment, here, args.allow_environment_change)
    return baselines, rules


@cleans_up
def cmd_export(args, argv: list[str]) -> int:
    from ..bundle import export_bundle

    if args.weights not in ("auto", "random") and not os.path.isfile(args.weights):
        raise UsageError(f"weights file not found: {args.weights}")
    if args.calibration_samples is not None and args.calibration_samples < 1:
        raise UsageError(f"--calibration-samples must be >= 1, got {args.calibration_samples}")
    out = Path(args.out)
    try:  # an unusable bundle folder is one line before any work
        _make_dir(out)
        probe = out.parent / f".{out.name}.write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"bundle directory {out} is not writable: {e.strerror or e}") from None
    keep_bytecode(args)
    try:
        with RichProgress(args.quiet) as prog:
            man = export_bundle(args.model, args.out, weights=args.weights, formats=args.formats,
                            precisions=args.precisions, parity_samples=args.parity_samples,
                            calibration_samples=args.calibration_samples, max_batch=args.max_batch, seed=args.seed,
                            cache_dir=args.cache_dir, use_cache=not args.no_cache,
                            command=["infer-compare", "export", *argv], progress=prog,
                            export_timeout_s=args.export_timeout, runner_options=runner_options_from_args(args),
                            output_kinds=args.output_kind)
    except OSError as e:  # disk full, permissions: one line, and the half-written bundle was removed
        raise UsageError(f"cannot write the bundle {out}: {e.strerror or e}"
                         + (f" ({e.filename})" if getattr(e, "filename", None) else "")) from None
    size = sum(m["size"] for m in man["files"].values())
    print(f"bundle {args.out}: {len(man['artifacts'])} artifacts, {len(man['files'])} files, {size / 2**20:.1f} MiB")
    for a in man["artifacts"]:
        print(f"  {a['format']} {a['precision']}: {a['path']}")
    for d in man["deferred"]:
        print(f"  {d['format']} {d['precision']}: built on the device from {' '.join(d['source'])}"
              + (f" ({d['note']})" if d.get("note") else ""))
    for d in man["not_built"]:
        print(f"  {d['format']} {d['precision']}: not in the bundle ({d['reason']})")
    print(f"on the device: infer-compare run {args.out}")
    return 0


@cleans_up
def cmd_run(args, argv: list[str]) -> int:
    from ..api import parse_batch_sizes
    from ..bundle import run_bundle, verify

    refuse_build_flags(args)
    if args.verify_only:
        v = verify(args.bundle)
        print(f"bundle {args.bundle}: ok ({v.n_files} files, {v.n_bytes / 2**20:.1f} MiB, sha256 verified; model "
              f"{v.manifest['model'].get('name')})")
        return 0
    batch = parse_batch_sizes(args.batch_sizes) if args.batch_sizes is not None else None
    args.model = f"{Path(args.bundle).resolve().name}"
    saver = Saver(output_dir(args))
    pyc = keep_bytecode(args)
    try:
        with RichProgress(args.quiet) as prog:
            _log_bytecode(prog, pyc)
            rep = run_bundle(args.bundle, backends=args.backends, formats=args.formats, precisions=args.precisions,
                             devices=args.devices, batch_sizes=batch, threads=args.threads, warmup_iters=args.warmup,
                             min_iters=args.min_iters, min_time_s=args.min_time, cell_timeout_s=args.cell_timeout,
                             **_loop_args(args), cache_dir=args.cache_dir, use_cache=not args.no_cache,
                             command=["infer-compare", "run", *argv], progress=prog, on_row=saver,
                             parity_every_batch=args.parity_every_batch, runner_options=runner_options_from_args(args),
                             output_kinds=args.output_kind)
    except KeyboardInterrupt:
        saver.interrupted()
        raise
    return _finish(rep, saver)


def exit_code(rep) -> int:
    code = 0
    failed = [r for r in rep.rows if r.status == "parity_failed"]
    if failed:
        print(f"infer-compare: {len(failed)} row(s) outside parity tolerance", file=sys.stderr)
        code = 1
    bad = requested_not_run(rep)
    if bad:
        print(f"infer-compare: {len(bad)} row(s) of explicitly requested backends did not run "
              f"({', '.join(sorted({r.backend for r in bad}))}): see the skipped/failed rows above", file=sys.stderr)
        code = 1
    return code
