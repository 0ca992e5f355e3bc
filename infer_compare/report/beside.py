"""results.html written by a forked child while the parent writes the other files and prints the table (issue 37).

The page's figures (matplotlib) are most of the time between a comparison's last row and its end: 1.4-1.7 s of
results.html on the lent GPU hosts against 0.2-0.4 s for results.json, .md, .csv and the terminal table together
(scripts/tail_probe.py, reports/gpu-x2-round8.md). A fork copies the finished report and the writers' imports
(measure/prefetch.py), so the child only renders and writes; the parent waits for it before it names the files.

Linux only. A fork of a process that has threads is safe for code that takes no lock another thread may hold: the
child renders and writes one file, prints nothing and ends with ``os._exit``; the caller makes sure that no other
thread is importing (a module lock held mid-import would be held for ever in the child: cli/output.py waits for the
report writers' prefetch first, measure/prefetch.py), and a child still running after CHILD_LIMIT_S is ended by
its alarm. Elsewhere, or with ``INFER_COMPARE_HTML_BESIDE=0``, the page is written in turn as before. A child that
fails or is ended is followed by the page written here, so that an error is raised as it would have been.
"""

from __future__ import annotations

import os
import signal
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

SWITCH = "INFER_COMPARE_HTML_BESIDE"
CHILD_LIMIT_S = 120  # the page of a resnet50 run takes 1.4-1.7 s; a child past this is stuck, and the parent writes


def enabled() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork") and \
        os.environ.get(SWITCH, "1") not in ("0", "false", "no")


def write_text(path: Path, text: str) -> None:
    """``text`` into ``path`` atomically (a temporary file beside it, then renamed)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_beside(report: Any, path: Path, render: Callable[[Any], str]) -> Callable[[], None]:
    """Start writing ``render(report)`` into ``path`` in a forked child; the function that waits for it (and
    writes the page here where no child could be forked or the child failed). Call it before naming the file."""
    def here() -> None:
        write_text(path, render(report))

    if not enabled():
        return here
    try:
        with warnings.catch_warnings():  # Python 3.12 warns of any fork in a process with threads
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        return here
    if pid == 0:  # the child: render, write, end without the interpreter's teardown
        code = 1
        try:
            signal.alarm(CHILD_LIMIT_S)  # SIGALRM's default action ends the process
            here()
            code = 0
        finally:
            os._exit(code)

    def wait() -> None:
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            here()
    return wait
