"""The Python API: ``compare()`` measures a model on every backend present and returns
a :class:`~infer_compare.records.Report`; ``load_report()`` reads one back;
``check_regression()`` is the regression gate.

    from infer_compare import compare
    report = compare("lenet5", batch_sizes=[1, 8])
    report.save("results.json")

Each is a short composition: planning (plan.py), preparing the model and its reference
(prepare.py), the artifact chain (artifacts.py) and measuring (measure.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from .plan import make_selection, parse_batch_sizes
from .progress import Progress, Warnings
from .records import Report, load_report

__all__ = ["compare", "load_report", "check_regression", "Progress", "parse_batch_sizes"]


def check_regression(current, baseline, rules=(), **kwargs):
    """Compare ``current`` with ``baseline`` (Reports or paths) under ``rules``; see regress.check_regression."""
    from .regress import check_regression as _check

    return _check(current, baseline, rules, **kwargs)


def compare(
    model: Any = "lenet5", *,
    weights: str = "auto", backends: Iterable[str] | None = None, formats: Iterable[str] | None = None,
    precisions: Iterable[str] | None = None, devices: Iterable[str] | None = None,
    batch_sizes: Iterable[int] | str | None = None, threads: int | None = None, warmup_iters: int = 2,
    min_iters: int = 5, min_time_s: float = 0.2, max_time_s: float = 1.0, target_ci: float | None = 0.02,
    warmup_time_s: float = 0.2, export_timeout_s: float = 1800.0, parity_samples: int | None = None,
    calibration_samples: int | None = None, cell_timeout_s: float = 600.0,
    cache_dir: str | os.PathLike | None = None, use_cache: bool = True, seed: int = 0,
    command: Iterable[str] | None = None, progress: Progress | None = None,
    on_row: Callable[[Report], None] | None = None, runner_options: dict[str, dict[str, Any]] | None = None,
    parity_every_batch: bool = False, input_shape: str | None = None, example_input: Any = None,
    data: Any = None, artifacts: Iterable[str] = (), scenarios: str | Iterable[str] = "latency",
    io: str | None = None, concurrency: int = 0, output_kinds: dict[str, str] | Iterable[str] | None = None,
) -> Report:
    """Export ``model`` to every format it can, measure each on every device present, check every
    output against the PyTorch FP32 reference, and return the Report (docs/architecture.md).

    ``model``: a built-in or torchvision name, or your own (docs/own-model.md): a path to an .onnx,
    TorchScript or .pt2 file, "package.module:callable", or a torch.nn.Module with ``example_input``;
    ``input_shape`` ("1x3x224x224" or "name:1x3x224x224,..."), ``data`` (a path: an image folder, a .npy or
    a .npz, as ``--data``; or ``infer_compare.DataOptions(data=..., labels=..., calibration=..., max_images=...,
    overrides={...})`` for the other data flags; or a dict of those fields) and ``artifacts`` (pre-built files
    measured as given) as the CLI's flags of the same names. ``output_kinds``: what outputs mean, as
    ``--output-kind`` ({name: kind} or ["NAME=KIND", ...]; kinds in output_kinds.py).

    ``on_row(partial_report)`` gets the report after each row, so that a caller can save what is
    measured. ``runner_options`` maps a runner to values of its declared options
    (``backends/<runtime>/options.py``), e.g. ``{"openvino": {"performance_hint": "THROUGHPUT"}}``.
    The sampling arguments are those of the CLI (``infer-compare --help``). ``scenarios``: "latency" (one
    call after another), "throughput" (each runtime's own concurrency, ``concurrency`` requests in flight,
    0 = the runtime's choice) or "both"; ``io``: the GPU timing policy, "device" (default) or "host". Bad arguments raise
    UsageError; a failure of one backend or export is a failed row, never an exception."""
    from . import compile_caches, device_kinds
    from .cache import Cache
    from .timeline import TimedProgress, Timeline

    data = data_options(data)
    kinds = kind_options(output_kinds)
    t_start = time.perf_counter()
    timeline = Timeline(t_start)
    prog = TimedProgress(progress or Progress(), timeline)
    sel = make_selection(backends=backends, formats=formats, precisions=precisions, devices=devices,
                         batch_sizes=batch_sizes, threads=threads, warmup_iters=warmup_iters, min_iters=min_iters,
                         min_time_s=min_time_s, cell_timeout_s=cell_timeout_s, seed=seed, max_time_s=max_time_s,
                         target_ci=target_ci, warmup_time_s=warmup_time_s, export_timeout_s=export_timeout_s,
                         artifacts=artifacts, scenarios=scenarios, io=io, concurrency=concurrency,
                         runner_options=runner_options, parity_every_batch=parity_every_batch)
    warn = warnings = Warnings(prog)
    cache = Cache(cache_dir, enabled=use_cache, warn=warn, log=prog.log)
    check_model(model, parity_samples)
    present = device_kinds.present()
    check_devices_present(sel.devices, present)
    with compile_caches.kept_under(cache.root if use_cache else None):
        return _run(model, sel, present, cache, prog, warnings, t_start=t_start, timeline=timeline,
                    weights=weights, input_shape=input_shape, example_input=example_input, data=data,
                    parity_samples=parity_samples, calibration_samples=calibration_samples, seed=seed,
                    command=command, on_row=on_row, output_kinds=kinds)


def kind_options(kinds: dict[str, str] | Iterable[str] | None) -> dict[str, str]:
    """``compare(output_kinds=...)`` as {name: kind}, each kind checked (UsageError) before any work."""
    from .output_kinds import parse_output_kinds

    if isinstance(kinds, dict):
        kinds = [f"{k}={v}" for k, v in kinds.items()]
    return parse_output_kinds(kinds)


def _judge_outputs_as(prep: Any, kinds: dict[str, str]) -> None:
    """The user's kinds checked against the model's outputs (UsageError) and kept on ``prep``, with a note."""
    import numpy as np

    from .output_kinds import KINDS, SCORES, check_output_kinds, infer_kind, output_shapes

    if kinds:
        check_output_kinds(kinds, output_shapes(prep))
        prep.output_kinds = dict(kinds)
        prep.notes.append("outputs judged as given by --output-kind: "
                          + ", ".join(f"{k} as {v}" for k, v in kinds.items()))
    refs = prep.ref if isinstance(prep.ref, dict) else {"": prep.ref}
    for k, a in refs.items():
        kind = kinds.get(k) or (next(iter(kinds.values())) if kinds and not k else "") or infer_kind(a)
        if kind != SCORES:
            prep.notes.append(f"output {k + ' ' if k else ''}{list(np.shape(a)[1:])} judged as {kind} "
                              f"({KINDS[kind]}; output_kinds.py; --output-kind NAME=KIND to say otherwise)")


def data_options(data: Any):
    """``compare(data=...)`` as a DataOptions: None, a DataOptions, a path (str or os.PathLike) or a dict
    of DataOptions' fields; anything else is a TypeError that names those forms."""
    from dataclasses import fields

    from .prepare_user import DataOptions

    if data is None or isinstance(data, DataOptions):
        return data
    if isinstance(data, str | os.PathLike):
        return DataOptions(data=os.fspath(data))
    names = [f.name for f in fields(DataOptions)]
    if isinstance(data, dict):
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise TypeError(f"compare(data={{...}}): unknown field(s) {', '.join(map(str, unknown))}; "
                            f"DataOptions has {', '.join(names)}")
        return DataOptions(**data)
    raise TypeError(f"compare(data=...) takes a path (str or os.PathLike: an image folder, .npy or .npz) or "
                    f"infer_compare.DataOptions({', '.join(names)}), not {type(data).__name__}")


def _run(model: Any, sel: Any, present: dict[str, list[str]], cache: Any, prog: Any, warnings: Any, *,
         t_start: float, timeline: Any, weights: str, input_shape: str | None, example_input: Any, data: Any,
         parity_samples: int | None, calibration_samples: int | None, seed: int, command: Any, on_row: Any,
         output_kinds: dict[str, str] | None = None):
    """Probe, prepare and measure, with the fork servers started first and closed at the end."""
    from . import env
    from .measure import measure

    servers = launch_fork_servers(model, sel, present, cache, prog)  # their imports overlap the preparation
    try:
        prog.task("probing the environment")
        environment = env.collect()
        sel.threads = sel.threads or environment.cores_physical or environment.cores_logical or 1
        prep = prepare_any(model, weights=weights, input_shape=input_shape, example_input=example_input, data=data,
                           parity_samples=parity_samples, calibration_samples=calibration_samples, seed=seed,
                           cache=cache, threads=sel.threads, prog=prog, warn=warnings)
        _judge_outputs_as(prep, output_kinds or {})
        return measure(prep, sel, environment=environment, present=present, cache=cache, prog=prog,
                       warnings=warnings, command=command, on_row=on_row, t_start=t_start, servers=servers,
                       timeline=timeline)
    finally:
        servers.close()


def launch_fork_servers(model: Any, sel: Any, present: dict[str, list[str]], cache: Any, prog: Progress):
    """Start the fork servers of the selected runners that have one (PyTorch) and a device here now, so
    that their imports overlap the preparation; not for an ONNX model, whose PyTorch rows cannot run."""
    from .backends import runners
    from .forkserver import ForkServers, preloads

    servers = ForkServers(prog.log, str(cache.root))
    if not (isinstance(model, str | os.PathLike) and str(model).lower().endswith(".onnx")):
        known = runners()
        names = [n for n in (sel.backends or known) if n in known and any(present.get(k) for k in known[n].device_kinds)]
        for mods in dict.fromkeys(preloads(names).values()):
            servers.launch(mods)
    return servers


def check_devices_present(devices: Iterable[str] | None, present: dict[str, list[str]]) -> None:
    """Devices the user named of which none is here: a one-line UsageError before any work (otherwise
    every row would be skipped after the preparation). Some present: the absent ones are skipped rows."""
    from .device_kinds import DEVICE_KINDS, kind_of
    from .errors import UsageError

    def here(d: str) -> bool:
        found = present.get(kind_of(d), [])
        return bool(found) if d == kind_of(d) else any(f == d or f.startswith(d + ":") for f in found)

    if not devices or any(here(d) for d in devices):
        return
    why = "; ".join(dict.fromkeys(DEVICE_KINDS[kind_of(d)].absent_reason if not present.get(kind_of(d))
                                  else f"{d} is not among {', '.join(present[kind_of(d)])}" for d in devices))
    here_now = ", ".join(d for ds in present.values() for d in ds)
    raise UsageError(f"--device {','.join(devices)}: {why}; devices here: {here_now}")


def check_model(model: Any, parity_samples: int | None) -> None:
    """A built-in name must be known, before any work (the user's own model is checked when loaded)."""
    from . import models
    from .errors import UsageError

    if parity_samples is not None and parity_samples < 1:
        raise UsageError(f"--parity-samples must be >= 1, got {parity_samples}")
    if not models.looks_like_user_model(model):
        models.resolve(model)


def prepare_any(model: Any, *, weights: str, input_shape: str | None, example_input: Any, data: Any,
                parity_samples: int | None, calibration_samples: int | None, seed: int, cache: Any, threads: int,
                prog: Progress, warn: Callable[[str], None]):
    """The Prepared of a built-in model (prepare.py) or of the user's own (prepare_user.py)."""
    from . import models

    if models.looks_like_user_model(model):
        from .prepare_user import prepare_user_model

        return prepare_user_model(model, weights=None if weights in ("auto", "random") else weights,
                                  input_shape=input_shape, example_input=example_input, data=data,
                                  parity_samples=parity_samples, calibration_samples=calibration_samples, seed=seed,
                                  cache=cache, prog=prog, warn=warn)
    from .prepare import prepare_model

    return prepare_model(model, weights=weights, parity_samples=parity_samples, data=data,
                         calibration_samples=calibration_samples, seed=seed, cache=cache, threads=threads, prog=prog,
                         warn=warn)
