"""The Python API: ``compare()`` measures a model on every backend present and
returns a :class:`~infer_compare.records.Report`; ``load_report()`` reads one back.

    from infer_compare import compare
    report = compare("lenet5", batch_sizes=[1, 8])
    report.save("results.json")
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from .backends import load_impl, options_class
from .cache import Cache
from .errors import BackendUnavailable, InferCompareError, UsageError
from .formats import FORMATS, PRECISIONS, RUNNERS, get_format
from .options import Options
from .records import (
    EXPORT_FAILED,
    OK,
    PARITY_FAILED,
    RUN_FAILED,
    SCHEMA_VERSION,
    SKIPPED,
    Availability,
    ExportRecord,
    LatencyStats,
    ModelInfo,
    Report,
    RunRecord,
    Settings,
    load_report,
)

__all__ = ["compare", "load_report", "check_regression", "Progress", "DEFAULT_BATCH_SIZES", "parse_batch_sizes"]


def check_regression(current, baseline, rules=(), **kwargs):
    """Compare ``current`` with ``baseline`` (Reports or paths) under ``rules``; see regress.check_regression."""
    from .regress import check_regression as _check

    return _check(current, baseline, rules, **kwargs)


DEFAULT_BATCH_SIZES = {"cpu": (1, 8), "cuda": (1, 32, 256), "edgetpu": (1,)}
DEVICE_KINDS = ("cpu", "cuda", "edgetpu")
MAX_BATCH = 4096


class Progress:
    """Callbacks the CLI implements with a rich display; the API alone is silent."""

    def log(self, msg: str) -> None: ...

    def warn(self, msg: str) -> None: ...

    def task(self, msg: str, total: int | None = None) -> None: ...

    def advance(self, msg: str | None = None) -> None: ...

    def row(self, rec: RunRecord) -> None: ...


def parse_batch_sizes(text: str | Iterable[int]) -> tuple[int, ...]:
    """'1,8,32' -> (1, 8, 32). Positive integers up to 4096, no duplicates kept."""
    items = text.replace(" ", "").split(",") if isinstance(text, str) else list(text)
    out: list[int] = []
    if not items:
        raise UsageError("bad batch size list: no batch size given")
    for it in items:
        if it == "":
            raise UsageError(f"bad batch size list {text!r}: empty item")
        try:
            v = int(it)
        except (TypeError, ValueError):
            raise UsageError(f"bad batch size list {text!r}: {it!r} is not an integer") from None
        if isinstance(it, str) and str(v) != it.lstrip("+"):
            raise UsageError(f"bad batch size list {text!r}: {it!r} is not an integer")
        if not 1 <= v <= MAX_BATCH:
            raise UsageError(f"bad batch size list {text!r}: {v} is outside 1..{MAX_BATCH}")
        if v not in out:
            out.append(v)
    if not out:
        raise UsageError("bad batch size list: no batch size given")
    return tuple(out)


def _check_choice(kind: str, values: Iterable[str] | None, known: Iterable[str]) -> tuple[str, ...] | None:
    if values is None:
        return None
    vals = tuple(v.strip() for v in values if v.strip())
    known = tuple(known)
    bad = [v for v in vals if v not in known]
    if bad:
        import difflib

        close = difflib.get_close_matches(bad[0], known, n=1)
        raise UsageError(f"unknown {kind} '{bad[0]}'" + (f" (did you mean '{close[0]}'?)" if close else "")
                         + f"; known: {', '.join(known)}")
    return vals


def _device_kind(d: str) -> str:
    return d.split(":", 1)[0]


@dataclass
class _Cell:
    fmt: str
    runner: str
    precision: str
    kind: str  # device kind
    device: str | None  # concrete device, None when absent


@dataclass
class _Artifacts:
    """Artifacts built (or failed) in this run, keyed by (format, artifact precision)."""

    done: dict[tuple[str, str], ExportRecord] = field(default_factory=dict)
    failed: dict[tuple[str, str], tuple[str, str, str]] = field(default_factory=dict)  # status, reason, hint


def compare(
    model: str = "lenet5",
    *,
    weights: str = "auto",
    backends: Iterable[str] | None = None,
    formats: Iterable[str] | None = None,
    precisions: Iterable[str] | None = None,
    devices: Iterable[str] | None = None,
    batch_sizes: Iterable[int] | str | None = None,
    threads: int | None = None,
    warmup_iters: int = 2,
    min_iters: int = 5,
    min_time_s: float = 1.0,
    parity_samples: int | None = None,
    calibration_samples: int | None = None,
    cell_timeout_s: float = 600.0,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    seed: int = 0,
    command: Iterable[str] | None = None,
    progress: Progress | None = None,
    on_row: Callable[[Report], None] | None = None,
    runner_options: dict[str, dict[str, Any]] | None = None,
    parity_every_batch: bool = False,
) -> Report:
    """Export ``model`` to every format it can, measure each on every device present,
    check every output against the PyTorch FP32 reference, and return the Report.

    ``on_row(partial_report)`` is called after each row so that a caller can save
    what is already measured. ``runner_options`` maps a runner name to values of its
    declared options (``backends/<runtime>/options.py``), e.g.
    ``{"openvino": {"performance_hint": "THROUGHPUT"}}``; an unknown runner or option is a
    UsageError.
    Parity is computed once per configuration, in its largest-batch cell (the cheapest
    per image), and shared by its other batch sizes; ``parity_every_batch=True``
    recomputes it in every cell. Raises UsageError for bad arguments; a failure of one
    backend becomes a failed row, never an exception.
    """
    t_start = time.perf_counter()
    prog = progress or Progress()
    sel = _selection(backends, formats, precisions, devices, batch_sizes, threads, warmup_iters, min_iters,
                     min_time_s, cell_timeout_s, seed, runner_options)
    sel.parity_every_batch = bool(parity_every_batch)
    if parity_samples is not None and parity_samples < 1:
        raise UsageError(f"--parity-samples must be >= 1, got {parity_samples}")

    from . import env as envmod
    from . import models

    models.resolve(model)  # an unknown model is a usage error before any work

    cache = Cache(cache_dir, enabled=use_cache)
    warnings: list[str] = []

    def warn(msg: str) -> None:
        warnings.append(msg)
        prog.warn(msg)

    prog.task("probing the environment")
    environment = envmod.collect()
    present = envmod.devices()
    if sel.threads is None:
        sel.threads = environment.cores_physical or environment.cores_logical or 1
    prep = prepare_model(model, weights=weights, parity_samples=parity_samples,
                         calibration_samples=calibration_samples, seed=seed, cache=cache, threads=sel.threads,
                         prog=prog, warn=warn)
    return measure_prepared(prep, sel, environment=environment, present=present, cache=cache, prog=prog,
                            warnings=warnings, command=command, on_row=on_row, t_start=t_start)


@dataclass
class Selection:
    """What to measure and how: compare()'s and run_bundle()'s arguments, checked."""

    backends: tuple[str, ...] | None = None
    formats: tuple[str, ...] | None = None
    precisions: tuple[str, ...] | None = None
    devices: tuple[str, ...] | None = None
    batch_sizes: tuple[int, ...] | None = None
    threads: int | None = None
    warmup_iters: int = 2
    min_iters: int = 5
    min_time_s: float = 1.0
    cell_timeout_s: float = 600.0
    seed: int = 0
    runner_options: dict[str, Options] = field(default_factory=dict)  # runner name -> its declared options
    parity_every_batch: bool = False

    def options_for(self, runner: str) -> Options:
        """The options of ``runner``: the user's, else its declared defaults."""
        return self.runner_options.get(runner) or options_class(runner)()


def _selection(backends, formats, precisions, devices, batch_sizes, threads, warmup_iters, min_iters, min_time_s,
               cell_timeout_s, seed, runner_options) -> Selection:
    """Check the user's choices (UsageError on a bad one) before any work."""
    backends_t = _check_choice("backend", backends, RUNNERS)
    formats_t = _check_choice("format", formats, FORMATS)
    precisions_t = _check_choice("precision", precisions, PRECISIONS)
    devices_t = tuple(devices) if devices is not None else None
    if devices_t is not None:
        for d in devices_t:
            k, _, idx = d.partition(":")
            if k not in DEVICE_KINDS or (idx and not idx.isdigit() and k != "edgetpu"):
                raise UsageError(f"unknown device '{d}'; use cpu, cuda, cuda:N or edgetpu")
    bs_user = parse_batch_sizes(batch_sizes) if batch_sizes is not None else None
    for name, v, lo in (("--warmup", warmup_iters, 0), ("--min-iters", min_iters, 1)):
        if int(v) < lo:
            raise UsageError(f"{name} must be >= {lo}, got {v}")
    if min_time_s < 0 or cell_timeout_s <= 0:
        raise UsageError("--min-time must be >= 0 and --cell-timeout > 0")
    if threads is not None and threads < 1:
        raise UsageError(f"--threads must be >= 1, got {threads}")
    return Selection(backends_t, formats_t, precisions_t, devices_t, bs_user, threads, int(warmup_iters),
                     int(min_iters), float(min_time_s), float(cell_timeout_s), int(seed),
                     check_runner_options(runner_options))


def check_runner_options(given: dict[str, Any] | None) -> dict[str, Options]:
    """``{runner: {option: value}}`` checked against each runner's declared options."""
    out: dict[str, Options] = {}
    for name, vals in (given or {}).items():
        if name not in RUNNERS:
            raise UsageError(f"runner_options: unknown runner '{name}' (known: {', '.join(RUNNERS)})")
        out[name] = vals if isinstance(vals, Options) else options_class(name).build(name, vals)
    return out


@dataclass
class Prepared:
    """Everything measuring needs once the reference exists: no torch in here.

    compare() fills it from the PyTorch model (``prepare_model``); a bundle fills it
    from its files (bundle.run_bundle), with ``arts`` holding the bundle's artifacts."""

    minfo: ModelInfo
    model_spec: dict[str, Any]  # ModelSpec.as_dict(): runners that rebuild the model (PyTorch) read it
    preprocessing: dict[str, Any]
    ds: Any  # data.DataSets: eval (+ labels) for parity, calibration for int8 builds
    ref: Any  # np.ndarray: PyTorch FP32 reference outputs on ds.eval
    arts: _Artifacts = field(default_factory=_Artifacts)
    model: Any = None  # the torch module; None without torch (exporters then work from source files)
    weights_path: str | None = None
    weights_build_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def prepare_model(model: str, *, weights: str = "auto", parity_samples: int | None = None,
                  calibration_samples: int | None = None, seed: int = 0, cache: Cache, threads: int | None = None,
                  prog: Progress | None = None, warn: Callable[[str], None] = lambda m: None) -> Prepared:
    """Inputs, the PyTorch model and its FP32 reference outputs (needs torch)."""
    from . import data as datamod
    from . import models

    prog = prog or Progress()
    spec = models.resolve(model)
    prog.task(f"preparing {spec.name} inputs")
    if spec.family == "lenet":
        ds = datamod.digit_sets(n_calib=calibration_samples or 200, seed=seed)
        if parity_samples is not None:
            ds.eval, ds.eval_labels = ds.eval[:parity_samples], ds.eval_labels[:parity_samples]
    else:
        ds = datamod.photo_sets(spec.preprocess, n_eval=parity_samples or 32, n_calib=calibration_samples or 64,
                                seed=seed)
    prog.task(f"loading {spec.name} weights ({weights})")
    import torch

    if threads is not None:
        torch.set_num_threads(int(threads))
    net, minfo, weights_path, weights_build_s = models.load(spec, weights, ds, cache, seed=seed, log=prog.log,
                                                            warn=warn)
    from .flops import count_flops

    flops_per_image, flops_source = count_flops(net, spec.input_shape)
    minfo = minfo.replace(flops_per_image=flops_per_image, flops_source=flops_source)
    prog.task("computing the PyTorch FP32 reference outputs")
    ref = _reference(cache, net, minfo.weights_hash, ds)
    notes = list(minfo.notes) + [f"inputs: {ds.description}"]
    return Prepared(minfo, spec.as_dict(), spec.preprocess.as_dict(), ds, ref, model=net, weights_path=weights_path,
                    weights_build_s=weights_build_s, notes=notes)


def plan_cells(present: dict[str, list[str]], sel: Selection) -> list[_Cell]:
    """The (format, runner, precision, device) cells of the selection, in table order."""
    cells: list[_Cell] = []
    for f in FORMATS.values():
        if sel.formats is not None and f.name not in sel.formats:
            continue
        for rname in f.runners:
            if sel.backends is not None and rname not in sel.backends:
                continue
            for kind in RUNNERS[rname].device_kinds:
                want = [d for d in (sel.devices or ()) if _device_kind(d) == kind]
                if sel.devices is not None and not want:
                    continue
                have = present.get(kind, [])
                if want:
                    chosen = [d for d in want if d in have or d == kind and have]
                    chosen = [have[0] if d == kind else d for d in chosen]
                else:
                    chosen = list(have)
                for p in f.precisions:
                    if sel.precisions is not None and p not in sel.precisions:
                        continue
                    if not chosen:
                        cells.append(_Cell(f.name, rname, p, kind, None))
                    for d in chosen:
                        cells.append(_Cell(f.name, rname, p, kind, d))
    return cells


def measure_prepared(prep: Prepared, sel: Selection, *, environment, present: dict[str, list[str]], cache: Cache,
                     prog: Progress | None = None, warnings: list[str] | None = None,
                     command: Iterable[str] | None = None, on_row: Callable[[Report], None] | None = None,
                     t_start: float | None = None) -> Report:
    """Plan the cells, probe the runners, get each artifact (``prep.arts``, the cache, or
    an exporter from its source file), measure every cell in an isolated child, check
    parity against ``prep.ref`` and build the Report. Imports no torch itself."""
    t_start = time.perf_counter() if t_start is None else t_start
    prog = prog or Progress()
    warnings = [] if warnings is None else warnings

    def warn(msg: str) -> None:
        warnings.append(msg)
        prog.warn(msg)

    from .devices import measurement_warnings

    for w in measurement_warnings(environment.device_facts):
        warn(w)
    minfo, ds, ref = prep.minfo, prep.ds, prep.ref
    threads = sel.threads or environment.cores_physical or environment.cores_logical or 1

    # ---- plan ----------------------------------------------------------------------
    cells = plan_cells(present, sel)
    if not cells:
        raise UsageError("the selection of --backends/--formats/--precisions/--device leaves nothing to measure")

    bs_by_kind = {k: (sel.batch_sizes or DEFAULT_BATCH_SIZES[k]) for k in DEVICE_KINDS}
    max_batch = max(max(v) for v in bs_by_kind.values())
    settings = Settings(
        batch_sizes={k: tuple(v) for k, v in bs_by_kind.items()},  # type: ignore[arg-type]
        threads=int(threads), warmup_iters=int(sel.warmup_iters), min_iters=int(sel.min_iters),
        min_time_s=float(sel.min_time_s), parity_samples=int(len(ds.eval)), cell_timeout_s=float(sel.cell_timeout_s),
        devices=tuple(d for k in DEVICE_KINDS for d in present.get(k, [])), seed=int(sel.seed),
        requested={"backends": list(sel.backends or ()), "formats": list(sel.formats or ()),
                   "precisions": list(sel.precisions or ()), "devices": list(sel.devices or ()),
                   "batch_sizes": list(sel.batch_sizes or ())},
    )
    from .backends.exporter import ExportContext

    ctx = ExportContext(model=prep.model, model_name=minfo.name, input_shape=tuple(minfo.input_shape),
                        num_classes=minfo.num_classes, calibration=ds.calibration, max_batch=max_batch,
                        preprocessing=dict(prep.preprocessing), log=prog.log,
                        requested=dict(settings.requested), threads=int(threads), cache_root=str(cache.root),
                        batch_sizes={k: tuple(v) for k, v in bs_by_kind.items()},
                        option_sets=dict(sel.runner_options))
    notes = list(prep.notes)
    if not minfo.meaningful_top1:
        notes.append("random weights: top-1 agreement is reported but not judged; int8 rows are reported, not judged "
                     "(top-1 margins of random networks are tiny, so small quantization noise flips them)")
    notes.append("latency: host clock (time.perf_counter_ns) around each blocking call, inputs prepared before "
                 "timing; each sample includes the harness's per-call overhead (see benchmarks/overhead.py)")

    rows: list[RunRecord] = []
    work = Path(tempfile.mkdtemp(prefix="infer-compare-"))
    import numpy as np

    np.save(work / "eval.npy", ds.eval)
    arts = prep.arts
    n_measure = sum(len(bs_by_kind[c.kind]) for c in cells if c.device is not None)
    prog.task("measuring", total=n_measure)

    def partial() -> Report:
        return Report(SCHEMA_VERSION, __version__, _now(), tuple(command or sys.argv), minfo, environment, settings,
                      tuple(rows), tuple(warnings), tuple(notes), round(time.perf_counter() - t_start, 2))

    def add(rec: RunRecord) -> None:
        rows.append(rec)
        prog.row(rec)
        if on_row is not None:
            on_row(partial())

    try:
        for idx, c in enumerate(cells):
            f = get_format(c.fmt)
            base = dict(backend=c.runner, format=c.fmt, precision=c.precision, device=c.device or c.kind,
                        threads=int(threads) if c.kind == "cpu" else None)
            # 1. the runner: implemented, installed, device present, precision supported?
            try:
                rcls = load_impl(RUNNERS[c.runner].impl)
            except (ImportError, AttributeError) as e:
                add(RunRecord(**base, batch_size=None, status=SKIPPED, skip_kind="unavailable",
                              reason=f"the {c.runner} runner is not available in this build ({type(e).__name__}: {e})"))
                continue
            av = _safe_probe(rcls, c.device or c.kind)
            if c.device is None:
                what = {"cuda": "no CUDA device found (NVML / NVIDIA driver)",
                        "edgetpu": "no Coral Edge TPU found (USB 1a6e:089a / 18d1:9302, or /dev/apex_*)"}[c.kind]
                add(RunRecord(**base, batch_size=None, status=SKIPPED, reason=what, skip_kind="no_device",
                              hint=av.hint if not av.available else ""))
                continue
            if not av.available:
                add(RunRecord(**base, batch_size=None, status=SKIPPED, reason=av.reason, hint=av.hint,
                              skip_kind="unavailable"))
                continue
            sup = rcls.supports(c.fmt, c.precision, c.device)
            if not sup.available:
                add(RunRecord(**base, batch_size=None, status=SKIPPED, reason=sup.reason, hint=sup.hint,
                              skip_kind="unsupported"))
                continue
            # 2. the artifact (and its sources), from the cache or built now
            art = _ensure(c.fmt, f.artifact_for(c.precision), ctx, arts, cache, minfo, prep.weights_path,
                          prep.weights_build_s, ds, prog)
            if isinstance(art, tuple):
                status, reason, hint = art
                add(RunRecord(**base, batch_size=None, status=status, reason=reason, hint=hint,
                              skip_kind="unavailable" if status == SKIPPED else ""))
                continue
            # 3. one isolated child per batch size, largest first: that cell computes the parity
            #    (cheapest per image) unless every cell is asked to; rows are added in ascending order
            done: dict[int, RunRecord] = {}
            shared: RunRecord | None = None
            for b in sorted(bs_by_kind[c.kind], reverse=True):
                prog.advance(f"{c.runner} {c.fmt} {c.precision} {c.device} batch {b}")
                rec = _measure(c, b, art, base, minfo, prep.model_spec, ds, ref, settings, work, f"cell{idx}-b{b}",
                               sel.options_for(c.runner), str(cache.root),
                               with_parity=sel.parity_every_batch or shared is None)
                if rec.parity is not None and shared is None:
                    shared = rec
                elif rec.parity is None and shared is not None and rec.status == OK:
                    rec = rec.replace(parity=shared.parity, status=shared.status, reason=shared.reason,
                                      notes=rec.notes + (f"parity measured in the batch-{shared.batch_size} cell "
                                                         "(same artifact and settings)",))
                done[b] = rec
            for b in sorted(done):
                add(done[b])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return partial()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _safe_probe(rcls, device: str) -> Availability:
    try:
        return rcls.probe(device)
    except Exception as e:  # a probe must never take the run down
        return Availability(False, f"probe failed: {type(e).__name__}: {e}")


def _reference(cache: Cache, net, weights_hash: str, ds):
    import numpy as np
    import torch

    def build(tmp):
        outs = []
        with torch.inference_mode():
            for i in range(0, len(ds.eval), 16):
                outs.append(net(torch.from_numpy(ds.eval[i:i + 16])).float().numpy())
        np.save(tmp / "reference.npy", np.concatenate(outs))
        return {"n": int(len(ds.eval))}

    e = cache.get_or_build("reference", {"weights": weights_hash, "data": ds.digest(), "torch": torch.__version__}, build)
    return np.load(e.file("reference.npy"))


def _ensure(fmt: str, prec: str, ctx, arts: _Artifacts, cache: Cache, minfo, weights_path: str | None,
            weights_build_s: float, ds, prog: Progress):
    """ExportRecord of (fmt, prec), building its chain of sources first; or a failure tuple."""
    from .backends.exporter import file_size

    key = (fmt, prec)
    if key in arts.done:
        return arts.done[key]
    if key in arts.failed:
        return arts.failed[key]
    f = get_format(fmt)
    src_key = f.source_of(prec)
    if src_key is None:  # the root: the PyTorch state dict
        if weights_path is None:
            fail = (SKIPPED, "no PyTorch weights file in this run", "")
            arts.failed[key] = fail
            return fail
        rec = ExportRecord(fmt, prec, weights_path, os.path.getsize(weights_path), weights_build_s, True,
                           key=minfo.weights_hash, notes=(f"weights: {minfo.weights}",))
        arts.done[key] = rec
        return rec
    src = _ensure(*src_key, ctx, arts, cache, minfo, weights_path, weights_build_s, ds, prog)
    if isinstance(src, tuple):
        fail = (src[0], f"needs the {src_key[0]} {src_key[1]} artifact: {src[1]}", src[2])
        arts.failed[key] = fail
        return fail
    try:
        ecls = load_impl(f.exporter_for(prec))
    except (ImportError, AttributeError) as e:
        fail = (SKIPPED, f"the {fmt} exporter is not available in this build ({type(e).__name__}: {e})", "")
        arts.failed[key] = fail
        return fail
    try:
        av = ecls.probe()
    except Exception as e:
        av = Availability(False, f"exporter probe failed: {type(e).__name__}: {e}")
    if not av.available:
        try:
            more = ecls.explain_unavailable(ctx.for_format(f), src.path, prec)
        except Exception as e:  # an explanation must never take the run down
            more = f"(pre-check failed: {type(e).__name__}: {e})"
        fail = (SKIPPED, f"cannot build {f.title}: {av.reason}" + (f"; {more}" if more else ""), av.hint)
        arts.failed[key] = fail
        return fail
    fctx = ctx.for_format(f)
    parts = {"format": fmt, "precision": prec, "model": minfo.name, "weights": minfo.weights_hash,
             "input": list(minfo.input_shape), "dtype": "float32", "source": src.key,
             **ecls.cache_extras(fctx, prec)}
    if prec == "int8":
        parts["calibration"] = ds.digest()
    holder: dict[str, Any] = {}

    def build(tmp: Path) -> dict:
        prog.log(f"exporting {f.title} {prec} ...")
        res = ecls().export(fctx, src.path, tmp, prec)
        holder["res"] = res
        return {"file": os.path.relpath(res.path, tmp), "options": res.options, "notes": res.notes,
                "format": fmt, "precision": prec, "model": minfo.name, "source": src.path}

    t0 = time.perf_counter()
    try:
        entry = cache.get_or_build(fmt, parts, build)
    except BackendUnavailable as e:
        fail = (SKIPPED, f"cannot build {f.title} {prec}: {e.reason}", e.hint)
        arts.failed[key] = fail
        return fail
    except InferCompareError as e:
        fail = (EXPORT_FAILED, str(e), "")
        arts.failed[key] = fail
        return fail
    except Exception as e:  # an exporter bug or converter crash is a failed row, not a crashed run
        msg = (str(e).strip().splitlines() or [""])[0]
        fail = (EXPORT_FAILED, f"{f.title} {prec} export failed: {type(e).__name__}: {msg[:300]}", "")
        arts.failed[key] = fail
        return fail
    path = str(entry.path / entry.manifest["file"])
    if entry.hit:
        prog.log(f"{f.title} {prec}: reused from the cache ({entry.path})")
    else:
        prog.log(f"{f.title} {prec}: exported in {time.perf_counter() - t0:.1f} s")
    rec = ExportRecord(fmt, prec, path, file_size(path), float(entry.manifest.get("build_s", 0.0)), entry.hit,
                       key=entry.manifest.get("key", ""), source=src.path,
                       options=entry.manifest.get("options", {}), notes=tuple(entry.manifest.get("notes", ())))
    arts.done[key] = rec
    return rec


def _measure(c: _Cell, b: int, art: ExportRecord, base: dict, minfo, model_spec: dict, ds, ref,
             settings: Settings,
             work: Path, tag: str, runner_opts: Options, cache_dir: str, with_parity: bool = True) -> RunRecord:
    import numpy as np

    from . import parity
    from .isolate import run_cell

    f = get_format(c.fmt)
    out_path = work / f"{tag}.out.npy"
    cell_spec = {
        "runner": RUNNERS[c.runner].impl,  # resolved here: the child sees exactly the parent's table
        "artifact": art.path,
        "device": c.device,
        "options": {"precision": c.precision, "format": c.fmt, "threads": base["threads"], "batch_size": b,
                    "model": dict(model_spec), "cache_dir": cache_dir, "runner": runner_opts.to_dict()},
        "inputs": str(work / "eval.npy"),
        "parity_inputs": str(work / "eval.npy") if with_parity else None,
        "outputs": str(out_path),
        "loop": {"warmup_iters": settings.warmup_iters, "min_iters": settings.min_iters,
                 "min_time_s": settings.min_time_s},
    }
    res = run_cell(cell_spec, settings.cell_timeout_s, work, tag)
    common = dict(base, batch_size=b, export=art, peak_rss_mb=res.get("peak_rss_mb"))
    if not res.get("ok"):
        status = res.get("status", RUN_FAILED)
        reason = res.get("error", "unknown failure")
        status = status if status in (SKIPPED, RUN_FAILED) else RUN_FAILED
        kind = ("unsupported" if "static batch" in reason else "unavailable") if status == SKIPPED else ""
        return RunRecord(**common, status=status, skip_kind=kind,
                         reason=reason, hint=res.get("hint", ""),
                         extra={k: res[k] for k in ("stderr_tail", "traceback") if res.get(k)})
    samples = tuple(int(s) for s in res["samples_ns"])
    stats = LatencyStats.from_samples_ns(samples)
    wall_s = res["wall_ns"] / 1e9
    judge = not (c.precision == "int8" and not minfo.meaningful_top1)
    note = "" if judge else "int8 with random weights: reported, not judged"
    par = None
    status = OK
    reason = ""
    if res.get("outputs_written") and out_path.exists():
        out = np.load(out_path)
        par = parity.compare(ref, out, f.tolerance(c.precision), labels=ds.eval_labels, judge=judge,
                             judge_top1=minfo.meaningful_top1, note=note)
        if not par.passed:
            status, reason = PARITY_FAILED, "; ".join(par.failures) or "non-finite outputs"
    notes = list(res.get("notes", ()))
    if res.get("exec_precision") and res["exec_precision"] not in (c.precision,) and c.precision != "int8":
        notes.append(f"requested {c.precision}, the runtime executed {res['exec_precision']}")
    return RunRecord(
        **common,
        status=status,
        reason=reason,
        exec_precision=res.get("exec_precision", ""),
        latency=stats,
        throughput=b * len(samples) / wall_s if wall_s > 0 else None,
        load_s=res.get("load_s"),
        first_infer_ms=res.get("first_infer_ms"),
        parity=par,
        samples_ns=samples,
        measured_wall_s=wall_s,
        warmup_iters=settings.warmup_iters,
        versions=res.get("versions", {}),
        options=res.get("settings", {}),
        notes=tuple(notes),
        extra=res.get("extra", {}),
    )
