"""The end of the ``infer-compare`` process without the interpreter's teardown.

After a comparison has printed its table, the interpreter's own shutdown still clears every module and
runs the destructors of the libraries it loaded: 0.74-0.82 s after ``import torch, torchvision`` on an
H100 host, the last 0.77 s of a warm one-GPU ``--model resnet50`` run on a two-H200 host (from its
"results:" line to the end of its output; benchmarks/results/gpu-two-gpus.md). Nothing of that
is work the user asked for.

``end_process(code)`` does what the interpreter's shutdown does that anyone can see: it runs threading's exit
hooks and waits for every non-daemon thread (``threading._shutdown``, as the interpreter does first), runs the
``atexit`` handlers (temporary folders of ``tempfile``, ``multiprocessing``'s, logging's), flushes stdout and
stderr, then ends the process with ``code``. What it leaves out is the clearing of modules and the C/C++
destructors. Files are this program's to close: its writers close theirs (``with``, ``write_text``); the
measuring children already end this way (measure/isolate.py, measure/resident.py).

Only from the main thread; ``INFER_COMPARE_FAST_EXIT=0``: the interpreter's normal end.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def enabled() -> bool:
    return hasattr(os, "_exit") and os.environ.get("INFER_COMPARE_FAST_EXIT", "1") not in ("0", "false", "no")


def end_process(code: int) -> NoReturn:
    """End this process with exit status ``code`` (see the module's docstring)."""
    shutdown = getattr(threading, "_shutdown", None)  # the interpreter's own first step at its end (CPython)
    if not enabled() or shutdown is None or threading.current_thread() is not threading.main_thread():
        sys.exit(code)
    # threading's exit hooks (concurrent.futures tells its idle workers to leave here), then every non-daemon
    # thread joined: joining first would wait forever for a pool's idle worker
    shutdown()
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):  # a reader that went away, a closed stream: nothing left to say
                pass
        os._exit(int(code) & 0xFF)
