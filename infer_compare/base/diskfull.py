"""Telling a full disk from other failures, whatever words the failing library used.

An exporter that runs out of space raises ``OSError(ENOSPC)`` at best; OpenVINO says "iostream
error", a converter in a child process prints its own message. ``reason`` names the disk-full case
plainly: from the errno anywhere in the exception's chain, from the system's words for it in the
message, or, for the vaguer I/O words, from the free space actually left where the tool writes.
A row whose reason carries :data:`DISK_FULL` makes the run exit non-zero (cli/output.exit_code).
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterable

DISK_FULL = "disk full (ENOSPC)"
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
LOW_FREE_BYTES = 64 << 20  # below this, a vague I/O failure of a build is taken for a full disk
_WORDS = ("no space left on device", "disk quota exceeded", "enospc", "errno 28",
          "not enough space on the disk", "out of disk space")
_IO_WORDS = ("iostream error", "i/o error", "input/output error", "write error", "failed to write",
             "cannot write", "unable to write", "could not write", "short write", "error writing",
             "failed to save")


def _chain(e: BaseException):
    seen = 0
    while e is not None and seen < 16:
        yield e
        e, seen = e.__cause__ or e.__context__, seen + 1


def low_space(paths: Iterable[str | os.PathLike | None]) -> str:
    """'<path>: 3 MiB free' for the first of ``paths`` (existing) under LOW_FREE_BYTES, else ''."""
    for p in paths:
        if p is None or not os.path.exists(p):
            continue
        try:
            free = shutil.disk_usage(p).free
        except OSError:
            continue
        if free < LOW_FREE_BYTES:
            return f"{p}: {free / 2**20:.0f} MiB free"
    return ""


def reason(e: BaseException, paths: Iterable[str | os.PathLike | None] = ()) -> str:
    """'disk full (ENOSPC)[: <where>]' when ``e`` comes from a full disk, else ''."""
    paths = list(paths)
    chain = list(_chain(e))
    text = " ".join(str(x) for x in chain).lower()
    if (any(isinstance(x, OSError) and x.errno in FULL_ERRNOS for x in chain)
            or any(w in text for w in _WORDS)):
        where = low_space(paths)
        return DISK_FULL + (f" under {where}" if where else "")
    if any(w in text for w in _IO_WORDS):
        where = low_space(paths)
        return f"{DISK_FULL} under {where}" if where else ""
    return ""


def is_disk_full(text: str) -> bool:
    return DISK_FULL in (text or "")
