"""The progress callbacks: what a run reports as it goes. The rich display that the CLI and, by default,
the Python API show implements them (base/progress_display.py)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any


class Progress:
    """What a run reports as it goes. ``task`` starts a phase (``total``: how many units it has, None when
    that is not known); ``step`` names the unit running now; ``advance`` says one unit is done (a skipped
    or failed unit too, so that a phase ends at its total); ``phase`` wraps a nested step of unknown length
    (an export) that the display names, with its own elapsed time, while it lasts."""

    def log(self, msg: str) -> None: ...

    def warn(self, msg: str) -> None: ...

    def task(self, msg: str, total: int | None = None) -> None: ...

    def step(self, msg: str) -> None: ...

    def advance(self, msg: str | None = None) -> None: ...

    def phase(self, msg: str) -> AbstractContextManager[None]:
        return nullcontext()

    def row(self, rec: Any) -> None: ...


def phase_of(prog: Any, msg: str) -> AbstractContextManager[None]:
    """``prog.phase(msg)``, or nothing for a Progress-like object written before ``phase`` existed."""
    return getattr(prog, "phase", lambda _m: nullcontext())(msg)


class Warnings(list):
    """The run's warnings: calling it keeps the message (for Report.warnings) and shows it."""

    def __init__(self, prog: Progress):
        super().__init__()
        self.prog = prog

    def __call__(self, msg: str) -> None:
        self.append(msg)
        self.prog.warn(msg)
