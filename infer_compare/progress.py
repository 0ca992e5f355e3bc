"""The progress callbacks the CLI implements with a rich display; the API alone is silent."""

from __future__ import annotations

from typing import Any


class Progress:
    def log(self, msg: str) -> None: ...

    def warn(self, msg: str) -> None: ...

    def task(self, msg: str, total: int | None = None) -> None: ...

    def advance(self, msg: str | None = None) -> None: ...

    def row(self, rec: Any) -> None: ...
