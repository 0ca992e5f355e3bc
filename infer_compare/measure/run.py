"""Measuring: every cell of the plan through an isolated child, rows out.

For each configuration (format, runner, precision, device) of the plan: probe the runner (a skipped row with
the reason and the install hint when it cannot run), get the artifact from the chain (a skipped or
export_failed row when it cannot be had), then measure all its batch sizes in one child process
(measure/isolate.py) and check each batch size's outputs against the reference. Imports no torch itself."""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from infer_compare.artifacts.chain import ArtifactChain, Unbuilt
from infer_compare.artifacts.given_check import check_given
from infer_compare.backends.exporter import file_size
from infer_compare.base import interrupts
from infer_compare.base.batches import count, is_multi, save
from infer_compare.base.cache import Cache
from infer_compare.base.progress import Progress
from infer_compare.base.records import (
    SCHEMA_VERSION,
    SKIPPED,
    Availability,
    ExportRecord,
    Report,
    RunRecord,
    Settings,
    cell_label,
)
from infer_compare.base.timeline import ARTIFACT, CONFIGURATION, PREPARE, Timeline
from infer_compare.base.version import __version__
from infer_compare.catalog.device_kinds import DEVICE_KINDS, kind_of
from infer_compare.catalog.formats import RUNNERS, get_format
from infer_compare.catalog.runtimes import load_impl
from infer_compare.host.boards import measurement_warnings
from infer_compare.measure import passes
from infer_compare.measure.cells import CellSpec
from infer_compare.measure.forkservers import ForkServers, preloads
from infer_compare.measure.gpus import Slot, spell_cores
from infer_compare.measure.isolate import CORES_ENV, run_cell
from infer_compare.measure.lanes import measure_cells
from infer_compare.measure.plan import Cell, Selection, plan_cells, settings_for
from infer_compare.measure.residents import NOTE as RESIDENT_NOTE
from infer_compare.measure.residents import Residents, reap
from infer_compare.measure.residents import enabled as residents_enabled
from infer_compare.measure.rows import record_from_result
from infer_compare.measure.run_notes import run_notes, scenario_notes
from infer_compare.measure.specs import MIN_PARITY_SUBSET, _how_spec, cell_spec, chain_for  # noqa: F401 (soak)
from infer_compare.prepare.prepared import Prepared

# a resident process per runtime and device
RESIDENT_KINDS = ("cuda",)
PARTIAL = "the run had not finished when this file was saved (a partial report, saved after each row)"


class _Run:
    """The rows so far and the report they make; ``on_row`` sees each partial report."""

    def __init__(self, prep: Prepared, environment: Any, settings: Settings, notes: list[str],
                 warnings: list[str], prog: Progress, command: Iterable[str] | None,
                 on_row: Callable[[Report], None] | None, t_start: float):
        self.prep, self.environment, self.settings, self.notes = prep, environment, settings, notes
        self.warnings, self.prog, self.command, self.on_row, self.t_start = (
            warnings, prog, command, on_row, t_start)
        self.rows: list[RunRecord] = []
        self.not_run: tuple[str, ...] = ()
        self.incomplete_reason = ""
        self.cells: list[Cell] = []  # the plan, once known: a partial report lists the cells still to run
        self.finished = False  # set when measure() returns normally: only then is the report complete
        self.servers = ForkServers(prog.log)
        # runner -> the modules its runtime's fork server imports
        self.preload: dict[str, tuple[str, ...]] = {}
        self.timeline = Timeline(t_start)
        # rows, progress, timeline and the artifact chain, when GPUs measure at once
        self.lock = threading.RLock()
        self.cancel = threading.Event()  # set on an interrupt: every GPU worker's child is killed
        self.concurrent: dict[str, str] = {}  # recorded on each row measured while several GPUs measured
        # a GPU slot's own fork servers (one child at a time each)
        self.slot_servers: dict[str, ForkServers] = {}
        # measures one configuration's spec: (spec, timeout_s, workdir, tag, server, settings, env=, cancel=)
        self.cell_runner: Callable[..., list] = self.isolated
        self.residents: Residents | None = None  # GPU configurations: a resident process per runtime and GPU
        self.cache: Cache | None = None  # set by measure(): lanes keep each GPU configuration's seconds there
        self.arts: dict[int, ExportRecord] = {}  # id(cell) -> its artifact, once measured: the later passes
        self.starts: dict[int, float] = {}  # id(cell) -> its first process's start (passes.start_cost)

    def report(self) -> Report:
        """The report so far. Until the run has finished it is marked incomplete (a partial save: a process
        killed after it leaves a file that can never pass for a finished run), listing the cells still to
        run."""
        why, todo = self.incomplete_reason, self.not_run
        if not why and not self.finished:
            why, todo = PARTIAL, self.pending(self.cells)
        return Report(SCHEMA_VERSION, __version__, time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                      tuple(self.command or sys.argv), self.prep.minfo, self.environment, self.settings,
                      tuple(self.rows), tuple(self.warnings), tuple(self.notes),
                      round(time.perf_counter() - self.t_start, 2), complete=not why,
                      not_run=todo, incomplete_reason=why, timeline=self.timeline.spans())

    def pending(self, cells: list[Cell]) -> tuple[str, ...]:
        """The labels of every cell (and batch size) of ``cells`` that has no row yet."""
        have = {r.label for r in self.rows}
        todo = []
        for c in cells:
            for b in self.settings.batch_sizes[c.kind] if c.device is not None else (None,):
                label = cell_label(c.runner, c.fmt, c.precision, c.device or c.kind, b)
                if label not in have and not any(r.label.startswith(label.rsplit("/", 1)[0] + "/-")
                                                 for r in self.rows):
                    todo.append(label)
        return tuple(todo)

    def interrupted(self, cells: list[Cell], why: str) -> None:
        """Mark the report incomplete, listing every cell (and batch size) that has no row, and hand
        it to ``on_row`` so that the caller saves it."""
        self.not_run, self.incomplete_reason = self.pending(cells), why
        if self.on_row is not None:
            self.on_row(self.report())

    def add(self, rec: RunRecord) -> None:
        with self.lock:
            self.rows.append(rec)
            self.prog.row(rec)
            if self.on_row is not None:
                self.on_row(self.report())

    def servers_for(self, slot: Slot | None) -> ForkServers:
        """The fork servers of ``slot`` (the run's own for the first slot,
        a GPU's; the CPU lane has its own)."""
        if slot is None:
            return self.servers
        if slot.name not in self.slot_servers:
            mine = self.servers if not self.slot_servers else (
                self.servers.take_spare() or ForkServers(self.prog.log, self.servers.cache_root))
            self.slot_servers[slot.name] = mine
            for mods in dict.fromkeys(self.preload.values()):
                mine.launch(mods)  # the imports start now, beside the other slots' work
        return self.slot_servers[slot.name]

    def isolated(self, spec: CellSpec, timeout_s: float, work: Path, tag: str, server: Any,
                 settings: Settings, env: dict[str, str] | None = None, cancel: Any = None) -> list:
        """Measure one configuration: a GPU configuration in the resident process of its runtime and GPU
        (measure/residents.py), any other in a process of its own."""
        resident = self.residents is not None and kind_of(spec.device) in RESIDENT_KINDS
        if not resident and self.residents is not None:
            self.residents.release(server)  # a fork server serves one child at a time
        return run_cell(spec, timeout_s, work, tag, env=env, server=server, cancel=cancel,
                        residents=self.residents if resident else None)

    def close_servers(self) -> None:
        """End the resident processes (before their fork servers: a forked resident is in a session of its
        own) and the fork servers. Their exits (a resident's CUDA context going: 0.3-0.4 s at the end of a
        warm 2 x H200 run) are waited for by a thread of their own, beside the report's writing; the process's
        end joins it (host/process_end.py), and any still running after residents.STOP_WAIT_S is killed."""
        procs = self.residents.close(wait=False) if self.residents is not None else []
        for s in [self.servers, *self.slot_servers.values()]:
            procs += s.close(wait=False)  # closing twice is harmless
        if procs:
            threading.Thread(target=reap, args=(procs,), name="reap-measuring-processes").start()


def row_base(c: Cell, threads: int) -> dict[str, Any]:
    return dict(backend=c.runner, format=c.fmt, precision=c.precision, device=c.device or c.kind,
                threads=int(threads) if c.kind == "cpu" else None,
                variant=f"user:{Path(c.artifact).name}" if c.artifact else "")


def _given_artifact(c: Cell, sel: Selection) -> ExportRecord:
    """The record of a pre-built artifact the user gave (--artifact): measured exactly as given."""
    art = next(a for a in sel.artifacts if a.path == c.artifact)
    return ExportRecord(c.fmt, c.precision, art.path, file_size(art.path), 0.0, True, key=art.sha256[:20],
                        notes=(f"the user's pre-built artifact, measured as given ({art.how})",))


def cannot_run(c: Cell, base: dict[str, Any]) -> tuple[Any, RunRecord | None]:
    """The runner class, or the skipped row that says why this cell cannot run here."""
    def skip(reason: str, kind: str, hint: str = "") -> tuple[Any, RunRecord]:
        return None, RunRecord(**base, batch_size=None, status=SKIPPED, reason=reason, hint=hint,
                               skip_kind=kind)
    try:
        rcls = load_impl(RUNNERS[c.runner].impl)
    except (ImportError, AttributeError) as e:
        return skip(f"the {c.runner} runner is not available in this build ({type(e).__name__}: {e})",
                    "unavailable")
    try:
        av = rcls.probe(c.device or c.kind)
    except Exception as e:  # a probe must never take the run down
        av = Availability(False, f"probe failed: {type(e).__name__}: {e}")
    if c.device is None:
        return skip(DEVICE_KINDS[c.kind].absent_reason, "no_device", av.hint if not av.available else "")
    if not av.available:
        return skip(av.reason, "unavailable", av.hint)
    sup = rcls.supports(c.fmt, c.precision, c.device)
    if not sup.available:
        return skip(sup.reason, "unsupported", sup.hint)
    return rcls, None


def _measure_config(run: _Run, c: Cell, art: ExportRecord, sel: Selection, work: Path, tag: str,
                    cache: Cache, slot: Slot | None = None, later: int = 0) -> None:
    """Measure configuration ``c`` at its batch sizes; ``later``: the number of a later pass (passes.py),
    whose results join the rows of the first."""
    batches = tuple(sorted(run.settings.batch_sizes[c.kind]))
    static = next(a.static_batch for a in sel.artifacts if a.path == c.artifact) if c.artifact else \
        run.prep.static_batch
    if static is not None:  # the model's static batch: the other batch sizes are skipped rows that say so
        for b in batches:
            if b != static:
                run.add(RunRecord(**_row_base(c, run, slot), batch_size=b, status=SKIPPED,
                                  skip_kind="unsupported", export=art,
                                  reason=f"the model has a static batch of {static}; batch {b} cannot run"))
                run.prog.advance(None)
        batches = tuple(b for b in batches if b == static)
        if not batches:
            return
    spec = cell_spec(c, art, batches, run.prep, sel, run.settings, work, tag, cache)
    spec = passes.again(spec) if later else spec
    env = None
    # the child sees this GPU alone, as cuda:0 (the CPU lane: its threads), on the slot's cores
    if slot is not None:
        spec = (spec.replace(device="cuda:0") if slot.is_gpu
                else spec.replace(threads=slot.threads or spec.threads))
        env = {**slot.env(), **({CORES_ENV: spell_cores(slot.cores)} if slot.cores else {})}
    with run.lock:
        if later:
            run.timeline.mark(f"{c.runner} {c.fmt} {c.precision} {slot.device if slot else c.device} "
                              f"(pass {later})", CONFIGURATION)
        run.prog.step(f"{f'pass {later}: ' if later else ''}{c.runner} {c.fmt} {c.precision} "
                      f"{slot.device if slot else c.device} batch {','.join(map(str, batches))}")
    # a slot's servers: its worker's alone
    server = run.servers_for(slot).for_modules(run.preload.get(c.runner, ()))
    results = run.cell_runner(spec, run.settings.cell_timeout_s, work, tag, server, run.settings, env=env,
                              cancel=run.cancel)
    with run.lock:
        for _ in batches:
            run.prog.advance(None)
    if later:
        _join(run, _row_base(c, run, slot), results)
        return
    run.arts[id(c)] = art
    run.starts[id(c)] = passes.start_cost(results)
    # a file that is already int8 runs integer kernels whatever its row is called: judged as int8
    tol = get_format(c.fmt).tolerance("int8" if run.prep.file_precision == "int8" else c.precision)
    for res in results:
        out = Path(spec.outputs_for(res.batch_size))
        rec = record_from_result(res, _row_base(c, run, slot), art, run.prep, tol,
                                 out if res.outputs_written and out.exists() else None, run.settings)
        run.add(rec.replace(extra={**rec.extra, **slot.facts(), **run.concurrent})
                if slot is not None else rec)


def _single_pass(run: _Run, c: Cell, start_s: float) -> None:
    """The rows of a configuration not measured again (passes.REVISIT_MAX_START_S) say why."""
    why = (f"its process took {start_s:.1f} s to start (over {passes.REVISIT_MAX_START_S:g} s): measured in "
           "one process")
    with run.lock:
        run.rows = [r.replace(extra={**r.extra, "single_pass": why})
                    if (r.backend, r.format, r.precision, r.variant) == (c.runner, c.fmt, c.precision,
                                                                        row_base(c, 1)["variant"])
                    and r.latency is not None else r for r in run.rows]


def _join(run: _Run, base: dict[str, Any], results: list) -> None:
    """A later pass's results into the rows of the first (the same configuration, batch size and scenario)."""
    with run.lock:
        where = {passes.row_key(r): i for i, r in enumerate(run.rows)}
        for res in results:
            key = (base["backend"], base["format"], base["precision"], base["device"], res.batch_size,
                   res.scenario, base.get("variant", ""))
            if key in where:
                run.rows[where[key]] = passes.merge(run.rows[where[key]], res)
        if run.on_row is not None:
            run.on_row(run.report())


def _row_base(c: Cell, run: _Run, slot: Slot | None) -> dict[str, Any]:
    threads = (slot.threads if slot is not None and slot.threads else None) or run.settings.threads or 1
    return row_base(c if slot is None else replace(c, device=slot.device), threads)


def measure(prep: Prepared, sel: Selection, *, environment, present: dict[str, list[str]], cache: Cache,
            prog: Progress | None = None, warnings: list[str] | None = None,
            command: Iterable[str] | None = None, on_row: Callable[[Report], None] | None = None,
            t_start: float | None = None, servers: ForkServers | None = None,
            timeline: Timeline | None = None, cell_runner: Callable[..., list] | None = None) -> Report:
    """Plan the cells, probe the runners, get each artifact (carried, cached or built), measure
    every configuration in an isolated child, check parity against ``prep.ref``; the Report.
    ``cell_runner``: measures each configuration instead of one isolated child (the A/B gate: two)."""
    prog = prog or Progress()
    warnings = [] if warnings is None else warnings
    for w in measurement_warnings(environment.device_facts):
        warnings.append(w)
        prog.warn(w)
    threads = sel.threads or environment.cores_physical or environment.cores_logical or 1
    cells = plan_cells(present, sel)
    unchecked = check_given(sel.artifacts, prep.minfo, prep.ds.eval, prep.ref)  # a mismatch: one line, exit 2
    settings = settings_for(sel, present, threads, count(prep.ds.eval))
    if cell_runner is not None:  # the gate measures in its own process pairs: one pass
        settings = replace(settings, passes=1)
    run = _Run(prep, environment, settings,
               run_notes(prep, MIN_PARITY_SUBSET) + scenario_notes(settings) + unchecked, warnings, prog,
               command, on_row, time.perf_counter() if t_start is None else t_start)
    chain = chain_for(prep, sel, settings, cache, prog)
    run.cache = cache
    work = Path(tempfile.mkdtemp(prefix="infer-compare-"))
    run.cells = cells
    # a cell_runner starts its own processes: no fork server
    run.preload = {} if cell_runner else preloads(c.runner for c in cells if c.device is not None)
    run.servers = servers or ForkServers(prog.log, str(cache.root))
    run.timeline = timeline or run.timeline
    run.cell_runner = cell_runner or run.cell_runner
    rows = sum(len(settings.batch_sizes[c.kind]) for c in cells if c.device is not None)
    if hasattr(cell_runner, "planned"):  # the A/B gate plans its process pairs for the gate's family of rows
        configs = sum(1 for c in cells if c.device is not None and settings.batch_sizes[c.kind])
        cell_runner.planned(rows, configs)
    run.residents = Residents(work / "residents") if not cell_runner and residents_enabled() else None
    if run.residents is not None and any(c.kind in RESIDENT_KINDS and c.device for c in cells):
        run.notes.append(RESIDENT_NOTE)
    try:
        save(work / ("eval.npz" if is_multi(prep.ds.eval) else "eval.npy"), prep.ds.eval)
        prog.task("measuring", total=settings.passes * rows)
        with interrupts.watch():
            _measure_cells(run, cells, chain, sel, work, cache)
            interrupts.check()
        run.finished = True
    # Ctrl-C or SIGTERM (cli): the children are killed by now (measure/isolate.py)
    except KeyboardInterrupt as e:
        run.interrupted(cells, str(e) or "interrupted by SIGINT (Ctrl-C)")
        raise
    finally:
        run.timeline.mark("closing", PREPARE)
        run.close_servers()
        shutil.rmtree(work, ignore_errors=True)
        run.warnings.extend(m for m in cache.messages if m not in run.warnings)
    return run.report()


def _measure_cells(run: _Run, cells: list[Cell], chain: ArtifactChain, sel: Selection, work: Path,
                   cache: Cache) -> None:
    """Every cell: on several GPUs at once, the CPU ones beside them, or in turn (measure/lanes.py)."""
    own = run.cell_runner == run.isolated  # the gate measures its own way: no turns on a GPU
    n = run.settings.passes
    measure_cells(run, cells, sel,
                  lambda c, tag, slot=None: _one_cell(run, c, chain, sel, work, cache, tag, slot),
                  workdir=work if own else None, last=n < 2)
    for k in range(2, n + 1):
        todo = [c for c in cells if id(c) in run.arts and run.starts[id(c)] <= passes.REVISIT_MAX_START_S]
        for c in cells:
            if c not in todo:
                _advance_skipped(run, c)
                if k == 2 and id(c) in run.arts:
                    _single_pass(run, c, run.starts[id(c)])
        measure_cells(run, todo, sel, lambda c, tag, slot=None, k=k: _measure_config(
            run, c, run.arts[id(c)], sel, work, tag, cache, slot, later=k),
            workdir=work if own else None, last=k == n, prefix=f"p{k}-")
    if n > 1:
        with run.lock:
            run.rows = passes.finalize(run.rows)
            run.notes = list(dict.fromkeys(run.notes))


def _one_cell(run: _Run, c: Cell, chain: ArtifactChain, sel: Selection, work: Path, cache: Cache, tag: str,
              slot: Slot | None = None) -> None:
    """Probe, get the artifact (under the run's lock: the chain builds one artifact at a time), measure."""
    with run.lock:
        base = _row_base(c, run, slot)
        what = f"{c.runner} {c.fmt} {c.precision} {base['device']}"
        run.timeline.mark(f"{what}: runner probe and artifact", ARTIFACT)
        _, skipped = cannot_run(c, base)
        interrupts.check()  # a signal during a runtime's import can come out of its probe as an ImportError
        if skipped is not None:
            more = chain.explain(c.fmt, get_format(c.fmt).artifact_for(c.precision, c.runner)) \
                if c.device is None else ""
            run.add(skipped.replace(reason=f"{skipped.reason}; {more}") if more else skipped)
            _advance_skipped(run, c)
            return
        art = _given_artifact(c, sel) if c.artifact else \
            chain.get(c.fmt, get_format(c.fmt).artifact_for(c.precision, c.runner))
        if isinstance(art, Unbuilt):
            run.add(RunRecord(**base, batch_size=None, status=art.status, reason=art.reason, hint=art.hint,
                              skip_kind=art.skip_kind if art.status == SKIPPED else ""))
            _advance_skipped(run, c)
            return
        run.timeline.mark(what, CONFIGURATION)
    _measure_config(run, c, art, sel, work, tag, cache, slot)


def _advance_skipped(run: _Run, c: Cell) -> None:
    """A cell that will not be measured still counts in the progress total (its batch sizes, on a device)."""
    for _ in run.settings.batch_sizes[c.kind] if c.device is not None else ():
        run.prog.advance(None)
