"""Where a command's results go and what it exits with: the output folder (made and checked before any
work, removed again when left empty), the saver called after each row, the final write in every format
(to a temporary folder when the output folder fails), the exit status, and bytecode kept under the cache."""

from __future__ import annotations

import functools
import re
import sys
import time
from pathlib import Path

from infer_compare.base import report_files
from infer_compare.base.diskfull import DISK_FULL, is_disk_full
from infer_compare.base.report_files import writable_dir


def keep_bytecode(args) -> str | None:
    """Before the heavy imports: bytecode under the tool's cache where the installation keeps none
    (host/pycache.py; not with --no-cache); the folder, or None."""
    # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
    from infer_compare.base.cache import default_root

    # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
    from infer_compare.host.pycache import keep_bytecode as keep

    if getattr(args, "no_cache", False):
        return None
    return keep(str(Path(args.cache_dir).expanduser() if args.cache_dir else default_root()))


def log_bytecode(prog, prefix: str | None) -> None:
    if prefix:
        prog.log(f"the installation keeps no bytecode: Python's is kept in {prefix} "
                 "(INFER_COMPARE_PYCACHE=0: off)")


def output_dir(args) -> Path:
    """The result folder, created (with its missing parents, which ``created_dirs`` remembers for
    ``remove_if_empty``) and checked writable before any work; a new one beside it where it holds an
    earlier run's results (``kept_apart``)."""
    if args.output_dir:
        out = Path(args.output_dir)
    else:
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(str(args.model).split(":")[-1]).stem) or "model"
        out = Path("infer-compare-results") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    out = kept_apart(out, getattr(args, "overwrite", False))
    return writable_dir(out, make_dir)


# what a run leaves in its folder: results.<format>, and the gates' verdict
EARLIER_RESULTS = ("results.json", "results.md", "results.csv", "results.html", "gate.json")


def kept_apart(out: Path, overwrite: bool) -> Path:
    """``out``; or, where it holds an earlier run's results and not ``overwrite``, a new dated folder beside
    it (``results/`` -> ``results-2026-12-01T2215/``, then ``-2``, ``-3`` within one minute), said in one
    line: a second run into one folder never replaces the first one's results."""
    found = [f for f in EARLIER_RESULTS if (out / f).exists()]
    if not found:
        return out
    if overwrite:
        print(f"infer-compare: replacing the earlier results in {out}/ ({', '.join(found)}; --overwrite)",
              file=sys.stderr)
        return out
    base = out if out.name else out.resolve()
    stamp = time.strftime("%Y-%m-%dT%H%M")
    new, k = base.with_name(f"{base.name}-{stamp}"), 2
    while new.exists():
        new, k = base.with_name(f"{base.name}-{stamp}-{k}"), k + 1
    print(f"infer-compare: {out}/ holds an earlier run's results (kept): this run's go to {new}/ "
          "(--overwrite replaces them)", file=sys.stderr)
    return new


_created: list[Path] = []


def make_dir(out: Path) -> None:
    """``out.mkdir(parents=True)``, remembering which folders it made."""
    new = [p for p in (out, *out.parents) if not p.exists()]
    out.mkdir(parents=True, exist_ok=True)
    _created.extend(new)


def remove_if_empty() -> None:
    """The folders ``make_dir`` made that are still empty (a usage error, a crash before any row was
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


class Saver(report_files.Saver):
    """The result folder's writer (base/report_files.py, shared with ``compare(output_dir=...)``), which
    loads the renderers it dispatches to only when it writes, so that the CLI's start stays light."""

    def write(self, rep) -> dict:
        # deferred: the CLI's start (--help, env, report) stays light without it (+118 modules, numpy too)
        import infer_compare.report  # noqa: F401  (registers the Markdown, CSV and HTML renderers)

        return super().write(rep)


def finish(rep, saver: Saver) -> int:
    # deferred: the CLI's start (--help, env, report) stays light without it (+5 modules)
    from infer_compare.report.terminal import print_report

    paths = saver.write(rep)
    print_report(rep)
    print(f"results: {', '.join(str(p) for p in paths.values())}")
    return exit_code(rep)


def _ran_elsewhere(rep, skipped) -> bool:
    """The skipped row's backend measured the same precision and device (and batch size, where the skip has
    one) in another format (OpenVINO's float rows run its own IR, not the ONNX file): nothing was left out."""
    return any(r.backend == skipped.backend and r.precision == skipped.precision
               and r.device == skipped.device
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


NOT_CLEAN_EXIT = 3  # rows measured disturbed, nothing else wrong: the "not judged" of the exit codes


def exit_code(rep) -> int:
    """0 ok; 1 no row measured, a parity failure, an artifact the disk could not hold, a requested backend
    that did not run; else 3 where a row was measured disturbed (other processes used the cores)."""
    code = 0
    if not any(r.status in ("ok", "parity_failed") for r in rep.rows):
        print(f"infer-compare: no row was measured ({_none_measured(rep)}): nothing was compared",
              file=sys.stderr)
        code = 1
    failed = [r for r in rep.rows if r.status == "parity_failed"]
    if failed:
        print(f"infer-compare: {len(failed)} row(s) outside parity tolerance", file=sys.stderr)
        code = 1
    full = [r for r in rep.rows if r.status == "export_failed" and is_disk_full(r.reason)]
    if full:
        print(f"infer-compare: {len(full)} row(s) could not be built: {DISK_FULL}; free space and run again",
              file=sys.stderr)
        code = 1
    bad = requested_not_run(rep)
    if bad:
        print(f"infer-compare: {len(bad)} row(s) of explicitly requested backends did not run "
              f"({', '.join(sorted({r.backend for r in bad}))}): see the skipped/failed rows above",
              file=sys.stderr)
        code = 1
    disturbed = [r for r in rep.rows if r.status in ("ok", "parity_failed") and r.latency is not None
                 and r.latency.disturbed]
    if disturbed:
        print(f"infer-compare: {len(disturbed)} row(s) measured while other processes used the cores "
              "(disturbed, their notes say how much): not a clean measurement", file=sys.stderr)
        code = code or NOT_CLEAN_EXIT
    return code


def _none_measured(rep) -> str:
    """Why a run measured no row: '1 skipped, 2 failed' (the first reason), or that none was selected."""
    if not rep.rows:
        return "no configuration was selected or available"
    counts: dict[str, int] = {}
    for r in rep.rows:
        key = "skipped" if r.status == "skipped" else "failed"
        counts[key] = counts.get(key, 0) + 1
    first = next((r for r in rep.rows if r.reason), None)
    said = ", ".join(f"{n} {k}" for k, n in counts.items())
    return said + (f"; e.g. {first.label}: {first.reason}" if first is not None else "")
