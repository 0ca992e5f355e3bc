"""Argument parsing only; the work is in api.py.

    infer-compare --model resnet50 [options]     compare every backend present
    infer-compare env                            list every backend: available or why not
    infer-compare report RESULTS.json --format html|md|csv|json [--out FILE]   re-render saved results
    infer-compare diff BASELINE.json CURRENT.json [--fail-on RULE ...]       the regression gate
    infer-compare export --model M --out DIR      a bundle to measure on another machine (docs/edge.md)
    infer-compare run DIR                         measure a bundle here (no torch needed)
    infer-compare merge R1.json R2.json --out DIR one comparison across machines

Exit codes: 0 ok, 1 parity failure or regression (or an explicitly requested backend
skipped or failed), 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from . import __version__
from .errors import InferCompareError, UsageError

SUBCOMMANDS = ("env", "compare", "report", "diff", "export", "run", "merge")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        self.print_usage(sys.stderr)
        raise UsageError(message)


def _csv(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def _positive_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not a number") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{s!r} must be >= 0")
    return v


def _add_how_to_measure(p: argparse.ArgumentParser):
    """The measuring options shared by the comparison and `run`; returns the group for more."""
    m = p.add_argument_group("how to measure")
    m.add_argument("--batch-sizes", "-b", metavar="LIST",
                   help="comma-separated batch sizes (default: 1,8 on CPU; 1,32,256 on CUDA; 1 on Edge TPU)")
    m.add_argument("--threads", type=int, help="CPU threads per backend (default: physical cores)")
    m.add_argument("--warmup", type=int, default=2, metavar="N", help="warm-up calls before timing (default 2)")
    m.add_argument("--min-iters", type=int, default=5, metavar="N", help="measure at least N calls (default 5)")
    m.add_argument("--min-time", type=_positive_float, default=1.0, metavar="S",
                   help="and at least S seconds (default 1.0)")
    m.add_argument("--parity-every-batch", action="store_true",
                   help="recompute parity in every batch-size cell (default: once per configuration, at its "
                        "largest batch, shared by the others)")
    m.add_argument("--cell-timeout", type=_positive_float, default=600.0, metavar="S",
                   help="kill a backend process after S seconds and record a failed row (default 600)")
    return m


def _add_compare_args(p: argparse.ArgumentParser) -> None:
    from .formats import FORMATS, PRECISIONS, RUNNERS

    g = p.add_argument_group("what to measure")
    g.add_argument("--model", "-m", required=True,
                   help="resnet50, mobilenet_v2, mobilenet_v3_large, lenet5, or any torchvision classification model")
    g.add_argument("--weights", default="auto", metavar="auto|random|PATH",
                   help="auto: pretrained weights from the local torch hub cache, else seeded random weights "
                        "(LeNet-5: trained on the bundled digits); random; or a state-dict file (default: auto)")
    g.add_argument("--backends", type=_csv, metavar="LIST",
                   help=f"comma-separated runners (default: all): {', '.join(r for r in RUNNERS if r != 'null')}")
    g.add_argument("--formats", type=_csv, metavar="LIST", help=f"comma-separated formats (default: all): {', '.join(FORMATS)}")
    g.add_argument("--precisions", type=_csv, metavar="LIST",
                   help=f"comma-separated precisions (default: all): {', '.join(PRECISIONS)}")
    g.add_argument("--device", type=_csv, metavar="LIST", dest="devices",
                   help="cpu, cuda, cuda:N, edgetpu (default: every device present)")
    m = _add_how_to_measure(p)
    m.add_argument("--parity-samples", type=int, metavar="N",
                   help="inputs compared with the reference (default: 32 photos; LeNet: all 450 test digits)")
    m.add_argument("--seed", type=int, default=0, help="seed for random weights and crops (default 0)")
    _add_gpu_args(p)
    o = p.add_argument_group("output and cache")
    o.add_argument("--output-dir", "-o", metavar="DIR",
                   help="where results.json, .md, .csv and .html go (default ./infer-compare-results/<model>-<time>/)")
    o.add_argument("--cache-dir", metavar="DIR", help="artifact cache (default ~/.cache/infer-compare or $INFER_COMPARE_CACHE)")
    o.add_argument("--no-cache", action="store_true", help="rebuild every artifact (the cache is still written)")
    o.add_argument("--quiet", "-q", action="store_true", help="no progress display")
    _add_gate_args(p.add_argument_group("regression gate (see docs/reports-and-regression.md)"), with_baseline=True)


def _add_gate_args(g, with_baseline: bool) -> None:
    if with_baseline:
        g.add_argument("--baseline", metavar="FILE", help="a results.json to compare this run with after measuring")
    g.add_argument("--fail-on", action="append", default=[], metavar="RULE",
                   help="exit 1 when a row gets worse than RULE, e.g. p50:+10%%, throughput:-5%%, accuracy:-0.5 "
                        "(repeatable; metrics: p50 p90 p95 p99 mean min max throughput accuracy top1 top5 cosine "
                        "rel_err load memory size)")
    g.add_argument("--allow-environment-change", action="store_true",
                   help="compare with a baseline from another machine or other library versions")


def _add_gpu_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("GPU (CUDA) rows")
    g.add_argument("--cuda-graphs", action="store_true",
                   help="PyTorch rows replay a captured CUDA graph; pytorch-compile uses mode reduce-overhead")
    g.add_argument("--compile-mode", metavar="MODE",
                   help="torch.compile mode for the pytorch-compile rows (default: default; max-autotune takes many "
                        "minutes per shape)")
    g.add_argument("--no-channels-last", action="store_true", help="PyTorch CUDA rows keep NCHW (default: channels_last)")
    g.add_argument("--ort-no-io-binding", action="store_true",
                   help="ONNX Runtime CUDA rows pass numpy arrays (host copies inside each timed call)")
    g.add_argument("--tensorrt-workspace", type=int, metavar="MIB", help="TensorRT builder workspace (default 4096 MiB)")
    g.add_argument("--tensorrt-io", choices=("host", "device"),
                   help="TensorRT timed call with host copies (default, as trtexec) or device-resident buffers")


def gpu_runner_options(args) -> dict:
    """The GPU flags as compare(runner_options=...)."""
    opts: dict = {}
    torch_opts = {}
    if args.cuda_graphs:
        torch_opts["cuda_graphs"] = True
    if args.no_channels_last:
        torch_opts["channels_last"] = False
    if torch_opts:
        opts["pytorch"] = dict(torch_opts)
        opts["pytorch-compile"] = dict(torch_opts)
    if args.compile_mode:
        opts.setdefault("pytorch-compile", {})["compile_mode"] = args.compile_mode
    if args.ort_no_io_binding:
        opts["onnxruntime"] = {"io_binding": False}
    if args.tensorrt_workspace:
        opts["tensorrt"] = {"tensorrt_workspace_mib": int(args.tensorrt_workspace)}
        opts["onnxruntime-trt"] = {"tensorrt_workspace_mib": int(args.tensorrt_workspace)}
    if args.tensorrt_io:
        opts.setdefault("tensorrt", {})["io"] = args.tensorrt_io
    return opts


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="infer-compare",
        description="Export a vision model to ONNX, OpenVINO IR, TensorRT and TFLite/Edge TPU, run each with its "
                    "runtime, measure latency and throughput, and check every output against PyTorch.",
        epilog="Subcommands: 'infer-compare env' lists every backend and why it is (un)available; "
               "'infer-compare report RESULTS.json --format html' re-renders saved results; "
               "'infer-compare diff BASELINE.json CURRENT.json --fail-on p50:+10%' is the regression gate. "
               "Exit codes: 0 ok, 1 parity failure, regression, or a requested backend did not run, 2 usage error.",
    )
    p.add_argument("--version", action="version", version=f"infer-compare {__version__}")
    _add_compare_args(p)
    return p


def build_env_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="infer-compare env", description="List every backend: available or not, why, version, "
                                                      "devices and install hint; and the machine.")
    p.add_argument("--json", action="store_true", help="print JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
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
        if argv and argv[0] == "merge":
            return cmd_merge(build_merge_parser().parse_args(argv[1:]), argv[1:])
        if argv and argv[0] == "compare":
            argv = argv[1:]
        return cmd_compare(build_parser().parse_args(argv), argv)
    except InferCompareError as e:
        hint = getattr(e, "hint", "")
        print(f"infer-compare: error: {e}" + (f" (install: {hint})" if hint else ""), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("infer-compare: interrupted", file=sys.stderr)
        return 130


# ------------------------------------------------------------------------------ env


def cmd_env(args) -> int:
    from . import env as envmod
    from .formats import FORMATS, RUNNERS, load_impl
    from .records import Availability

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


# -------------------------------------------------------------------------- compare


def _output_dir(args) -> Path:
    if args.output_dir:
        out = Path(args.output_dir)
    else:
        out = Path("infer-compare-results") / f"{args.model}-{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"output directory {out} is not writable: {e.strerror or e}") from None
    return out


def _esc(s: str) -> str:
    from rich.markup import escape

    return escape(s)


class _RichProgress:
    """Progress display on stderr: a spinner/bar while exporting and measuring, log lines above it."""

    def __init__(self, quiet: bool):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self.con = Console(stderr=True)
        self.quiet = quiet
        self.p = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=self.con, transient=True, disable=quiet)
        self.task_id = None

    def __enter__(self):
        self.p.start()
        return self

    def __exit__(self, *exc):
        self.p.stop()

    def log(self, msg: str) -> None:
        if not self.quiet:
            self.p.console.print(f"[dim]·[/] {_esc(msg)}")

    def warn(self, msg: str) -> None:
        self.p.console.print(f"[bold yellow]WARNING:[/] {_esc(msg)}")

    def task(self, msg: str, total: int | None = None) -> None:
        if self.task_id is not None:
            self.p.remove_task(self.task_id)
        self.task_id = self.p.add_task(msg, total=total)
        self._done = 0
        self.log(msg)

    def advance(self, msg: str | None = None) -> None:
        """Called as each measured cell starts: shows it and how many are done."""
        if self.task_id is None:
            return
        done = getattr(self, "_done", 0)
        self.p.update(self.task_id, description=f"measuring {msg}" if msg else None, completed=done)
        self._done = done + 1

    def row(self, r) -> None:
        if self.quiet:
            return
        if r.status == "skipped":
            return
        if r.latency is not None:
            extra = f", cos {r.parity.cosine_mean:.5f}" if r.parity else ""
            col = "green" if r.status == "ok" else "red"
            self.p.console.print(f"  [{col}]{r.status}[/] {r.label}: p50 {r.latency.p50_ms:.3f} ms, "
                                 f"{r.throughput:.1f} img/s{extra}")
        else:
            self.p.console.print(f"  [red]{r.status}[/] {r.label}: {_esc(r.reason)}")


def cmd_compare(args, argv: list[str]) -> int:
    from .api import compare, parse_batch_sizes
    from .report import write_all
    from .report.terminal import print_report

    batch = parse_batch_sizes(args.batch_sizes) if args.batch_sizes else None  # fail before any work
    if args.weights not in ("auto", "random") and not os.path.isfile(args.weights):
        raise UsageError(f"weights file not found: {args.weights}")
    gate = _gate_setup(args)  # a bad baseline, rule or environment fails before any work
    out = _output_dir(args)
    partial = out / "results.json"
    command = ["infer-compare", *argv]

    def save_partial(rep):
        try:
            rep.save(partial)
        except OSError:
            pass

    with _RichProgress(args.quiet) as prog:
        rep = compare(
            args.model, weights=args.weights, backends=args.backends, formats=args.formats,
            precisions=args.precisions, devices=args.devices, batch_sizes=batch, threads=args.threads,
            warmup_iters=args.warmup, min_iters=args.min_iters, min_time_s=args.min_time,
            parity_samples=args.parity_samples, cell_timeout_s=args.cell_timeout, cache_dir=args.cache_dir,
            use_cache=not args.no_cache, seed=args.seed, command=command, progress=prog, on_row=save_partial,
            runner_options=gpu_runner_options(args), parity_every_batch=args.parity_every_batch,
        )
    try:
        paths = write_all(rep, out)
    except OSError as e:
        import tempfile

        fallback = Path(tempfile.mkdtemp(prefix="infer-compare-results-"))
        paths = write_all(rep, fallback)
        print(f"infer-compare: could not write to {out} ({e}); results saved in {fallback}", file=sys.stderr)
    print_report(rep)
    print(f"results: {', '.join(str(p) for p in paths.values())}")
    code = _exit_code(rep)
    if gate is not None:
        from .regress import check_regression, print_result

        baseline, rules = gate
        result = check_regression(rep, baseline, rules, allow_environment_change=args.allow_environment_change)
        print_result(result)
        if not result.passed:
            code = 1
    return code


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
            or r.skip_kind == "unsupported" and r.precision in precs
        ):
            bad.append(r)
    for name in asked:
        if not any(r.backend == name and r.status in ("ok", "parity_failed") for r in rep.rows):
            bad += [r for r in rep.rows if r.backend == name and r not in bad]
    return bad


# ------------------------------------------------------------------ report and diff


def _gate_setup(args):
    """(baseline Report, rules) for --baseline, or None. Raises UsageError/SchemaError/EnvironmentMismatch."""
    if not args.baseline:
        if args.fail_on:
            raise UsageError("--fail-on needs --baseline FILE (a results.json to compare with)")
        return None
    from . import env as envmod
    from .records import load_report
    from .regress import check_environment, parse_rules

    rules = parse_rules(args.fail_on)
    baseline = load_report(args.baseline)
    check_environment(baseline.environment, envmod.collect(), args.allow_environment_change)
    return baseline, rules


def build_report_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="infer-compare report", description="Re-render a saved results.json as HTML, Markdown, CSV or "
                                                         "JSON (written by this version of the tool).")
    p.add_argument("results", metavar="RESULTS.json")
    p.add_argument("--format", "-f", choices=("html", "md", "csv", "json"), default="html",
                   help="output format (default html)")
    p.add_argument("--out", "-o", metavar="FILE", help="write here instead of standard output")
    return p


def cmd_report(args) -> int:
    from .records import load_report
    from .report import render

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


def build_diff_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="infer-compare diff",
                description="Compare two results.json files row by row (matched by backend/format/precision/device/"
                            "batch) and exit 1 when a --fail-on rule is broken or an ok row now fails. A change "
                            "within the measured run-to-run spread (bootstrap over the raw samples) is not a "
                            "regression.",
                epilog="Rules: METRIC:[+|-]NUMBER[%], e.g. p50:+10%, throughput:-5%, accuracy:-0.5 (percentage "
                       "points). Exit codes: 0 no regression, 1 regression, 2 usage error (incl. a baseline from "
                       "another environment without --allow-environment-change).")
    p.add_argument("baseline", metavar="BASELINE.json")
    p.add_argument("current", metavar="CURRENT.json")
    _add_gate_args(p, with_baseline=False)
    p.add_argument("--confidence", type=float, default=0.95, metavar="C",
                   help="confidence level of the noise intervals (default 0.95)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--all", action="store_true", help="also list rows skipped in both runs")
    return p


def cmd_diff(args) -> int:
    from .regress import check_regression, print_result

    result = check_regression(args.current, args.baseline, args.fail_on,
                              allow_environment_change=args.allow_environment_change, confidence=args.confidence)
    if args.json:
        import json

        print(json.dumps(result.to_dict(), indent=1))
    else:
        print_result(result, show_all=args.all)
    return 0 if result.passed else 1


# ------------------------------------------------------------- export, run, merge (edge)


def _add_measure_args(p: argparse.ArgumentParser) -> None:
    """What/how to measure, for `run` (the bundle fixes the model, weights and inputs)."""
    from .formats import FORMATS, PRECISIONS, RUNNERS

    g = p.add_argument_group("what to measure (default: everything the bundle carries, on every device present)")
    g.add_argument("--backends", type=_csv, metavar="LIST",
                   help=f"comma-separated runners: {', '.join(r for r in RUNNERS if r != 'null')}")
    g.add_argument("--formats", type=_csv, metavar="LIST", help=f"comma-separated formats: {', '.join(FORMATS)}")
    g.add_argument("--precisions", type=_csv, metavar="LIST", help=f"comma-separated precisions: {', '.join(PRECISIONS)}")
    g.add_argument("--device", type=_csv, metavar="LIST", dest="devices", help="cpu, cuda, cuda:N, edgetpu")
    _add_how_to_measure(p)


def build_export_parser() -> argparse.ArgumentParser:
    from .bundle import DEFAULT_MAX_BATCH
    from .formats import FORMATS, PRECISIONS

    p = _Parser(prog="infer-compare export",
                description="Export a model to a bundle for another machine (a Jetson, a Coral host): the artifacts, "
                            "the reference inputs and PyTorch outputs, labels, calibration inputs and a manifest of "
                            "sha256 hashes. TensorRT engines (and formats whose exporter is missing here) travel as "
                            "their source and are built on the device. Run it there with 'infer-compare run DIR'.")
    p.add_argument("--model", "-m", required=True, help="resnet50, mobilenet_v2, mobilenet_v3_large, lenet5, ...")
    p.add_argument("--weights", default="auto", metavar="auto|random|PATH", help="as for a comparison (default auto)")
    p.add_argument("--formats", type=_csv, metavar="LIST", help=f"comma-separated formats (default all): {', '.join(FORMATS)}")
    p.add_argument("--precisions", type=_csv, metavar="LIST",
                   help=f"comma-separated precisions (default all): {', '.join(PRECISIONS)}")
    p.add_argument("--out", "-o", required=True, metavar="DIR", help="bundle directory (absent or empty)")
    p.add_argument("--max-batch", type=int, default=DEFAULT_MAX_BATCH, metavar="N",
                   help=f"largest batch the artifacts must accept (default {DEFAULT_MAX_BATCH})")
    p.add_argument("--parity-samples", type=int, metavar="N",
                   help="reference inputs in the bundle (default: 32 photos; LeNet: all 450 test digits)")
    p.add_argument("--calibration-samples", type=int, metavar="N",
                   help="calibration inputs for int8 (default: 64 photos; LeNet: 200 digits)")
    p.add_argument("--seed", type=int, default=0, help="seed for random weights and crops (default 0)")
    p.add_argument("--cache-dir", metavar="DIR", help="artifact cache (default ~/.cache/infer-compare)")
    p.add_argument("--no-cache", action="store_true", help="rebuild every artifact")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress display")
    return p


def cmd_export(args, argv: list[str]) -> int:
    from .bundle import export_bundle

    if args.weights not in ("auto", "random") and not os.path.isfile(args.weights):
        raise UsageError(f"weights file not found: {args.weights}")
    if args.calibration_samples is not None and args.calibration_samples < 1:
        raise UsageError(f"--calibration-samples must be >= 1, got {args.calibration_samples}")
    with _RichProgress(args.quiet) as prog:
        man = export_bundle(args.model, args.out, weights=args.weights, formats=args.formats,
                            precisions=args.precisions, parity_samples=args.parity_samples,
                            calibration_samples=args.calibration_samples, max_batch=args.max_batch, seed=args.seed,
                            cache_dir=args.cache_dir, use_cache=not args.no_cache,
                            command=["infer-compare", "export", *argv], progress=prog)
    size = sum(m["size"] for m in man["files"].values())
    print(f"bundle {args.out}: {len(man['artifacts'])} artifacts, {len(man['files'])} files, {size / 2**20:.1f} MiB")
    for a in man["artifacts"]:
        print(f"  {a['format']} {a['precision']}: {a['path']}")
    for d in man["deferred"]:
        print(f"  {d['format']} {d['precision']}: built on the device from {' '.join(d['source'])}")
    for d in man["not_built"]:
        print(f"  {d['format']} {d['precision']}: not in the bundle ({d['reason']})")
    print(f"on the device: infer-compare run {args.out}")
    return 0


def build_run_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="infer-compare run",
                description="Measure a bundle written by 'infer-compare export' on this machine, without torch or "
                            "converters: verify its manifest and sha256 hashes, build what could not travel "
                            "(TensorRT engines, Edge TPU compile) where the tools are present, measure every backend "
                            "present, check parity against the bundle's PyTorch reference, and write the reports.",
                epilog="Exit codes: 0 ok, 1 parity failure or a requested backend did not run, 2 usage error "
                       "(including a bundle that fails verification).")
    p.add_argument("bundle", metavar="DIR")
    _add_measure_args(p)
    o = p.add_argument_group("output and cache")
    o.add_argument("--output-dir", "-o", metavar="DIR",
                   help="where the results go (default ./infer-compare-results/<bundle>-<time>/)")
    o.add_argument("--cache-dir", metavar="DIR", help="cache for artifacts built on this machine (TensorRT engines)")
    o.add_argument("--no-cache", action="store_true", help="rebuild what is built here")
    o.add_argument("--verify-only", action="store_true", help="verify the bundle and stop")
    o.add_argument("--quiet", "-q", action="store_true", help="no progress display")
    return p


def cmd_run(args, argv: list[str]) -> int:
    from .api import parse_batch_sizes
    from .bundle import run_bundle, verify
    from .report import write_all
    from .report.terminal import print_report

    if args.verify_only:
        v = verify(args.bundle)
        print(f"bundle {args.bundle}: ok ({v.n_files} files, {v.n_bytes / 2**20:.1f} MiB, sha256 verified; model "
              f"{v.manifest['model'].get('name')})")
        return 0
    batch = parse_batch_sizes(args.batch_sizes) if args.batch_sizes else None
    args.model = f"{Path(args.bundle).resolve().name}"
    out = _output_dir(args)
    partial = out / "results.json"

    def save_partial(rep):
        try:
            rep.save(partial)
        except OSError:
            pass

    with _RichProgress(args.quiet) as prog:
        rep = run_bundle(args.bundle, backends=args.backends, formats=args.formats, precisions=args.precisions,
                         devices=args.devices, batch_sizes=batch, threads=args.threads, warmup_iters=args.warmup,
                         min_iters=args.min_iters, min_time_s=args.min_time, cell_timeout_s=args.cell_timeout,
                         cache_dir=args.cache_dir, use_cache=not args.no_cache,
                         command=["infer-compare", "run", *argv], progress=prog, on_row=save_partial,
                         parity_every_batch=args.parity_every_batch)
    paths = write_all(rep, out)
    print_report(rep)
    print(f"results: {', '.join(str(p) for p in paths.values())}")
    return _exit_code(rep)


def _exit_code(rep) -> int:
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


def build_merge_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="infer-compare merge",
                description="Merge results.json files of one model from several machines into one comparison "
                            "(results.json/.md/.csv/.html); each row's device is prefixed by a machine label.")
    p.add_argument("results", nargs="+", metavar="RESULTS.json")
    p.add_argument("--out", "-o", required=True, metavar="DIR", help="output directory")
    p.add_argument("--label", action="append", default=[], metavar="NAME",
                   help="machine label of each file, in order (repeatable; default: Jetson/Pi model, GPU name or "
                        "CPU model)")
    return p


def cmd_merge(args, argv: list[str]) -> int:
    from .merge import merge_reports
    from .records import load_report
    from .report import write_all

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


if __name__ == "__main__":
    sys.exit(main())
