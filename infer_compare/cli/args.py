"""The argument parsers of every subcommand. Runner options are not written here: their
flags are generated from the runners' declarations (flags.py)."""

from __future__ import annotations

import argparse

from infer_compare.base.version import __version__
from infer_compare.catalog.formats import FORMATS, PRECISIONS, RUNNERS
from infer_compare.cli.data_args import add_data_args
from infer_compare.cli.flags import add_runner_option_flags
from infer_compare.cli.gate_args import add_gate_args
from infer_compare.cli.parser import (
    MAIN_DESCRIPTION,
    MAIN_EPILOG,
    MAIN_USAGE,
    Parser,
    RawDescriptionHelpFormatter,
)

_Parser = Parser  # the name the other parsers import


def add_output(p: _Parser, g, help: str, required: bool = False, file: bool = False, common=None) -> None:
    """Where a subcommand writes: ``-o/--output-dir DIR`` in every subcommand (``-o/--output FILE`` for the
    one that writes a single file, ``report``); the old spelling ``--out`` is still accepted, hidden.
    ``common``: the group of the most used options, where ``-o`` goes instead of ``g``."""
    flag, dest = ("--output", "output") if file else ("--output-dir", "output_dir")
    (common or g).add_argument(flag, "-o", dest=dest, metavar="FILE" if file else "DIR",
                               help=help + (" (required)" if required else ""))
    g.add_argument("--out", dest=dest, help=argparse.SUPPRESS)  # the spelling before 0.2
    if not file and p.prog != "infer-compare export":  # a bundle's folder is absent or empty: no flag
        g.add_argument("--overwrite", action="store_true",
                       help="replace the results an earlier run left in DIR (default: they are kept, and "
                            "this run writes to a new dated folder beside it; merge refuses)")
    if required:
        p.required_outputs = (*getattr(p, "required_outputs", ()), (dest, f"-o/{flag}"))


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


def _add_export_timeout(g) -> None:
    g.add_argument("--export-timeout", type=_positive_float, default=1800.0, metavar="S",
                   help="each export runs in its own process: kill it after S seconds and record an "
                        "export_failed row (default 1800)")


def _add_scenario_args(m) -> None:
    """The scenarios and the GPU timing policy (the comparison and `run`)."""
    m.add_argument("--scenario", choices=("latency", "throughput", "both"), default="latency",
                   help="latency: one call after another (default); throughput: each runtime's own "
                        "concurrency (OpenVINO async requests with the THROUGHPUT hint, concurrent ONNX "
                        "Runtime runs, several LiteRT interpreters, CUDA streams) for the cell's --max-time, "
                        "img/s and the latency under that load; both: each batch size in "
                        "both, rows of their own")
    m.add_argument("--concurrency", type=int, default=0, metavar="N",
                   help="throughput scenario: requests in flight (default 0: each runtime's own choice: "
                        "OpenVINO's optimal number of requests, one per CPU thread "
                        "elsewhere, 2 CUDA streams)")
    m.add_argument("--gpus", choices=("spread", "every", "sequential"), default=None,
                   help="several GPUs: spread (default): GPU configurations measured at the same time, each "
                        "once per GPU model on whichever GPU of that model is free; every: each on every "
                        "GPU, the GPUs at the same time; sequential: one after another on "
                        "every GPU (docs/gpu.md)")
    m.add_argument("--cpu-rows", choices=("auto", "after", "beside"), default=None,
                   help="on a host with GPUs: beside: the CPU configurations at the same time as the GPU "
                        "ones, still one at a time, on cores of their own (all but 4 per GPU) with that many "
                        "threads; after: after the GPU ones, one at a time, on every core; auto (default): "
                        "beside where that leaves them at least 3/4 of the CPUs (and the --threads asked "
                        "for), after otherwise (docs/gpu.md)")
    m.add_argument("--io", choices=("device", "host"), default=None,
                   help="GPU rows, every runner alike: device (default): input and output stay on the GPU, "
                        "copied before and after timing; host: the host->device and device->host copies "
                        "inside each timed call (--ort-no-io-binding and --tensorrt-io are aliases)")


def _add_how_to_measure(p: argparse.ArgumentParser, common=None):
    """The measuring options shared by the comparison and `run`; returns the group for more. ``common``: the
    group of the most used options, where --batch-sizes and --max-time go."""
    m = p.add_argument_group("how to measure")
    (common or m).add_argument("--batch-sizes", "-b", metavar="LIST",
                               help="comma-separated batch sizes (default: 1,8 on CPU; 1,32,256 on CUDA; "
                                    "1 on Edge TPU)")
    m.add_argument("--threads", type=int, help="CPU threads per backend (default: physical cores)")
    m.add_argument("--warmup", type=int, default=2, metavar="N",
                   help="warm-up calls after the cold first call, which is timed on its own (default 2)")
    m.add_argument("--warmup-time", type=_positive_float, default=0.2, metavar="S",
                   help="and warm up for at least S seconds (default 0.2)")
    m.add_argument("--target-ci", type=_positive_float, default=0.02, metavar="F",
                   help="measure until the 95%% interval of the p50, from the spread between its windows, "
                        "is within F of it (default 0.02 = 2%%; 0: no target, stop at --min-iters and "
                        "--min-time)")
    m.add_argument("--min-iters", type=int, default=5, metavar="N",
                   help="measure at least N calls (default 5)")
    m.add_argument("--min-time", type=_positive_float, default=0.2, metavar="S",
                   help="and at least S seconds (default 0.2), up to 100,000 calls (a row's "
                        "loop.stopped_by says which ended it)")
    (common or m).add_argument("--max-time", type=_positive_float, default=1.0, metavar="S",
                               help="each cell's budget: stop after S seconds even if the --target-ci is not "
                                    "met; the row says so (default 1; raise it for tighter "
                                    "figures on slow models)")
    m.add_argument("--passes", type=int, default=2, metavar="N",
                   help="measure each configuration N times, each in a fresh process, a whole pass of the "
                        "plan apart; the row's interval comes from how far the passes of every row moved "
                        "(default 2; --min-time and --max-time are shared out between them; 1: one process, "
                        "an interval that does not cover a rerun)")
    m.add_argument("--parity-every-batch", action="store_true",
                   help="compare all parity inputs at every batch size (default: all at the largest batch "
                        "size, a subset of at least 8 at the others)")
    _add_scenario_args(m)
    _add_export_timeout(m)
    m.add_argument("--cell-timeout", type=_positive_float, default=600.0, metavar="S",
                   help="kill a backend process that makes no progress on one batch size for S seconds and "
                        "record a failed row (default 600)")
    return m


def _add_compare_args(p: argparse.ArgumentParser, c) -> None:
    """The comparison's options; the ten most used in ``c`` (the first group of --help), the rest by topic."""
    g = p.add_argument_group("what to measure")
    c.add_argument("--model", "-m", required=True,
                   help="resnet50, mobilenet_v2, mobilenet_v3_large, lenet5, any torchvision classification "
                        "model, or your own: a .onnx file, a TorchScript (.pt) or ExportedProgram (.pt2) "
                        "file, a .tflite file (LiteRT on the CPU is its reference), or "
                        "package.module:callable returning a torch.nn.Module (docs/own-model.md)")
    g.add_argument("--weights", default="auto", metavar="auto|random|PATH",
                   help="auto: pretrained weights from the local torch hub cache, else seeded random weights "
                        "(LeNet-5: trained on the bundled digits); random; or a state-dict file (also for a "
                        "package.module:callable model) (default: auto)")
    c.add_argument("--input-shape", metavar="SHAPE",
                   help="the model's input shape where the model does not fix it: 1x3x224x224, or "
                        "name:1x3x224x224,name2:... for several inputs")
    g.add_argument("--input-value", action="append", default=[], metavar="NAME=VALUE",
                   help="feed input NAME this value in every sample (a number fills it, or comma-separated "
                        "numbers one per element), e.g. --input-value sr=16000; repeatable. Inputs with "
                        "neither --data nor a value get bundled photos (images) or seeded "
                        "random values (said loudly)")
    g.add_argument("--artifact", action="append", default=[], metavar="PATH",
                   help="also measure this pre-built file exactly as given (.onnx, .xml, .engine/.plan, "
                        ".tflite, *_edgetpu.tflite), against the same reference; repeatable")
    add_data_args(p, c)
    c.add_argument("--backends", type=_csv, metavar="LIST",
                   help="comma-separated runners (default: all): "
                        f"{', '.join(r for r in RUNNERS if r != 'null')}")
    c.add_argument("--formats", type=_csv, metavar="LIST",
                   help=f"comma-separated formats (default: all): {', '.join(FORMATS)}")
    c.add_argument("--precisions", type=_csv, metavar="LIST",
                   help=f"comma-separated precisions (default: all): {', '.join(PRECISIONS)}")
    c.add_argument("--device", type=_csv, metavar="LIST", dest="devices",
                   help="cpu, cuda, cuda:N, edgetpu (default: every device present)")
    m = _add_how_to_measure(p, c)
    m.add_argument("--parity-samples", type=int, metavar="N",
                   help="inputs compared with the reference (default: 32 photos; LeNet: all 450 test digits)")
    m.add_argument("--seed", type=int, default=0, help="seed for random weights and crops (default 0)")
    add_runner_option_flags(p)
    o = p.add_argument_group("output and cache")
    add_output(p, o, "where results.json, .md, .csv and .html go (default "
                     "./infer-compare-results/<model>-<time>/)", common=c)
    o.add_argument("--cache-dir", metavar="DIR",
                   help="artifact cache (default ~/.cache/infer-compare or $INFER_COMPARE_CACHE)")
    o.add_argument("--no-cache", action="store_true",
                   help="rebuild every artifact privately for this run "
                        "(the cache is neither read nor written)")
    o.add_argument("--quiet", "-q", action="store_true", help="no progress display")
    add_gate_args(p.add_argument_group("regression gate (see docs/gate.md)"), with_baseline=True)


def build_parser() -> argparse.ArgumentParser:
    """The comparison (no subcommand). Its --help: the subcommands, the ten most used options, the rest by
    topic, then -h and --version."""
    p = _Parser(prog="infer-compare", usage=MAIN_USAGE, description=MAIN_DESCRIPTION, add_help=False,
                formatter_class=RawDescriptionHelpFormatter, epilog=MAIN_EPILOG)
    common = p.add_argument_group("most used options (the others follow, by topic)")
    _add_compare_args(p, common)
    h = p.add_argument_group("help")
    h.add_argument("-h", "--help", action="help", help="show this help and exit")
    h.add_argument("--version", action="version", version=f"infer-compare {__version__}",
                   help="show the version and exit")
    return p


def build_env_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="infer-compare env", description="List every backend: available or not, why, version, "
                                                      "devices and install hint; and the machine.")
    p.add_argument("--json", action="store_true", help="print JSON")
    return p


def build_report_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="infer-compare report", description="Print a saved results.json as the terminal table, "
                                                         "or re-render it as HTML, Markdown, CSV or JSON.")
    p.add_argument("results", metavar="RESULTS.json", help="a results.json written by any subcommand")
    p.add_argument("--format", "-f", choices=("terminal", "html", "md", "csv", "json"), default="terminal",
                   help="output format (default: the terminal table; $COLUMNS sets its width when piped)")
    add_output(p, p, "write here instead of standard output", file=True)
    return p


def build_diff_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="infer-compare diff",
                description="Compare a run with its baseline row by row (matched by "
                            "backend/format/precision/device/batch) and exit 1 when a rule is broken, or a "
                            "row that was ok now fails, is missing, executes another precision or runs under "
                            "other threads. Timings compare each row at its fastest sustained level on "
                            "either side (--timing); give the current side as a directory to pool its runs "
                            "(OUTPUT_DIR with its confirm-K runs).",
                epilog="Rules: METRIC:[+|-]NUMBER[%], e.g. p50:+10%, throughput:-5%, accuracy:-0.5 "
                       "(percentage points). Exit codes: 0 no regression, 1 regression, 2 usage error (incl. "
                       "a baseline from another environment without --allow-environment-change, or an "
                       "incomplete file without --allow-incomplete).")
    p.add_argument("baseline", nargs="+", metavar="BASELINE", help="the baseline: one results.json, several "
                   "(runs of the same code, pooled), or directories of them")
    p.add_argument("current", metavar="CURRENT", help="the current run: a results.json, or a directory of "
                   "several runs of the same code (pooled: each row's best run is judged)")
    add_gate_args(p, with_baseline=False)
    p.add_argument("--confidence", type=float, default=0.95, metavar="C",
                   help="confidence level of the noise intervals (default 0.95)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--all", action="store_true", help="also list rows skipped in both runs")
    return p


def _add_measure_args(p: argparse.ArgumentParser) -> None:
    """What/how to measure, for `run` (the bundle fixes the model, weights and inputs)."""
    g = p.add_argument_group("what to measure (default: all the bundle carries, on every device present)")
    g.add_argument("--backends", type=_csv, metavar="LIST",
                   help=f"comma-separated runners: {', '.join(r for r in RUNNERS if r != 'null')}")
    g.add_argument("--formats", type=_csv, metavar="LIST",
                   help=f"comma-separated formats: {', '.join(FORMATS)}")
    g.add_argument("--precisions", type=_csv, metavar="LIST",
                   help=f"comma-separated precisions: {', '.join(PRECISIONS)}")
    g.add_argument("--device", type=_csv, metavar="LIST", dest="devices", help="cpu, cuda, cuda:N, edgetpu")
    _add_how_to_measure(p)
    add_runner_option_flags(p)


def build_export_parser() -> argparse.ArgumentParser:
    # deferred: the CLI's start (--help, env, report) stays light without it (+30 modules)
    from infer_compare.bundle import DEFAULT_MAX_BATCH

    p = _Parser(prog="infer-compare export",
                description="Export a model to a bundle for another machine (a Jetson, a Coral host): the "
                            "artifacts, the reference inputs and PyTorch outputs, labels, calibration inputs "
                            "and a manifest of sha256 hashes. TensorRT engines (and formats whose exporter "
                            "is missing here) travel as their source and are built on the device. Run it "
                            "there with 'infer-compare run DIR'.",
                epilog="Exit codes: 0 the bundle holds every artifact asked for (or leaves it to the "
                       "device to build); 1 one failed to build, or could not be built here although "
                       "--formats named its format (or, for a format this model cannot have, --precisions "
                       "its precision), or a full disk kept one out: the bundle is written without it, and "
                       "--allow-partial makes all but a full disk exit 0; 2 usage error. What the default "
                       "selection cannot have here (software missing, a format this model cannot have) is "
                       "left out with exit 0.")
    p.add_argument("--model", "-m", required=True,
                   help="as for a comparison: a built-in or torchvision name, or your own .onnx, .tflite, "
                        "TorchScript or .pt2 file, or package.module:callable (docs/own-model.md)")
    p.add_argument("--weights", default="auto", metavar="auto|random|PATH",
                   help="as for a comparison (default auto)")
    p.add_argument("--input-shape", metavar="SHAPE", help="as for a comparison: the sizes the model leaves "
                                                          "open (a .onnx file's dynamic dimensions); "
                                                          "recorded in the bundle")
    p.add_argument("--formats", type=_csv, metavar="LIST",
                   help=f"comma-separated formats (default all): {', '.join(FORMATS)}")
    p.add_argument("--precisions", type=_csv, metavar="LIST",
                   help=f"comma-separated precisions (default all): {', '.join(PRECISIONS)}")
    add_output(p, p, "bundle directory (absent or empty)", required=True)
    p.add_argument("--max-batch", type=int, default=DEFAULT_MAX_BATCH, metavar="N",
                   help=f"largest batch the artifacts must accept (default {DEFAULT_MAX_BATCH})")
    p.add_argument("--parity-samples", type=int, metavar="N",
                   help="reference inputs in the bundle (default: 32 photos; LeNet: all 450 test digits)")
    p.add_argument("--calibration-samples", type=int, metavar="N",
                   help="calibration inputs for int8 (default: 64 photos; LeNet: 200 digits)")
    p.add_argument("--seed", type=int, default=0, help="seed for random weights and crops (default 0)")
    p.add_argument("--cache-dir", metavar="DIR", help="artifact cache (default ~/.cache/infer-compare)")
    p.add_argument("--no-cache", action="store_true", help="rebuild every artifact")
    _add_export_timeout(p)
    p.add_argument("--output-kind", action="append", default=None, metavar="NAME=KIND", dest="output_kind",
                   help="what output NAME means (as for a comparison); recorded in the bundle, and "
                        "'run' judges parity by it")

    p.add_argument("--allow-partial", action="store_true",
                   help="exit 0 when artifacts asked for could not be built (still listed on stderr)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress display")
    add_runner_option_flags(p, builds_only=True)
    return p


def build_run_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="infer-compare run",
                description="Measure a bundle written by 'infer-compare export' on this machine, without "
                            "torch or converters: verify its manifest and sha256 hashes, build what could "
                            "not travel (TensorRT engines, Edge TPU compile) where the tools are present, "
                            "measure every backend present, check parity against the bundle's PyTorch "
                            "reference, and write the reports.",
                epilog="Exit codes: 0 ok, 1 parity failure or a requested backend did not run, 2 usage error "
                       "(including a bundle that fails verification), 3 rows measured while other processes "
                       "used the cores (disturbed: not a clean measurement).")
    p.add_argument("bundle", metavar="DIR", help="a bundle directory written by 'infer-compare export'")
    _add_measure_args(p)
    p.add_argument("--output-kind", action="append", default=None, metavar="NAME=KIND", dest="output_kind",
                   help="what output NAME means (default: what the bundle recorded at export, else inferred)")

    o = p.add_argument_group("output and cache")
    add_output(p, o, "where the results go (default ./infer-compare-results/<bundle>-<time>/)")
    o.add_argument("--cache-dir", metavar="DIR",
                   help="cache for artifacts built on this machine (TensorRT engines)")
    o.add_argument("--no-cache", action="store_true", help="rebuild what is built here")
    o.add_argument("--verify-only", action="store_true", help="verify the bundle and stop")
    o.add_argument("--quiet", "-q", action="store_true", help="no progress display")
    return p


def build_merge_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="infer-compare merge",
                description="Merge results.json files of one model from several machines into one "
                            "comparison (results.json/.md/.csv/.html); each row's device is prefixed by a "
                            "machine label.")
    p.add_argument("results", nargs="+", metavar="RESULTS.json",
                   help="results.json files of one model, one per machine")
    add_output(p, p, "where the merged results.json, .md, .csv and .html go", required=True)
    p.add_argument("--label", action="append", default=[], metavar="NAME",
                   help="machine label of each file, in order (repeatable, or comma-separated: --label a,b; "
                        "default: Jetson/Pi model, GPU name or CPU model)")
    return p


def build_soak_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="infer-compare soak",
                description="Run one or more configurations for a long time, each in its own process, and "
                            "record per time window: throughput and latency (drift, thermal throttling), the "
                            "process's RSS and GPU memory (leaks), temperatures and clocks where the machine "
                            "exposes them. Writes results.json/.md/.csv/.html with a plot per "
                            "configuration (docs/soak.md).",
                epilog="Durations: seconds, or a number with ms, s, m, h (90s, 10m, 1h30m). Exit codes: "
                       "0 ok, 1 a requested backend did not run or RSS grew faster than --max-rss-growth, "
                       "2 usage error; 130/143 interrupted (the finished windows are saved, "
                       "marked incomplete).")
    g = p.add_argument_group("what to soak")
    g.add_argument("--model", "-m",
                   help="as for a comparison: a built-in name or your own file (or --bundle)")
    g.add_argument("--bundle", metavar="DIR",
                   help="a bundle written by 'infer-compare export' instead of --model")
    g.add_argument("--weights", default="auto", metavar="auto|random|PATH",
                   help="as for a comparison (default auto)")
    g.add_argument("--backends", type=_csv, metavar="LIST",
                   help="comma-separated runners (default: all): "
                        f"{', '.join(r for r in RUNNERS if r != 'null')}")
    g.add_argument("--formats", type=_csv, metavar="LIST",
                   help=f"comma-separated formats: {', '.join(FORMATS)}")
    g.add_argument("--precisions", type=_csv, metavar="LIST",
                   help=f"comma-separated precisions: {', '.join(PRECISIONS)}")
    g.add_argument("--device", type=_csv, metavar="LIST", dest="devices", help="cpu, cuda, cuda:N, edgetpu")
    g.add_argument("--batch-sizes", "-b", metavar="LIST",
                   help="comma-separated batch sizes, each soaked in turn (default 1)")
    g.add_argument("--input-shape", metavar="SHAPE",
                   help="as for a comparison: the sizes the model leaves open")
    g.add_argument("--input-value", action="append", default=[], metavar="NAME=VALUE",
                   help="as for a comparison: feed input NAME this value (e.g. sr=16000); repeatable")
    g.add_argument("--data", metavar="PATH",
                   help="as for a comparison: a folder of images or a .npy/.npz of inputs")
    m = p.add_argument_group("how long")
    m.add_argument("--duration", "-d", default="10m", metavar="TIME",
                   help="soak each configuration this long (default 10m)")
    m.add_argument("--window", "-w", default="10s", metavar="TIME",
                   help="one record of latency, throughput, memory and sensors per window (default 10s)")
    m.add_argument("--max-rss-growth", type=_positive_float, metavar="MB",
                   help="exit 1 when a configuration's RSS grows by more than MB per 10,000 calls (fit over "
                        "the windows after the first)")
    m.add_argument("--threads", type=int, help="CPU threads per backend (default: physical cores)")
    m.add_argument("--warmup", type=int, default=2, metavar="N",
                   help="warm-up calls before the first window (default 2)")
    m.add_argument("--warmup-time", type=_positive_float, default=0.2, metavar="S",
                   help="and warm up for at least S seconds (default 0.2)")
    m.add_argument("--cell-timeout", type=_positive_float, default=600.0, metavar="S",
                   help="kill a soak that loads for S seconds, or makes no window for S seconds past its "
                        "window length (default 600)")
    _add_export_timeout(m)
    m.add_argument("--seed", type=int, default=0, help="seed for random weights and crops (default 0)")
    add_runner_option_flags(p)
    o = p.add_argument_group("output and cache")
    add_output(p, o, "where the results go (default ./infer-compare-results/<model>-soak-<time>/)")
    o.add_argument("--cache-dir", metavar="DIR", help="artifact cache (default ~/.cache/infer-compare)")
    o.add_argument("--no-cache", action="store_true", help="rebuild every artifact privately for this run")
    o.add_argument("--quiet", "-q", action="store_true", help="no progress display")
    return p
