"""The end of the ``infer-compare`` process without the interpreter's teardown.

After a comparison has printed its table, the interpreter's own shutdown still clears every module and runs the
destructors of the libraries it loaded: 0.74-0.82 s after ``import torch, torchvision`` on a lent H100 host
(scripts/probe_round6.sh), the last 0.77 s of a warm one-GPU ``--model resnet50`` run on the two-H200 host of
round 5 (from its "results:" line to the end of its output). Nothing of that is work the user asked for.

``end_process(code)`` does what the interpreter's shutdown does that anyone can see: it waits for every non-daemon
thread, runs the ``atexit`` handlers (temporary folders of ``tempfile``, ``multiprocessing``'s, logging's),
flushes stdout and stderr, then ends the process with ``code``. What it leaves out is the clearing of modules
and the C/C++ destructors. Files are this program's to close: its writers close theirs (``with``, ``write_text``);
the measuring children already end this way (measure/isolate.py, measure/resident.py).

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
    me = threading.current_thread()
    if not enabled() or me is not threading.main_thread():
        sys.exit(code)
    for t in threading.enumerate():
        if t is not me and not t.daemon:
            t.join()  # as the interpreter's shutdown waits for them
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
