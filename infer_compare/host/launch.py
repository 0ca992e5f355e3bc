"""The one way the tool starts a child process of its own: a fresh interpreter running
``python -m MODULE ARGS``, in a process group of its own, with its output in a file.

Every child uses it: the measuring child (measure/isolate.py, or its fork server), the export
child (artifacts/chain.py), the soaking child (soak/process.py), the TFLite conversion
(backends/tflite/export.py), the divergence search (parity/divergence.py) and the fork server
itself (measure/forkserver.py). What they share:

* ``popen``: the command line, the environment (``PYTHONUNBUFFERED=1`` on top of the parent's) and
  ``start_new_session``, so that ``kill_group`` reaches the child and everything it started;
* ``ChildNotStarted``: a child that cannot be started at all (a board short of memory or processes,
  qemu-user's EFAULT under proot) is an error with its reason, which each caller turns into a failed
  row or a failed export, never the end of the run;
* ``run``: start, wait up to a timeout, kill the group on the timeout and when the parent is
  interrupted (Ctrl-C, SIGTERM: no child survives its parent);
* ``tail`` and ``describe_exit``: the last lines of the child's output and how it ended, for the
  reason of a failure.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

TAIL_LINES = 12


class ChildNotStarted(OSError):
    """The child process could not be started (``fork``/``exec`` failed); the message says why."""


def tail(text: str, n: int = TAIL_LINES) -> str:
    """The last ``n`` non-empty lines of a child's output."""
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


def read_tail(path: Path, n: int = TAIL_LINES) -> str:
    """``tail`` of the file a child wrote its output to ("" when there is none)."""
    try:
        return tail(Path(path).read_text(errors="replace"), n)
    except OSError:
        return ""


def describe_exit(rc: int | None) -> str:
    """How a child that left no result ended: the signal that killed it, or its exit status."""
    if rc is not None and rc < 0:
        try:
            return f"killed by signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exited with status {rc} without a result"


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The parent's environment, ``env`` on top, and unbuffered output (a crash keeps its last lines)."""
    out = {**os.environ, **(env or {})}
    out.setdefault("PYTHONUNBUFFERED", "1")
    return out


# a start that failed with EFAULT ("Bad address") is tried again this many times: under qemu-user and proot
# (the Arm check, scripts/arm64-check) starting the guest's own interpreter failed so once in CI ("[Errno 14]
# Bad address: '/opt/ic/bin/python'"), a fault of the emulation, not of the command (qemu-user emulates vfork
# with a true fork: CPython issue 131398); elsewhere it does not happen, and a second try costs nothing
EXEC_RETRIES = 2


def popen(module: str, args: list[str], env: dict[str, str] | None = None, python: str | None = None,
          **kw: Any) -> subprocess.Popen:
    """Start ``python -m module *args`` in a new process group (``python``: another interpreter than this
    one, e.g. the other side's environment of an A/B gate); ``kw`` as ``subprocess.Popen`` (stdout, stderr,
    stdin, cwd, text...). Raises ChildNotStarted (one line) when the process cannot be started."""
    for attempt in range(1 + EXEC_RETRIES):
        try:
            return subprocess.Popen([python or sys.executable, "-m", module, *args], env=child_env(env),
                                    start_new_session=True, **kw)
        except OSError as e:
            if e.errno == errno.EFAULT and attempt < EXEC_RETRIES:
                continue
            raise ChildNotStarted(f"could not start the {module.rsplit('.', 1)[-1]} process: "
                                  f"{type(e).__name__}: {e}") from None
    raise AssertionError("unreachable")  # pragma: no cover


def kill_group(proc: Any) -> None:
    """Kill the child's whole process group (it and whatever it started), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def run(module: str, args: list[str], timeout_s: float, log_path: Path, env: dict[str, str] | None = None,
        cwd: str | None = None) -> tuple[int | None, bool]:
    """Run ``python -m module *args`` with stdout and stderr to ``log_path`` and wait: (return code,
    timed out). The group is killed on the timeout and when the parent is interrupted."""
    with open(log_path, "w+", errors="replace") as log:
        proc = popen(module, args, env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            return proc.returncode, True
        except BaseException:  # Ctrl-C, SIGTERM: no child survives its parent
            kill_group(proc)
            raise
    return proc.returncode, False
