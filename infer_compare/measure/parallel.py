"""Measuring on several GPUs at the same time: one worker thread per GPU slot (measure/gpus.py),
each taking the next configuration that its GPU may measure, in plan order, and measuring it
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
    """The configurations still to measure; each worker takes the first its device may measure."""

    def __init__(self, work: list[tuple[Any, tuple[str, ...]]]):
        self.todo = list(work)
        self.lock = threading.Lock()

    def take(self, device: str) -> Any | None:
        with self.lock:
            for i, (cell, allowed) in enumerate(self.todo):
                if device in allowed:
                    del self.todo[i]
                    return cell
        return None


def run_on_slots(work: list[tuple[Any, tuple[str, ...]]], slots: list[Slot],
                 measure_one: Callable[[Any, Slot], None], cancel: threading.Event) -> None:
    """Measure every (cell, devices) of ``work`` on the slots, concurrently; returns when all are done.
    An exception in a worker (an interrupt included) cancels the others and is raised here."""
    board = Board(work)
    errors: list[BaseException] = []

    def worker(slot: Slot) -> None:
        try:
            while not cancel.is_set():
                cell = board.take(slot.device)
                if cell is None:
                    return
                measure_one(cell, slot)
        except BaseException as e:  # noqa: BLE001 - carried to the main thread
            errors.append(e)
            cancel.set()

    threads = [threading.Thread(target=worker, args=(s,), name=f"measure-{s.device}", daemon=True) for s in slots]
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
