"""Ray's own output kept out of the user's: the driver's file descriptors 1 and 2 point at a log file
while Ray runs (raylet dumps when a node dies, colour codes and all; its C++ warnings, such as
"Failed to determine local IP via external connectivity to: 8.8.8.8"; its retries), and the fleet's
own lines go to the terminal through copies of the original descriptors. The log's path is said once,
in the run's last line, when Ray wrote anything."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TextIO

from infer_compare.base.errors import UsageError

LOG_NAME = "ray-driver.log"


class RayOutput:
    """``with RayOutput(dir / LOG_NAME) as io:`` Ray writes to the log; ``io.out``/``io.err`` reach the
    user."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.out: TextIO = sys.stdout
        self.err: TextIO = sys.stderr
        self._saved: tuple[int, int] | None = None
        self._made_dir = False

    def __enter__(self) -> RayOutput:
        self._made_dir = not self.path.parent.exists()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as e:
            raise UsageError(f"cannot write to {self.path.parent}: {e.strerror or e}") from None
        sys.stdout.flush()
        sys.stderr.flush()
        self._saved = (os.dup(1), os.dup(2))
        self.out = os.fdopen(os.dup(self._saved[0]), "w", buffering=1, errors="replace")
        self.err = os.fdopen(os.dup(self._saved[1]), "w", buffering=1, errors="replace")
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        return self

    def __exit__(self, kind, exc, tb) -> None:
        for s in (sys.stdout, sys.stderr, self.out, self.err):
            try:
                s.flush()
            except (OSError, ValueError):
                pass
        if self._saved is not None:
            os.dup2(self._saved[0], 1)
            os.dup2(self._saved[1], 2)
            for fd in self._saved:
                os.close(fd)
            self._saved = None
        self.out.close()
        self.err.close()
        self.out, self.err = sys.stdout, sys.stderr
        if kind is not None:  # a one-line error says what went wrong; the log holds only Ray's retries
            self.path.unlink(missing_ok=True)
            if self._made_dir:
                try:
                    self.path.parent.rmdir()
                except OSError:
                    pass

    def lines(self) -> int:
        """How many lines Ray wrote (0: no log worth naming)."""
        try:
            with open(self.path, "rb") as f:
                return sum(1 for _ in f)
        except OSError:
            return 0

    def said(self) -> str:
        """The one line that names the log, or "" when Ray wrote nothing (the empty file is removed)."""
        n = self.lines()
        if n == 0:
            self.path.unlink(missing_ok=True)
            return ""
        return (f"fleet: Ray's own messages ({n} line{'s' if n != 1 else ''}: node deaths, warnings) "
                f"are in {self.path}")
