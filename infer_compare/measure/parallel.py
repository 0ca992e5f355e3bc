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
from collections.abc import Callable
from typing import Any

from infer_compare.measure.gpus import Slot

JOIN_POLL_S = 0.2


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
    one that does not (so that its partner's tracing starts beside GPU work, not a wait for it)."""

    def __init__(self, work: list[tuple[Any, tuple[str, ...]]], family: Callable[[Any], Any] | None = None,
                 traced: Callable[[Any], bool] | None = None):
        self.todo = list(work)
        self.lock = threading.Lock()
        self.family = family
        self.traced = traced
        self.seen: dict[str, list[tuple[Any, str]]] = {}  # device -> (family, precision) measured there, in order
        self.now: dict[str, tuple[str, bool]] = {}  # worker -> (its device, whether its latest configuration traces)

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
        """0 where ``cell`` would overlap the GPU's other process (see the class), else 1; 0 without ``traced`` or
        for a worker that is its device's only one (its name is the device's)."""
        if self.traced is None or who == device:  # a GPU's one process, the CPU lane: plan order
            return 0
        partners = [t for w, (d, t) in self.now.items() if d == device and w != who]
        want = not partners[-1] if partners else False
        return int(bool(self.traced(cell)) != want)

    def take(self, device: str, who: str | None = None) -> Any | None:
        """The next configuration for the worker ``who`` (its slot's name; default ``device``) measuring on
        ``device``, or None."""
        who = who or device
        with self.lock:
            mine = [(self.rank(who, cell), self.overlap(device, who, cell), i)
                    for i, (cell, allowed) in enumerate(self.todo) if device in allowed]
            if not mine:
                return None
            i = min(mine)[-1]
            cell = self.todo.pop(i)[0]
            if self.traced is not None:
                self.now[who] = (device, bool(self.traced(cell)))
            if self.family is not None:
                self.seen.setdefault(who, []).append((self.family(cell), str(getattr(cell, "precision", ""))))
            return cell


def run_on_slots(work: list[tuple[Any, tuple[str, ...]]], slots: list[Slot],
                 measure_one: Callable[[Any, Slot], None], cancel: threading.Event,
                 family: Callable[[Any], Any] | None = None,
                 on_done: Callable[[Slot], None] | None = None, traced: Callable[[Any], bool] | None = None) -> None:
    """Measure every (cell, devices) of ``work`` on the slots, concurrently; returns when all are done.
    ``family``: see Board. ``on_done(slot)``: called from a slot's worker when the board has nothing left for
    it (not after an error or a cancel). ``traced``: see Board. An exception in a worker (an interrupt included)
    cancels the others and is raised here."""
    board = Board(work, family, traced)
    errors: list[BaseException] = []

    def worker(slot: Slot) -> None:
        try:
            while not cancel.is_set():
                cell = board.take(slot.device, slot.name)
                if cell is None:
                    if on_done is not None:
                        on_done(slot)
                    return
                measure_one(cell, slot)
        except BaseException as e:  # noqa: BLE001 - carried to the main thread
            errors.append(e)
            cancel.set()

    threads = [threading.Thread(target=worker, args=(s,), name=f"measure-{s.name}", daemon=True) for s in slots]
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
