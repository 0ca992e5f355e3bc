"""Measuring on several GPUs at the same time: one worker thread per GPU slot (measure/gpus.py),
each taking the configuration that suits its GPU best (Board: what its process has already tuned,
then plan order), and measuring it
through its own measuring child (its own fork server too: a fork server serves one child at a
time). The thread only waits on its child; the child is the process that measures.

Ctrl-C or SIGTERM reaches the main thread: it sets ``cancel``, which every worker's child poll sees
(measure/isolate.py kills the child's process group), waits for the workers, and raises again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from infer_compare.measure.balance import load_of, partition
from infer_compare.measure.gpus import Slot

JOIN_POLL_S = 0.2


WAIT = object()  # Board.take: nothing for this worker now, but work it may take later (ask again)
WAIT_POLL_S = 0.1
# a group taken over that is expected to take less (a configuration its child skips) is not noted
NOTED_MOVE_S = 0.5


class Board:
    """The configurations still to measure; each worker takes the one its device may measure that suits it
    best (``rank``), the first in plan order among equals.

    With ``family`` (a configuration's runtime: the measuring process it runs in, measure/residents.py) the
    ranks keep what a GPU's process already did: first a configuration of the process now running there and a
    precision it has measured already (cuDNN's algorithm choices for that precision and shape are made:
    torch.compile after eager), then one of that process and a precision no other GPU has measured, then one
    that starts another process on a precision no other GPU has measured, last one whose precision another GPU
    has measured (it is tuned twice). Without ``family``: plan order.

    With ``traced`` (whether a configuration's loads trace on the CPU first: torch.compile, host/gpu_turn.py),
    where a GPU's processes take turns, ties go to what overlaps: a process whose partner on that GPU is on a
    configuration that traces takes one that does not, and the other way round; the GPU's first process takes
    one that does not (so that its partner's tracing starts beside GPU work, not a wait for it).

    With ``seconds`` ((cell, its devices) -> (the GPU seconds it is expected to keep its GPU from others, the
    seconds it takes with a GPU to itself), or None; measure/balance.py), where every configuration that
    several GPUs may measure has figures, a plan: each group (one runtime and precision) on one GPU of its
    pool, the pool's largest expected span as small as can be (balance.partition: its GPU seconds, or its
    processes' own seconds shared among them, ``parts``, whichever is longer). A worker takes from its GPU's
    groups first; with none left, a group still untouched on another GPU where taking it ends the pool sooner
    (that GPU's remaining GPU seconds, running configurations' included, exceed ours plus the group's own
    seconds: torch.compile's tracing then overlaps nothing), else it waits (``WAIT``) while such work is left:
    the other GPU may yet run late."""

    def __init__(self, work: list[tuple[Any, tuple[str, ...]]], family: Callable[[Any], Any] | None = None,
                 traced: Callable[[Any], bool] | None = None,
                 seconds: Callable[[Any, tuple[str, ...]], tuple[float, float] | None] | None = None,
                 clock: Callable[[], float] = time.monotonic, parts: dict[str, int] | None = None):
        self.todo = list(work)
        self.parts = dict(parts or {})  # device -> its measuring processes (two where they take turns)
        self.lock = threading.Lock()
        self.family = family
        self.traced = traced
        self.clock = clock
        # device -> (family, precision) measured there, in order
        self.seen: dict[str, list[tuple[Any, str]]] = {}
        # worker -> (its device, whether its latest configuration traces)
        self.now: dict[str, tuple[str, bool]] = {}
        self.cost: dict[Any, float] = {}  # cell -> its expected GPU seconds (with a plan)
        self.alone: dict[Any, float] = {}  # cell -> its expected seconds with a GPU to itself
        self.plan: dict[Any, str] = {}  # group -> the device planned for it
        self.expected: dict[str, float] = {}  # device -> the GPU seconds planned for it
        self.why_no_plan = ""
        # (group's name, planned device, taker, its own seconds)
        self.moved: list[tuple[str, str, str, float]] = []
        self.touched: set[Any] = set()  # groups of which a configuration has been taken
        self.running: dict[str, tuple[str, Any, float]] = {}  # worker -> (device, cell, when taken)
        self.ended: dict[str, float] = {}  # device -> when its latest configuration ended (clock)
        self.done: list[tuple[Any, Any, float]] = []  # run_on_slots: (cell, slot, its worker's seconds)
        if seconds is not None:
            self._make_plan(seconds)

    def group(self, cell: Any, allowed: tuple[str, ...]) -> tuple[Any, ...]:
        return (allowed, self.family(cell) if self.family else None, str(getattr(cell, "precision", "")))

    def _make_plan(self, seconds: Callable[[Any, tuple[str, ...]], tuple[float, float] | None]) -> None:
        pools: dict[tuple[str, ...], dict[Any, tuple[float, float]]] = {}
        for cell, allowed in self.todo:
            if len(allowed) < 2:
                continue
            s = seconds(cell, allowed)
            if s is None:
                self.why_no_plan = f"{cell.runner} {cell.precision} has no GPU seconds from an earlier run"
                self.cost = {}
                return
            self.cost[cell], self.alone[cell] = float(s[0]), max(float(s[0]), float(s[1]))
            g = self.group(cell, allowed)
            was = pools.setdefault(allowed, {}).get(g, (0.0, 0.0))
            pools[allowed][g] = (was[0] + self.cost[cell], was[1] + self.alone[cell])
        for allowed, costs in pools.items():
            self.plan.update(partition(costs, list(allowed), self.parts))
            for d in allowed:
                mine = [c for g, c in costs.items() if self.plan[g] == d]
                self.expected[d] = load_of(self.parts.get(d, 1),
                                           (sum(c[0] for c in mine), sum(c[1] for c in mine)))

    def remaining(self, device: str, now: float) -> float:
        """The expected GPU seconds ``device`` has left: its planned configurations not yet taken, and what
        its running ones are expected to take still."""
        left = sum(self.cost.get(c, 0.0) for c, a in self.todo if self.plan.get(self.group(c, a)) == device)
        return left + sum(max(0.0, self.cost.get(c, 0.0) - (now - t0))
                          for d, c, t0 in self.running.values() if d == device)

    def _steal(self, device: str, cands: list[tuple[Any, Any, tuple[str, ...]]], now: float) -> Any | None:
        """The untouched group planned for another GPU that
        this one should take now (see the class), or None."""
        here = self.remaining(device, now)
        best: tuple[float, int, Any] | None = None
        for i, cell, allowed in cands:
            g = self.group(cell, allowed)
            owner = self.plan.get(g)
            if owner is None or g in self.touched:
                continue
            mine = [c for c, a in self.todo if self.group(c, a) == g]
            there = self.remaining(owner, now)
            gain = there - max(here + sum(self.alone[c] for c in mine),
                               there - sum(self.cost[c] for c in mine))
            if gain > 0 and (best is None or (-gain, i) < best[:2]):
                best = (-gain, i, g)
        return None if best is None else best[2]

    def rank(self, who: str, cell: Any) -> int:
        if self.family is None:
            return 0
        key = (self.family(cell), str(getattr(cell, "precision", "")))
        mine = self.seen.get(who, [])
        current = mine[-1][0] if mine else None
        elsewhere = any(key in keys for d, keys in self.seen.items() if d != who)
        if key[0] == current and key in mine:
            return 0
        if key[0] == current and not elsewhere:
            return 1
        return 2 if not elsewhere else 3

    def overlap(self, device: str, who: str, cell: Any) -> int:
        """0 where ``cell`` would overlap the GPU's other process (see the class), else 1; 0 without
        ``traced`` or for a worker that is its device's only one (its name is the device's)."""
        if self.traced is None or who == device:  # a GPU's one process, the CPU lane: plan order
            return 0
        partners = [t for w, (d, t) in self.now.items() if d == device and w != who]
        want = not partners[-1] if partners else False
        return int(bool(self.traced(cell)) != want)

    def _planned(self, device: str, cands: list[tuple[Any, Any, tuple[str, ...]]], now: float) -> Any:
        """``cands`` narrowed by the plan: this GPU's groups (and unplanned work), else a group it takes over,
        else WAIT while other GPUs' planned work is left."""
        mine = [x for x in cands if self.plan.get(self.group(x[1], x[2]), device) == device]
        if mine:
            return mine
        g = self._steal(device, cands, now)
        if g is None:
            return WAIT
        own = sum(self.alone.get(c, 0.0) for c, a in self.todo if self.group(c, a) == g)
        self.moved.append((f"{g[1][1] if isinstance(g[1], tuple) else g[1]} {g[2]}",
                           self.plan[g], device, own))
        self.plan[g] = device
        return [x for x in cands if self.group(x[1], x[2]) == g]

    def take(self, device: str, who: str | None = None) -> Any | None:
        """The next configuration for the worker ``who`` (its slot's name; default ``device``) measuring on
        ``device``; WAIT (ask again soon) or None (nothing left for it)."""
        who = who or device
        with self.lock:
            now = self.clock()
            if self.running.pop(who, None) is not None:
                self.ended[device] = now
            cands = [(i, cell, allowed) for i, (cell, allowed) in enumerate(self.todo) if device in allowed]
            if not cands:
                return None
            if self.plan:
                cands = self._planned(device, cands, now)
                if cands is WAIT:
                    return WAIT
            i = min((self.rank(who, cell), self.overlap(device, who, cell), i) for i, cell, _ in cands)[-1]
            cell, allowed = self.todo.pop(i)
            self.touched.add(self.group(cell, allowed))
            self.running[who] = (device, cell, now)
            if self.traced is not None:
                self.now[who] = (device, bool(self.traced(cell)))
            if self.family is not None:
                self.seen.setdefault(who, []).append((self.family(cell), str(getattr(cell, "precision", ""))))
            return cell

    def note(self) -> str:
        """What the plan was and how the GPUs ended, for the report; "" where no GPU pool was planned."""
        if self.why_no_plan:
            return (f"GPU configurations spread in plan order, not by their GPU seconds: {self.why_no_plan} "
                    "of this model and settings "
                    "(measure/balance.py; the next run here plans by this one's). ")
        if not self.expected:
            return ""
        planned = ", ".join(f"{d} {s:.1f} s" for d, s in self.expected.items())
        moved = "".join(f"; {d2} took {g} over from {d1}, which would have ended later"
                        for g, d1, d2, s in self.moved if s >= NOTED_MOVE_S)
        ends = [self.ended[d] for d in self.expected if d in self.ended]
        spread = (f"; their last configurations ended {max(ends) - min(ends):.1f} s apart"
                  if len(ends) > 1 else "")
        return ("GPU configurations spread over the GPUs of each model by the GPU seconds each took in "
                "earlier runs of this model and settings (the median of up to 3, kept in the cache; "
                f"measure/balance.py): planned {planned}{moved}{spread}. ")


def run_on_slots(work: list[tuple[Any, tuple[str, ...]]], slots: list[Slot],
                 measure_one: Callable[[Any, Slot], None], cancel: threading.Event,
                 family: Callable[[Any], Any] | None = None,
                 on_done: Callable[[Slot], None] | None = None,
                 traced: Callable[[Any], bool] | None = None,
                 seconds: Callable[[Any, tuple[str, ...]],
                                   tuple[float, float] | None] | None = None) -> Board:
    """Measure every (cell, devices) of ``work`` on the slots, concurrently; returns the board when all are
    done, its ``done`` holding (cell, slot, seconds its worker spent on it) in the order they ended.
    ``family``, ``traced``, ``seconds``: see Board. ``on_done(slot)``: called from a slot's worker when the
    board has nothing left for it (not after an error or a cancel). An exception in a worker (an interrupt
    included) cancels the others and is raised here."""
    parts: dict[str, int] = {}
    for s in slots:
        parts[s.device] = parts.get(s.device, 0) + 1
    board = Board(work, family, traced, seconds, parts=parts)
    errors: list[BaseException] = []

    def worker(slot: Slot) -> None:
        try:
            while not cancel.is_set():
                cell = board.take(slot.device, slot.name)
                if cell is WAIT:
                    cancel.wait(WAIT_POLL_S)
                    continue
                if cell is None:
                    if on_done is not None:
                        on_done(slot)
                    return
                t0 = time.perf_counter()
                measure_one(cell, slot)
                board.done.append((cell, slot, time.perf_counter() - t0))
        except BaseException as e:  # noqa: BLE001 - carried to the main thread
            errors.append(e)
            cancel.set()

    threads = [threading.Thread(target=worker, args=(s,), name=f"measure-{s.name}", daemon=True)
               for s in slots]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(JOIN_POLL_S)  # short joins: a signal reaches the main thread between them
    except BaseException:
        cancel.set()
        for t in threads:
            t.join()
        raise
    if errors:
        raise errors[0]
    return board
