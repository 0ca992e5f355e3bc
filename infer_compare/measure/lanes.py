"""Which configurations are measured at the same time, and where: the GPU configurations spread over
several GPUs (measure/gpus.py, ``--gpus``), and with ``--cpu-rows beside`` (or ``auto``, the default, on a
host with cores enough) the CPU configurations in a lane of their own cores beside them (one GPU is
enough), then every other cell in turn. The lanes run as threads (measure/parallel.py), each waiting on
its own measuring children.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from infer_compare.catalog.device_kinds import kind_of
from infer_compare.catalog.runtimes import runtimes
from infer_compare.host import gpu_turn
from infer_compare.measure import balance, prefetch
from infer_compare.measure.gpus import (
    Slot,
    assign,
    concurrency_note,
    cpu_rows_beside,
    make_lanes,
    make_slots,
    usable_cpus,
    with_turns,
)
from infer_compare.measure.parallel import run_on_slots


def lanes(run: Any, cells: list[Any], sel: Any, turns: bool = False) -> tuple[list[Slot], Slot | None]:
    """(GPU slots, the CPU lane or None): a slot per CUDA device the plan names (this process's numbering,
    with its GPU's facts) where there are several, where the CPU configurations run beside the GPU ones, or
    where each GPU's processes take turns (``turns``). Beside the CPU lane, each of a GPU's processes taking
    turns gets the cores one process would have (GPU_LANE_CPUS) where the lane still keeps its share of the
    host; else they share those of one (the CPU rows keep the lane they would have had without turns)."""
    devices = list(dict.fromkeys(c.device for c in cells if c.kind == "cuda" and c.device))
    gpus = list(getattr(run.environment, "gpus", ()) or ())
    cpu_cells = any(c.kind == "cpu" and c.device for c in cells)
    mode = getattr(sel, "cpu_rows", "after")
    if mode != "after" and sel.gpus != "sequential" and devices and cpu_cells:
        # --threads as given (sel.threads is filled in from the host)
        asked = getattr(sel, "threads_asked", None)
        why = ""
        for parts in dict.fromkeys((gpu_turn.PARTS if turns else 1, 1)):
            got = make_lanes(gpus, devices, int(run.settings.threads or 1), parts=parts)
            beside, why = cpu_rows_beside(mode, got[1] if got else None, len(usable_cpus()), asked)
            if beside and got is not None:
                return got
        if why:
            run.notes.append(why)
    return (make_slots(gpus, devices) if len(devices) > 1 or (turns and devices) else []), None


def measure_cells(run: Any, cells: list[Any], sel: Any, one_cell: Callable[..., None],
                  workdir: Any = None, last: bool = True, prefix: str = "") -> None:
    """The GPU configurations on several GPUs at once where there are several and ``--gpus`` is not
    sequential, the CPU configurations beside them with ``--cpu-rows beside``; then every other cell in
    turn. Where the plan compiles on a GPU (``workdir`` given, host/gpu_turn.py), each GPU is measured by two
    processes taking turns, their lock files in ``workdir``. ``one_cell(cell, tag, slot=None)`` measures one.
    The report writers' imports start once no CPU configuration is left to measure (measure/prefetch.py), in
    the ``last`` pass. ``prefix``: before each cell's tag (a later pass: measure/passes.py), which then keeps
    no seconds for the balance."""
    tags = {id(c): f"{prefix}cell{i}" for i, c in enumerate(cells)}
    if last and not any(_on_cpu(c) for c in cells):
        prefetch.start()
    turns = bool(workdir) and sel.gpus != "sequential" and _turns_wanted(run, cells)
    slots, lane = lanes(run, cells, sel, turns)
    if turns:
        slots = with_turns(slots, str(workdir))
    work, rest = assign(cells, slots, sel.gpus) if len(slots) > 1 or lane is not None else ([], cells)
    if lane is not None:
        beside = [c for c in rest if c.kind == "cpu" and c.device]
        rest = [c for c in rest if not (c.kind == "cpu" and c.device)]
        work += [(c, ("cpu",)) for c in beside]
    if work:
        used = [s for s in [*slots, *([lane] if lane else [])]
                if any(s.device in allowed for _, allowed in work)]
        run.concurrent = {"concurrent_with": ", ".join(dict.fromkeys(s.device for s in used))}
        run.notes.append(concurrency_note(sel.gpus, used))
        for s in used:
            with pinned_thread(s.cores):  # a slot's fork servers start (and import) on its own cores
                run.servers_for(s)

        def measure(c: Any, s: Slot) -> None:
            tag = f"{tags[id(c)]}-{s.device.replace(':', '')}"
            # the lane's own work (an export) on its cores
            with pinned_thread(s.cores if not s.is_gpu else ()):
                one_cell(c, tag, s)

        store = run.cache
        key = balance.store_key(run.prep.minfo, run.settings) if store is not None else ""
        board = run_on_slots(work, used, measure, run.cancel, family=family_of,
                             on_done=_prefetch_when_cpu_lane_ends(rest if last else [*rest, *cells]),
                             traced=(lambda c: gpu_turn.traced_loads(c.runner) > 0) if turns else None,
                             seconds=_expected(balance.load(store, key), used, work)
                             if store is not None and balance.enabled() else None)
        run.concurrent = {}
        note = board.note()
        if note:
            run.notes.append(note)
        if not prefix:
            balance.save(store, key, balance.measured(run.rows, board.done))
    for i, c in enumerate(rest):
        if last and not any(map(_on_cpu, rest[i:])):
            prefetch.start()
        one_cell(c, tags[id(c)])
    if work:  # the rows in plan order, whichever lane finished first
        order: dict[tuple, int] = {}
        for i, c in enumerate(cells):
            order.setdefault((c.runner, c.fmt, c.precision, c.kind), i)
        run.rows.sort(key=lambda r: order.get((r.backend, r.format, r.precision, kind_of(r.device)),
                                              len(order)))


def _expected(kept: dict[str, list[balance.Run]], slots: list[Slot],
              work: list[tuple[Any, tuple[str, ...]]]) -> Any:
    """(cell, its devices) -> the (GPU seconds, own seconds) the kept runs on that GPU model expect of it, by
    group (measure/balance.py estimates), or None."""
    pool = {s.device: s.pool for s in slots}
    by_pool: dict[str, list[Any]] = {}
    for cell, allowed in work:
        by_pool.setdefault(pool.get(allowed[0], ""), []).append(cell)
    est: dict[Any, tuple[float, float]] = {}
    for p, cells in by_pool.items():
        # Board.group's
        est.update(balance.estimates(cells, kept.get(p, []), lambda c: (family_of(c), c.precision)))

    def seconds(cell: Any, allowed: tuple[str, ...]) -> tuple[float, float] | None:
        return est.get(cell)
    return seconds


def _turns_wanted(run: Any, cells: list[Any]) -> bool:
    """Whether each GPU's two processes take turns (host/gpu_turn.py), judged on the GPUs' memory and the
    model's weights; where the plan compiles and they may not, the report says why."""
    if not gpu_turn.compiles_on_gpu(cells):
        return False
    why = gpu_turn.room(list(getattr(run.environment, "gpus", ()) or ()), weights_bytes(run))
    if why:
        run.notes.append(why)
    return not why


def weights_bytes(run: Any) -> int:
    """The bytes of the PyTorch model's parameters and buffers (0 without a PyTorch model)."""
    model = getattr(getattr(run, "prep", None), "model", None)
    if model is None:
        return 0
    try:
        return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    except Exception:  # no PyTorch model (an ONNX file): nothing to weigh
        return 0


def _prefetch_when_cpu_lane_ends(rest: list[Any]) -> Callable[[Slot], None]:
    """The hook of a slot whose worker has nothing left: the CPU lane's end starts the report writers' imports
    on its cores, unless CPU configurations remain to be measured in turn after the lanes."""
    def on_done(slot: Slot) -> None:
        if not slot.is_gpu and not any(map(_on_cpu, rest)):
            prefetch.start(slot.cores)
    return on_done


def _on_cpu(c: Any) -> bool:
    """A configuration whose timing the host's CPU carries: every one measured off a CUDA GPU (the CPU's own,
    an accelerator driven from the host); a cell with no device measures nothing."""
    return c.kind != "cuda" and bool(c.device)


def family_of(cell: Any) -> tuple[str, str]:
    """A configuration's measuring process on the board
    (measure/parallel.py): its device kind and its runtime."""
    return (cell.kind, runtime_of(cell.runner))


def runtime_of(runner: str) -> str:
    """The runtime whose measuring process measures ``runner``'s configurations (one per runtime and GPU)."""
    return next((rt.name for rt in runtimes() if any(r.name == runner for r in rt.runners)), runner)


@contextmanager
def pinned_thread(cores: tuple[int, ...]) -> Iterator[None]:
    """This thread (and what it starts) on ``cores`` while the block runs; nothing for ()."""
    if not cores or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, set(cores))
    except OSError:
        before = None
    try:
        yield
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)
