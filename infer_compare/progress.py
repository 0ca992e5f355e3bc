"""The progress callbacks the CLI implements with a rich display; the API alone is silent."""

from __future__ import annotations

from typing import Any


class Progress:
    def log(self, msg: str) -> None: ...

    def warn(self, msg: str) -> None: ...

    def task(self, msg: str, total: int | None = None) -> None: ...

    def advance(self, msg: str | None = None) -> None: ...

    def row(self, rec: Any) -> None: ...


class Warnings(list):
    """The run's warnings: calling it keeps the message (for Report.warnings) and shows it."""

    def __init__(self, prog: Progress):
        super().__init__()
        self.prog = prog

    def __call__(self, msg: str) -> None:
        self.append(msg)
        self.prog.warn(msg)
