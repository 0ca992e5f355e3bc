"""``soak()``: plan the configurations, prepare the model (or read a bundle), get each
artifact through the chain, and soak each configuration and batch size in turn in its
own child process (process.py); the Report, with ``Report.soak`` holding the windows.

It is the comparison's composition (api.compare, measure.measure) with a soak in place
of the measured loop: the same selection checks, artifacts, cache, skipped rows and
interrupt guarantees (the children's process groups are killed, the partial report says
``complete: false`` and lists what did not run).
"""

from __future__ import annotations

import math
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infer_compare.artifacts.chain import Unbuilt
from infer_compare.base import interrupts
from infer_compare.base.batches import is_multi, save
from infer_compare.base.errors import UsageError
from infer_compare.base.progress import Progress, Warnings
from infer_compare.base.records import SCHEMA_VERSION, SKIPPED, Report, RunRecord, cell_label
from infer_compare.base.soak_records import GROWTH_PER_CALLS, SoakResult
from infer_compare.base.version import __version__
from infer_compare.bundle import prepared_from_bundle, verify
from infer_compare.catalog import device_kinds
from infer_compare.catalog.formats import get_format
from infer_compare.host import env
from infer_compare.host.boards import measurement_warnings
from infer_compare.measure.options import MeasureOptions
from infer_compare.measure.plan import plan_cells, settings_for
from infer_compare.measure.run import (  # the comparison's row base and probe (docs/soak.md)
    cannot_run,
    cell_spec,  # the comparison's cell spec (docs/soak.md); a soak needs no parity
    chain_for,
    row_base,
)
from infer_compare.prepare.model import check_model, prepare_any
from infer_compare.soak.child import SoakSpec
from infer_compare.soak.process import Collected, row_of, soak_one, soak_result

UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
MIN_WINDOW_S = 0.05
IN_PROGRESS = "soak in progress (a file left like this: the run was killed)"


def parse_duration(text: str | float, what: str = "--duration") -> float:
    """'90s', '10m', '1h', '1h30m', '500ms' or plain seconds ('600', 600) -> seconds, > 0.
    Anything else is a UsageError (one line)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        v = float(text)
    else:
        s = str(text).strip().lower()
        parts = re.findall(r"(\d+(?:\.\d*)?|\.\d+)(ms|min|s|m|h)", s)
        if re.fullmatch(r"\d+(?:\.\d*)?|\.\d+", s):
            v = float(s)
        elif parts and "".join(a + b for a, b in parts) == s.replace(" ", ""):
            v = sum(float(a) * UNITS[b] for a, b in parts)
        else:
            raise UsageError(f"bad {what} {text!r}: give seconds or a number with a unit, e.g. 90s, 10m, 1h, "
                             "1h30m, 500ms")
    if not math.isfinite(v) or v <= 0:
        raise UsageError(f"{what} must be more than 0 seconds, got {text!r}")
    return v


def check_times(duration: str | float, window: str | float) -> tuple[float, float]:
    d, w = parse_duration(duration, "--duration"), parse_duration(window, "--window")
    if w < MIN_WINDOW_S:
        raise UsageError(f"--window must be at least {MIN_WINDOW_S} s, got {window!r}")
    if w > d:
        raise UsageError(f"--window ({w:g} s) is longer than --duration ({d:g} s)")
    return d, w


def fmt_duration(s: float) -> str:
    if s >= 3600 and s % 3600 == 0:
        return f"{s / 3600:g} h"
    if s >= 60 and s % 60 == 0:
        return f"{s / 60:g} min"
    return f"{s:g} s"


@dataclass
class _Flight:
    """The configuration being soaked: what its row and result are made of."""

    got: Collected
    base: dict[str, Any]
    batch: int
    art: Any
    label: str
    spec: SoakSpec
    warmup_iters: int

    def entry(self) -> tuple[RunRecord, SoakResult] | None:
        if not self.got.windows:
            return None
        return (row_of(self.got, self.base, self.batch, self.art, self.warmup_iters),
                soak_result(self.got, self.label, self.spec))


class _SoakRun:
    """The rows and soak results so far, the configuration in flight, and the report they make."""

    def __init__(self, prep: Any, environment: Any, notes: list[str], warnings: list[str], prog: Progress,
                 command: Iterable[str] | None, on_update: Callable[[Report], None] | None, t_start: float):
        self.prep, self.environment, self.notes, self.warnings = prep, environment, notes, warnings
        self.prog, self.command, self.on_update, self.t_start = prog, command, on_update, t_start
        self.settings: Any = None  # plan.settings_for(), once the cells are planned
        self.rows: list[RunRecord] = []
        self.results: list[SoakResult] = []
        self.planned: list[str] = []  # labels of every configuration and batch size to soak
        self.done: set[str] = set()
        self.current: _Flight | None = None

    def report(self, why_incomplete: str = "", with_in_flight: bool = False) -> Report:
        rows, results = list(self.rows), list(self.results)
        cur = self.current.entry() if with_in_flight and self.current is not None else None
        if cur is not None:
            rows.append(cur[0])
            results.append(cur[1])
        have = {r.label for r in rows} | self.done
        return Report(SCHEMA_VERSION, __version__, time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                      tuple(self.command or sys.argv), self.prep.minfo, self.environment,
                      self.settings, tuple(rows),
                      tuple(self.warnings), tuple(self.notes), round(time.perf_counter() - self.t_start, 2),
                      complete=not why_incomplete, incomplete_reason=why_incomplete, soak=tuple(results),
                      not_run=tuple(x for x in self.planned if x not in have) if why_incomplete else ())

    def save(self, why_incomplete: str, with_in_flight: bool = True) -> None:
        """Hand the report so far to ``on_update`` (the CLI writes it): incomplete until the end."""
        if self.on_update is not None:
            self.on_update(self.report(why_incomplete, with_in_flight))

    def add(self, row: RunRecord, result: SoakResult | None = None, labels: Iterable[str] = ()) -> None:
        self.rows.append(row)
        self.done.update(labels or (row.label,))
        if result is not None:
            self.results.append(result)
        self.prog.row(row)
        self.save(IN_PROGRESS, with_in_flight=False)


def _notes(prep: Any, duration: float, window: float) -> list[str]:
    return list(prep.notes) + [
        f"soak: each configuration ran in its own process for {fmt_duration(duration)} in windows of "
        f"{fmt_duration(window)}, after its cold call and warm-up; one window line per window as it ended",
        "a row's latency covers every call of its soak: count, mean, std, min and max exactly, its "
        "percentiles from a histogram of 1 %-wide bins (within 0.5 %); each window's percentiles are exact",
        f"RSS growth per {GROWTH_PER_CALLS:,} calls: least-squares slope of the windows' RSS (VmRSS) against "
        "the calls made, over the windows after the first; drift: the last full window over the first",
        "a soak checks no parity: run the comparison for it",
    ]


def _prepared(model: str | None, bundle: str | None, sel: Any, weights: str, seed: int, cache: Any,
              prog: Progress, warn: Callable[[str], None], input_shape: str | None = None,
              data: Any = None) -> Any:
    """The comparison's Prepared (prepare.model.prepare_any: a built-in or the user's model, with the same
    inputs laid out by role: --input-shape, --input-value, --data), or a bundle's."""
    if bundle is not None:
        prog.task("verifying the bundle")
        v = verify(bundle)
        prog.log(f"bundle verified: {v.n_files} files, {v.n_bytes / 2**20:.1f} MiB, sha256 ok")
        return prepared_from_bundle(v)
    return prepare_any(str(model), weights=weights, input_shape=input_shape, example_input=None, data=data,
                       parity_samples=None, calibration_samples=None, seed=seed, cache=cache,
                       threads=sel.threads, prog=prog, warn=warn)


# the options a soak does not take: it measures windows, not a loop stopped by a statistic
NOT_FOR_SOAK = ("min_iters", "min_time_s", "max_time_s", "target_ci", "parity_every_batch", "scenarios", "io",
                "concurrency", "artifacts")


def soak(model: str | None = None, *, bundle: str | Path | None = None, duration_s: float | str = 600.0,
         window_s: float | str = 10.0, weights: str = "auto", options: MeasureOptions | None = None,
         command: Iterable[str] | None = None, progress: Progress | None = None,
         on_update: Callable[[Report], None] | None = None, sensors_root: str = "/",
         input_shape: str | None = None, data: Any = None, **measure: Any) -> Report:
    """Soak each configuration of the selection (batch size 1 unless ``batch_sizes``) for ``duration_s``
    in windows of ``window_s`` (seconds, or text such as "10m"); the Report with ``Report.soak``.

    What to soak: ``options`` and/or its fields as keywords, as ``compare()`` (those in NOT_FOR_SOAK
    aside). ``on_update(partial_report)`` gets the report after each window (marked incomplete until the
    end) so that a caller can save it. ``input_shape`` and ``data`` (a DataOptions: --data, --input-value)
    size and feed the model's inputs as a comparison does. Raises UsageError for bad arguments; a
    configuration that fails is a failed row with the windows it finished. On KeyboardInterrupt (Ctrl-C;
    SIGTERM through the CLI) the child is killed, ``on_update`` gets the partial report (``complete``
    False) and the interrupt goes on.
    """
    t_start = time.perf_counter()
    opts = MeasureOptions.of(options, measure, "soak")
    if opts.differing(NOT_FOR_SOAK):
        raise UsageError(f"a soak measures windows: {', '.join(opts.differing(NOT_FOR_SOAK))} do not apply")
    duration, window = check_times(duration_s, window_s)
    if (model is None) == (bundle is None):
        raise UsageError("name a model (--model) or a bundle (--bundle DIR), one of the two")
    prog = progress or Progress()
    sel = opts.selection(batch_sizes=opts.batch_sizes if opts.batch_sizes is not None else [1], min_iters=1,
                         min_time_s=0.0, target_ci=None)
    if model is not None:
        check_model(model, None)  # an unknown built-in model is a usage error before any work
    warnings = Warnings(prog)
    cache = opts.cache(warn=warnings, log=prog.log)
    prog.task("probing the environment")
    environment = env.collect()
    sel.threads = sel.threads or environment.cores_physical or environment.cores_logical or 1
    prep = _prepared(model, None if bundle is None else str(bundle), sel, weights, opts.seed, cache, prog,
                     warnings, input_shape, data)
    run = _SoakRun(prep, environment, _notes(prep, duration, window), warnings, prog, command,
                   on_update, t_start)
    _soak_all(run, sel, cache, duration, window, sensors_root)
    run.warnings.extend(m for m in cache.messages if m not in run.warnings)
    return run.report()


def _labels(c: Any, batches: Iterable[int]) -> list[str]:
    return [cell_label(c.runner, c.fmt, c.precision, c.device or c.kind, b) for b in batches]


def _soak_all(run: _SoakRun, sel: Any, cache: Any, duration: float, window: float, sensors_root: str) -> None:
    """Plan the cells, then soak each in turn; on an interrupt, the partial report goes to ``on_update``."""
    present = device_kinds.present()
    for w in measurement_warnings(run.environment.device_facts):
        run.warnings.append(w)
        run.prog.warn(w)
    cells = plan_cells(present, sel)
    # a soak measures one process for its duration: no passes
    run.settings = replace(settings_for(sel, present, sel.threads, len(run.prep.ds.eval)), passes=1)
    run.planned = [x for c in cells if c.device is not None
                   for x in _labels(c, run.settings.batch_sizes[c.kind])]
    chain = chain_for(run.prep, sel, run.settings, cache, run.prog)
    work = Path(tempfile.mkdtemp(prefix="infer-compare-soak-"))
    try:
        ev = run.prep.ds.eval  # several inputs: one array per name, as the comparison writes them
        save(work / ("eval.npz" if is_multi(ev) else "eval.npy"), ev)
        for idx, c in enumerate(cells):
            _soak_cell(run, c, idx, chain, sel, work, cache, duration, window, sensors_root)
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM (cli): the child's group is killed by now (process.py)
        run.save(str(e) or "interrupted by SIGINT (Ctrl-C)", with_in_flight=True)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _soak_cell(run: _SoakRun, c: Any, idx: int, chain: Any, sel: Any, work: Path, cache: Any, duration: float,
               window: float, sensors_root: str) -> None:
    """One configuration: its skipped row, or a soak of each of its batch sizes."""
    base = row_base(c, run.settings.threads or 1)
    batches = tuple(sorted(run.settings.batch_sizes[c.kind]))
    labels = _labels(c, batches)
    _, skipped = cannot_run(c, base)
    interrupts.check()  # a signal swallowed by a runtime's import (base/interrupts.py)
    if skipped is not None:
        more = (chain.explain(c.fmt, get_format(c.fmt).artifact_for(c.precision, c.runner))
                if c.device is None else "")
        run.add(skipped.replace(reason=f"{skipped.reason}; {more}") if more else skipped, labels=labels)
        return
    art = chain.get(c.fmt, get_format(c.fmt).artifact_for(c.precision, c.runner))
    if isinstance(art, Unbuilt):
        run.add(RunRecord(**base, batch_size=None, status=art.status, reason=art.reason, hint=art.hint,
                          skip_kind="unavailable" if art.status == SKIPPED else ""), labels=labels)
        return
    for b in batches:
        _soak_batch(run, c, b, art, sel, work, f"cell{idx}-b{b}", cache, duration, window, sensors_root, base)


def _soak_batch(run: _SoakRun, c: Any, b: int, art: Any, sel: Any, work: Path, tag: str, cache: Any,
                duration: float, window: float, sensors_root: str, base: dict[str, Any]) -> None:
    cell = cell_spec(c, art, (b,), run.prep, sel, run.settings, work, tag, cache)
    spec = SoakSpec(cell.replace(parity_inputs=None, outputs="", parity_limit={}), duration, window,
                    sensors_root)
    label = _labels(c, (b,))[0]
    got = Collected()
    run.current = _Flight(got, base, b, art, label, spec, run.settings.warmup_iters)
    run.prog.task(f"soaking {label} for {fmt_duration(duration)}", total=max(1, round(duration / window)))
    try:
        soak_one(spec, work, tag, run.settings.cell_timeout_s, got, on_line=lambda d: _on_line(run, label, d))
    except KeyboardInterrupt:
        got.interrupted = True
        raise
    entry = run.current.entry()
    run.current = None
    if entry is None:
        run.add(row_of(got, base, b, art, run.settings.warmup_iters))
    else:
        run.add(*entry)


def window_text(label: str, d: dict[str, Any]) -> str:
    """One window as a progress line."""
    p99 = d.get("p99_ms")
    temps = d.get("temperatures_c") or {}
    return (f"{label} window {d['index'] + 1}: {d['calls']:,} calls, p50 {d['p50_ms']:.3g} ms, p99 "
            + (f"{p99:.3g} ms" if p99 is not None else "–") + f", {d['throughput']:,.0f} img/s"
            + (f", RSS {d['rss_mb']:.1f} MB" if d.get("rss_mb") is not None else "")
            + (f", GPU {d['gpu_memory_mib']:.0f} MiB" if d.get("gpu_memory_mib") is not None else "")
            + (f", max {max(temps.values()):.0f} °C" if temps else ""))


def _on_line(run: _SoakRun, label: str, d: dict[str, Any]) -> None:
    kind = d.get("kind")
    if kind == "start":
        rss = d.get("rss_mb")
        run.prog.log(f"{label}: loaded in {d.get('load_s') or 0:.2f} s" + (f", RSS after warm-up {rss:.1f} MB"
                                                                           if rss is not None else ""))
    elif kind == "window":
        run.prog.advance(f"{label} window {d['index'] + 1}")
        run.prog.log(window_text(label, d))
        run.save(IN_PROGRESS)
