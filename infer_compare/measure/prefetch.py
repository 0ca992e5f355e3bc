"""The report writers made ready while the last configurations are measured, not after the last row.

After its last row a comparison writes its report; the HTML one draws its plots with matplotlib, whose import
and first figure are fixed work: measured on an H100 host (benchmarks/gpu/tail_probe.py, the 65 rows of a
resnet50 report), writing results.html took 2.0-2.2 s in a fresh interpreter and 1.1-1.3 s once matplotlib,
its SVG backend and report/plots.py were imported (0.4-0.5 s of imports). Here a background thread of the
comparison's own process imports them, so that the writing after the last row finds them imported. Imports
only: Python's import locks make an import from two threads safe, whereas drawing a figure here while the
report draws its own would share matplotlib's font objects between threads.

When: only once no CPU configuration is left to measure (measure/lanes.py starts it: at once where the plan
has none, when the CPU lane's worker ends, or before the first GPU-only cell of the configurations measured in
turn), on the cores the CPU lane had where there was one, so that this work never shares cores with a CPU row;
the GPU rows' measuring processes keep cores of their own. It changes nothing measured: no measuring process
sees it.

A prefetch that fails is ignored: the real import, in ``report.write_all``, raises as it did. Off with
``INFER_COMPARE_PREFETCH=0``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from infer_compare.report.writers import REPORT_WRITERS, import_writers

_lock = threading.Lock()
_started: threading.Thread | None = None


def enabled() -> bool:
    return os.environ.get("INFER_COMPARE_PREFETCH", "1") not in ("0", "false", "no")


def warm(modules: Sequence[str] = REPORT_WRITERS, cores: Sequence[int] = ()) -> list[str]:
    """Import ``modules`` in order, stopping at the first that fails; the modules imported. ``cores``: this
    thread runs on them (Linux), where given."""
    if cores and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, set(cores))  # pid 0: the calling thread only (Linux)
        except OSError:
            pass
    return import_writers(modules)


def start(cores: Sequence[int] = ()) -> threading.Thread | None:
    """The prefetch in a daemon thread, once per process
    (later calls return the same thread); None when off."""
    global _started
    if not enabled():
        return None
    with _lock:
        if _started is None:
            _started = threading.Thread(target=warm, args=(REPORT_WRITERS, tuple(cores)),
                                        name="infer-compare-report-prefetch", daemon=True)
            _started.start()
        return _started
