"""The Python API, the package's face: ``compare()`` measures a model on every backend present and
returns a :class:`~infer_compare.base.records.Report`; ``load_report()`` reads one back;
``check_regression()`` is the regression gate; ``export_bundle()``/``run_bundle()`` export here and
measure there; ``MeasureOptions`` holds the run's options that all of them share.

    from infer_compare import compare, MeasureOptions
    report = compare("lenet5", batch_sizes=[1, 8])            # or options=MeasureOptions(batch_sizes=[1, 8])
    report.save("results.json")

``compare`` is a short composition: planning (measure/plan.py), preparing the model and its reference
(prepare/), the artifact chain (artifacts/) and measuring (measure/run.py). It imports every stage; no
stage imports it (docs/architecture.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from infer_compare.backends.pytorch import compile_caches
from infer_compare.base.errors import UsageError
from infer_compare.base.progress import Progress, Warnings
from infer_compare.base.records import Report, load_report
from infer_compare.base.timeline import TimedProgress, Timeline
from infer_compare.bundle import export_bundle, run_bundle
from infer_compare.catalog import device_kinds
from infer_compare.host import env
from infer_compare.measure.forkservers import launch_fork_servers
from infer_compare.measure.options import MeasureOptions
from infer_compare.measure.plan import check_devices_present, parse_batch_sizes
from infer_compare.measure.run import measure
from infer_compare.prepare.inputs import DataOptions
from infer_compare.prepare.model import check_model, data_options, judge_outputs_as, kind_options, prepare_any
from infer_compare.regress import check_regression as _check

__all__ = ["compare", "load_report", "check_regression", "export_bundle", "run_bundle", "MeasureOptions",
           "DataOptions", "Progress", "parse_batch_sizes", "Report", "UsageError"]


def check_regression(current, baseline, rules=(), **kwargs):
    """Compare ``current`` with ``baseline`` (Reports or paths) under ``rules``; see regress.check_regression."""
    return _check(current, baseline, rules, **kwargs)


def compare(
    model: Any = "lenet5", *, options: MeasureOptions | None = None, weights: str = "auto",
    input_shape: str | None = None, example_input: Any = None, data: Any = None,
    output_kinds: dict[str, str] | Iterable[str] | None = None, parity_samples: int | None = None,
    calibration_samples: int | None = None, command: Iterable[str] | None = None,
    progress: Progress | None = None, on_row: Callable[[Report], None] | None = None, **measure: Any,
) -> Report:
    """Export ``model`` to every format it can, measure each on every device present, check every
    output against the PyTorch FP32 reference, and return the Report (docs/architecture.md).

    ``model``: a built-in or torchvision name, or your own (docs/own-model.md): a path to an .onnx,
    TorchScript or .pt2 file, "package.module:callable", or a torch.nn.Module with ``example_input``;
    ``input_shape`` ("1x3x224x224" or "name:1x3x224x224,..."), ``data`` (a path: an image folder, a .npy or
    a .npz, as ``--data``; or ``infer_compare.DataOptions(data=..., labels=..., calibration=..., max_images=...,
    overrides={...})`` for the other data flags; or a dict of those fields) as the CLI's flags of the same
    names. ``output_kinds``: what outputs mean, as ``--output-kind`` ({name: kind} or ["NAME=KIND", ...];
    kinds in parity/kinds.py).

    What to measure and how: ``options`` (a MeasureOptions) and/or its fields as keywords
    (``backends``, ``batch_sizes``, ``scenarios``, ``runner_options``, ``artifacts``, ``cache_dir``...; see
    measure/options.py), e.g. ``runner_options={"openvino": {"performance_hint": "THROUGHPUT"}}``.
    ``on_row(partial_report)`` gets the report after each row, so that a caller can save what is measured.
    Bad arguments raise UsageError; a failure of one backend or export is a failed row, never an exception."""
    opts = MeasureOptions.of(options, measure, "compare")
    data = data_options(data)
    kinds = kind_options(output_kinds)
    t_start = time.perf_counter()
    timeline = Timeline(t_start)
    prog = TimedProgress(progress or Progress(), timeline)
    sel = opts.selection()
    warnings = Warnings(prog)
    cache = opts.cache(warn=warnings, log=prog.log)
    present = device_kinds.present()
    check_devices_present(sel.devices, present)
    if sel.formats is None and isinstance(model, str | os.PathLike) and os.fspath(model).lower().endswith(".tflite"):
        sel.formats = ("tflite", "edgetpu")  # a TFLite model: its own rows only (nothing converts TFLite back)
    with compile_caches.kept_under(cache.root if opts.use_cache else None):
        # the fork servers first: their imports overlap this process's own (a built-in model's name is checked
        # against torchvision's list: torch's import, 2.9 s on the 2 x H100 host) and the preparation
        servers = launch_fork_servers(model, sel, present, cache, prog)
        try:
            check_model(model, parity_samples)
            return _run(model, sel, present, cache, prog, warnings, t_start=t_start, timeline=timeline,
                        weights=weights, input_shape=input_shape, example_input=example_input, data=data,
                        parity_samples=parity_samples, calibration_samples=calibration_samples, seed=opts.seed,
                        command=command, on_row=on_row, output_kinds=kinds, servers=servers)
        finally:
            servers.close()


def _run(model: Any, sel: Any, present: dict[str, list[str]], cache: Any, prog: Any, warnings: Any, *,
         t_start: float, timeline: Any, weights: str, input_shape: str | None, example_input: Any, data: Any,
         parity_samples: int | None, calibration_samples: int | None, seed: int, command: Any, on_row: Any,
         output_kinds: dict[str, str] | None = None, servers: Any = None):
    """Probe, prepare and measure, with ``servers`` (the fork servers, started first; the caller closes them)."""
    prog.task("probing the environment")
    environment = env.collect()
    sel.threads = sel.threads or environment.cores_physical or environment.cores_logical or 1
    prep = prepare_any(model, weights=weights, input_shape=input_shape, example_input=example_input, data=data,
                       parity_samples=parity_samples, calibration_samples=calibration_samples, seed=seed,
                       cache=cache, threads=sel.threads, prog=prog, warn=warnings)
    judge_outputs_as(prep, output_kinds or {})
    return measure(prep, sel, environment=environment, present=present, cache=cache, prog=prog,
                   warnings=warnings, command=command, on_row=on_row, t_start=t_start, servers=servers,
                   timeline=timeline)


