"""The Python API, the package's face: what the ``infer-compare`` command does, as functions.

``compare()`` measures a model on every backend present and returns a
:class:`~infer_compare.base.records.Report`; ``load_report()`` reads one back; ``Report.save(path)``
writes it in the format its suffix names (``.json``, ``.md``, ``.csv``, ``.html``);
``check_regression()`` is the regression gate; ``export_bundle()``/``run_bundle()`` export here and
measure there; ``MeasureOptions`` holds the run's options that all of them share.

    from infer_compare import compare
    report = compare("lenet5", backends=["onnxruntime"], batch_sizes=[1, 8], output_dir="results")
    report.save("lenet5.html")

As the CLI does, ``compare()`` and ``run_bundle()`` show their progress on stderr (``progress=False``:
nothing) and, given ``output_dir``, write results.json after each row and every format at the end.

``compare`` is a short composition: planning (measure/plan.py), preparing the model and its reference
(prepare/), the artifact chain (artifacts/) and measuring (measure/run.py). It imports every stage; no
stage imports it (docs/architecture.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO, cast

import infer_compare.report  # noqa: F401  (registers the Markdown, CSV and HTML renderers of Report.save)
from infer_compare import bundle
from infer_compare.backends.pytorch import compile_caches
from infer_compare.base.errors import UsageError
from infer_compare.base.progress import Progress, Warnings
from infer_compare.base.progress_display import RichProgress
from infer_compare.base.records import Report
from infer_compare.base.records import load_report as _load_report
from infer_compare.base.report_files import Saver, made_dirs, remove_empty, writable_dir
from infer_compare.base.timeline import TimedProgress, Timeline
from infer_compare.bundle.common import DEFAULT_MAX_BATCH
from infer_compare.catalog import device_kinds
from infer_compare.host import env
from infer_compare.measure.forkservers import launch_fork_servers
from infer_compare.measure.options import MeasureOptions
from infer_compare.measure.plan import check_devices_present, parse_batch_sizes
from infer_compare.measure.run import measure
from infer_compare.prepare.inputs import DataOptions
from infer_compare.prepare.model import check_model, data_options, judge_outputs_as, kind_options, prepare_any
from infer_compare.regress import check_regression as _check
from infer_compare.regress.judge import BEST

__all__ = ["compare", "load_report", "check_regression", "export_bundle", "run_bundle", "MeasureOptions",
           "DataOptions", "Progress", "parse_batch_sizes", "Report", "UsageError"]

# what ``progress=`` takes: a Progress, a text stream, True or None (the display on stderr), or False
ProgressArg = Progress | TextIO | bool | None
PathArg = str | os.PathLike


def load_report(path: PathArg) -> Report:
    """Read a results file written by ``compare()``, the CLI or ``Report.save(".json")``.

    Args:
        path: the results.json file.

    Returns:
        The Report, checked in full against the schema (files of older versions load too).

    Raises:
        SchemaError: the file is not a results file, or is from a newer infer-compare (one line).
        OSError: it cannot be read.
    """
    return _load_report(path)


def check_regression(current: Report | PathArg | Iterable[Report | PathArg],
                     baseline: Report | PathArg | Iterable[Report | PathArg],
                     rules: Iterable[str] | str | None = None, *, allow_environment_change: bool = False,
                     allow_incomplete: bool = False, allow_missing: bool | tuple[str, ...] = False,
                     allow_condition_change: bool = False, timing: str = BEST, confidence: float = 0.95,
                     n_resamples: int = 1000, seed: int = 0) -> Any:
    """The regression gate: compare ``current`` with ``baseline`` row by row, as ``infer-compare diff``.

    Args:
        current: the run to judge: a Report, a path (a results.json, or a folder of them), or a list of
            them (several runs of one code, pooled).
        baseline: what it is judged against, in the same forms.
        rules: e.g. ``["p50:+10%", "throughput:-5%", "accuracy:-0.5"]`` (the ``--fail-on`` rules);
            None: the defaults, ``p50:+12%``, ``throughput:-12%``, ``accuracy:-0.5``.
        allow_environment_change: compare with a baseline from another machine or other library versions.
        allow_incomplete: compare even when a report is incomplete (an interrupted run); the rows that did
            not run are listed, not judged.
        allow_missing: accept rows that were ok in the baseline and are missing or skipped now (True), or
            the rows whose labels match these fnmatch patterns, also when they failed to build or load now.
        allow_condition_change: accept rows measured under other threads or runner options.
        timing: how latency and throughput are compared: ``"best"`` (each side's fastest sustained
            level), ``"reference"`` (ratios to each run's PyTorch fp32 row), ``"calibrated"`` (to the
            calibration workload timed before each row) or ``"absolute"`` (as measured).
        confidence: the confidence of the noise allowance (block bootstrap).
        n_resamples: the bootstrap's resamples.
        seed: the bootstrap's seed.

    Returns:
        A RegressionResult: ``.passed``, ``.violations``, ``.summary()``.

    Raises:
        EnvironmentMismatch: (a UsageError) a baseline from another machine or library versions, unless
            ``allow_environment_change``.
        UsageError: an incomplete report (unless ``allow_incomplete``), a bad rule, a baseline of
            another model.
    """
    return _check(current, baseline, rules, allow_environment_change=allow_environment_change,
                  allow_incomplete=allow_incomplete, allow_missing=allow_missing,
                  allow_condition_change=allow_condition_change, timing=timing, confidence=confidence,
                  n_resamples=n_resamples, seed=seed)


def compare(
    model: Any = "lenet5", *, options: MeasureOptions | None = None, output_dir: PathArg | None = None,
    progress: ProgressArg = None, weights: str = "auto", input_shape: str | None = None,
    example_input: Any = None, data: Any = None, output_kinds: dict[str, str] | Iterable[str] | None = None,
    parity_samples: int | None = None, calibration_samples: int | None = None,
    command: Iterable[str] | None = None, on_row: Callable[[Report], None] | None = None, **measure: Any,
) -> Report:
    """Export ``model`` to every format it can, measure each on every device present and check every output
    against the PyTorch FP32 reference: what ``infer-compare --model`` does (docs/architecture.md).

    Args:
        model: a built-in or torchvision name (``"resnet50"``...) or your own (docs/own-model.md):
            an .onnx, .tflite, TorchScript (.pt) or ExportedProgram (.pt2) file, ``"package.module:callable"``
            returning a torch.nn.Module, or a torch.nn.Module with ``example_input``.
        options: what to measure and how (a MeasureOptions); keywords (``**measure``) override its fields.
        output_dir: the results folder (``--output-dir``), made (with its parents) and checked writable before
            any work (UsageError otherwise). results.json is saved after each row; results.json, .md, .csv and
            .html at the end and on Ctrl-C (into a temporary folder named on stderr if this one fails then);
            an earlier run's results.* are replaced (``--overwrite``). None: no file.
        progress: None or True (the default): the CLI's display on stderr (a live line with a bar on a
            terminal, plain lines on a file or a pipe). A text stream (``sys.stdout``, an ``io.StringIO``):
            that display on it. False: nothing shown (the warnings stay in ``Report.warnings``). A Progress
            (subclass ``infer_compare.Progress``): its callbacks are called.
        weights: ``"auto"`` (pretrained weights from the local torch hub cache, else seeded random weights;
            LeNet-5: trained on the bundled digits), ``"random"``, or a path to a state-dict file.
        input_shape: the model's input shape where the model does not fix it: ``"1x3x224x224"``, or
            ``"name:1x3x224x224,name2:..."`` for several inputs (``--input-shape``).
        example_input: a sample input (a tensor, or a tuple of them) for a torch.nn.Module ``model``.
        data: the inputs (``--data``): an image folder (one sub-folder per class gives labels and an accuracy
            column), a .npy or a .npz file; a DataOptions (``labels``, ``calibration``, ``max_images``,
            ``overrides``: the other data flags) or a dict of its fields. None: the model's own inputs.
        output_kinds: what outputs mean, and so how parity judges them (``--output-kind``): ``{name: kind}``
            or ``["NAME=KIND", ...]``, kinds in parity/kinds.py (scores, map, sequence, ctc, detections...).
            None: inferred from each output's shape and values.
        parity_samples: inputs compared with the reference (default: 32 photos; LeNet-5: all 450 test digits).
        calibration_samples: calibration inputs for int8 (default: 64 photos; LeNet-5: 200 digits).
        command: the command line recorded in the report (``Report.command``).
        on_row: called with the report so far after each row (with ``output_dir``: after results.json is
            saved), so that a caller can keep what is measured.
        **measure: the fields of MeasureOptions (measure/options.py), each as its CLI flag: ``backends``,
            ``formats``, ``precisions``, ``devices``, ``batch_sizes``, ``scenarios``, ``threads``,
            ``min_iters``, ``min_time_s``, ``max_time_s``, ``cache_dir``, ``runner_options`` (e.g.
            ``{"openvino": {"performance_hint": "THROUGHPUT"}}``), ...

    Returns:
        The Report: one row per backend, format, precision, device and batch size, measured or skipped with
        its reason. A failure of one backend or export is a failed row, never an exception.

    Raises:
        UsageError: a bad argument (an unknown backend, a missing data folder...), before any work; one line.
        TypeError: an unknown keyword (the closest option is named).
    """
    opts = MeasureOptions.of(options, measure, "compare")
    data = data_options(data)
    kinds = kind_options(output_kinds)
    with _display(progress) as prog, _results(output_dir, on_row, prog) as results:
        return results.done(_compare(
            model, opts, prog, weights=weights, input_shape=input_shape, example_input=example_input,
            data=data, parity_samples=parity_samples, calibration_samples=calibration_samples,
            command=command, on_row=results.on_row, output_kinds=kinds))


def _compare(model: Any, opts: MeasureOptions, progress: Any, **kw: Any) -> Report:
    """The comparison, its Progress given: selection, cache and fork servers, then ``_run``."""
    t_start = time.perf_counter()
    timeline = Timeline(t_start)
    prog = TimedProgress(progress, timeline)
    sel = opts.selection()
    warnings = Warnings(prog)
    cache = opts.cache(warn=warnings, log=prog.log)
    present = device_kinds.present()
    check_devices_present(sel.devices, present)
    tflite = isinstance(model, str | os.PathLike) and os.fspath(model).lower().endswith(".tflite")
    if sel.formats is None and tflite:
        sel.formats = ("tflite", "edgetpu")  # a TFLite model: its own rows only (nothing converts it back)
    with compile_caches.kept_under(cache.root if opts.use_cache else None):
        # the fork servers first: their imports overlap this process's own (a built-in model's name is checked
        # against torchvision's list: torch's import, 2.9 s on the 2 x H100 host) and the preparation
        servers = launch_fork_servers(model, sel, present, cache, prog)
        try:
            check_model(model, kw["parity_samples"])
            return _run(model, sel, present, cache, prog, warnings, t_start=t_start, timeline=timeline,
                        seed=opts.seed, servers=servers, **kw)
        finally:
            servers.close()


def _run(model: Any, sel: Any, present: dict[str, list[str]], cache: Any, prog: Any, warnings: Any, *,
         t_start: float, timeline: Any, weights: str, input_shape: str | None, example_input: Any, data: Any,
         parity_samples: int | None, calibration_samples: int | None, seed: int, command: Any, on_row: Any,
         output_kinds: dict[str, str] | None = None, servers: Any = None):
    """Probe, prepare and measure, with ``servers`` (the fork servers, started first; the caller closes
    them)."""
    prog.task("probing the environment")
    environment = env.collect()
    sel.threads = sel.threads or environment.cores_physical or environment.cores_logical or 1
    prep = prepare_any(model, weights=weights, input_shape=input_shape, example_input=example_input,
                       data=data, parity_samples=parity_samples, calibration_samples=calibration_samples,
                       seed=seed, cache=cache, threads=sel.threads, prog=prog, warn=warnings)
    judge_outputs_as(prep, output_kinds or {})
    return measure(prep, sel, environment=environment, present=present, cache=cache, prog=prog,
                   warnings=warnings, command=command, on_row=on_row, t_start=t_start, servers=servers,
                   timeline=timeline)


def run_bundle(bundle_dir: PathArg, *, options: MeasureOptions | None = None,
               output_dir: PathArg | None = None, progress: ProgressArg = None,
               output_kinds: dict[str, str] | Iterable[str] | None = None,
               command: Iterable[str] | None = None, on_row: Callable[[Report], None] | None = None,
               **measure: Any) -> Report:
    """Measure a bundle written by ``export_bundle()`` here (no torch needed): what ``infer-compare run``
    does. The bundle is verified (every file's sha256) before anything is loaded, its deferred formats
    are built where their exporter is present, and parity is checked against the bundle's reference.

    Args:
        bundle_dir: the bundle's folder.
        options: what to measure and how, as for ``compare()`` (``artifacts`` aside: a bundle carries
            its own); its fields may also be given as keywords (``**measure``).
        output_dir: a folder for the results, as for ``compare()``.
        progress: where the run reports as it goes, as for ``compare()`` (default: the display on stderr).
        output_kinds: what outputs mean, as for ``compare()``; None: what the bundle recorded at export.
        command: the command line recorded in the report.
        on_row: called with the report so far after each row.
        **measure: the fields of MeasureOptions, as for ``compare()``.

    Returns:
        The Report, as ``compare()``'s.

    Raises:
        BundleError: (exit 2 in the CLI) the bundle is damaged or incomplete; one line.
        UsageError: a bad argument, before any work.
    """
    with _display(progress) as prog, _results(output_dir, on_row, prog) as results:
        return results.done(bundle.run_bundle(
            bundle_dir, options=options, output_kinds=output_kinds, command=command, progress=prog,
            on_row=results.on_row, **measure))


def export_bundle(model: Any, out_dir: PathArg, *, progress: ProgressArg = None, weights: str = "auto",
                  formats: Iterable[str] | None = None, precisions: Iterable[str] | None = None,
                  parity_samples: int | None = None, calibration_samples: int | None = None,
                  max_batch: int = DEFAULT_MAX_BATCH, seed: int = 0, cache_dir: PathArg | None = None,
                  use_cache: bool = True, threads: int | None = None, command: Iterable[str] | None = None,
                  export_timeout_s: float = 1800.0, runner_options: dict[str, Any] | None = None,
                  output_kinds: dict[str, str] | Iterable[str] | None = None,
                  input_shape: str | None = None) -> dict[str, Any]:
    """Build every artifact of the selection (through the artifact cache) and write a bundle that
    ``run_bundle()`` measures on another machine: what ``infer-compare export`` does (docs/edge.md).

    Args:
        model: as for ``compare()`` (a name, a file or ``"package.module:callable"``).
        out_dir: the bundle's folder: absent or empty (UsageError otherwise).
        progress: where the export reports as it goes, as for ``compare()`` (default: the display on
            stderr).
        weights: as for ``compare()``.
        formats: the formats to build (default: all).
        precisions: the precisions to build (default: all).
        parity_samples: reference inputs in the bundle (default: 32 photos; LeNet-5: all 450 digits).
        calibration_samples: calibration inputs for int8 (default: 64 photos; LeNet-5: 200 digits).
        max_batch: the largest batch size the artifacts are built for.
        seed: the seed for random weights and crops.
        cache_dir: the artifact cache (default ``~/.cache/infer-compare``).
        use_cache: False: rebuild every artifact.
        threads: threads for the reference and the builds (default: the physical cores).
        command: the command line recorded in the manifest.
        export_timeout_s: the longest one export may take.
        runner_options: the options that describe how artifacts are built, as for ``compare()`` (e.g.
            ``{"onnxruntime": {"int8_reduce_range": "on"}}`` for an int8 file meant for a CPU without
            VNNI).
        output_kinds: as for ``compare()``; recorded in the manifest, and ``run_bundle()`` judges parity
            by them.
        input_shape: as for ``compare()``: the sizes the model leaves open; the bundle records the shape
            it was exported at.

    Returns:
        The manifest (also written as the bundle's manifest.json): its ``artifacts``, ``deferred``
        (built on the device) and ``not_built`` entries, and every file's sha256 and size.

    Raises:
        UsageError: a bad argument or an unusable folder, before any work.
        OSError: the bundle cannot be written (the half-written bundle is removed).
    """
    with _display(progress) as prog:
        return bundle.export_bundle(
            model, out_dir, weights=weights, formats=formats, precisions=precisions,
            parity_samples=parity_samples, calibration_samples=calibration_samples, max_batch=max_batch,
            seed=seed, cache_dir=cache_dir, use_cache=use_cache, threads=threads, command=command,
            progress=prog, export_timeout_s=export_timeout_s, runner_options=runner_options,
            output_kinds=output_kinds, input_shape=input_shape)


def _is_stream(progress: Any) -> bool:
    return hasattr(progress, "write") and not hasattr(progress, "task")


@contextmanager
def _display(progress: ProgressArg) -> Iterator[Any]:
    """The Progress that ``progress=`` names (see ``compare()``): the CLI's display (base/progress_display.py)
    on stderr or on a given stream, started and stopped around the run; nothing; or the caller's own."""
    if progress is False:
        yield Progress()
    elif progress is None or progress is True or _is_stream(progress):
        from rich.console import Console

        console = Console(file=cast(TextIO, progress)) if _is_stream(progress) else None
        with RichProgress(False, console=console) as shown:
            yield shown
    else:
        yield progress


class _Results:
    """A run's result folder (``output_dir=``), or none: the ``on_row`` to give the run, and ``done``."""

    def __init__(self, out: Path | None, on_row: Callable[[Report], None] | None, prog: Any):
        self.saver = None if out is None else Saver(out)
        self.user_on_row, self.prog = on_row, prog

    def on_row(self, rep: Report) -> None:
        if self.saver is not None:
            self.saver(rep)
        if self.user_on_row is not None:
            self.user_on_row(rep)

    def done(self, rep: Report) -> Report:
        """Every format written (when there is a folder); ``rep``."""
        if self.saver is not None:
            paths = list(self.saver.write(rep).values())  # in a temporary folder when the chosen one failed
            self.prog.log(f"results in {paths[0].parent}: {', '.join(p.name for p in paths)}")
        return rep


@contextmanager
def _results(output_dir: PathArg | None, on_row: Callable[[Report], None] | None,
             prog: Any) -> Iterator[_Results]:
    """The result folder, made and checked before any work; on Ctrl-C the partial report in every format;
    on any failure the folders made here that are still empty are removed again."""
    made: list[Path] = []
    out = None if output_dir is None else writable_dir(Path(output_dir), lambda p: made.extend(made_dirs(p)))
    results = _Results(out, on_row, prog)
    try:
        yield results
    except KeyboardInterrupt:
        if results.saver is not None:
            results.saver.interrupted()
        raise
    finally:
        remove_empty(made)
