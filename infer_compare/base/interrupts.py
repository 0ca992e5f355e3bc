"""Ctrl-C, SIGTERM and SIGHUP that no library can swallow.

Python raises KeyboardInterrupt wherever the main thread happens to be when the signal arrives. Inside a
C extension's import that can turn into something else: a SIGINT during ``import onnxruntime`` (its
pybind11 module init) came out as an ImportError, which the runner's probe reported as "onnxruntime fails
to import", and the run went on to the end and exited 0 (tests/test_faults.py caught it, one run in a few).
So the handlers below also remember the signal, and the measuring loop calls :func:`check` after every
probe and between cells: a signal that was swallowed is raised again there.

SIGHUP (the terminal closed) stops a run as SIGTERM does: the rows measured so far are saved, the report
is marked incomplete ("interrupted by SIGHUP"), exit 129. Under ``nohup`` (SIGHUP ignored) it stays ignored.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as an interrupt: the run stops the same way as on Ctrl-C (exit 143)."""

    exit_status = 143
    said = "terminated (SIGTERM)"


class HungUp(Terminated):
    """SIGHUP (the terminal closed, or ``kill -HUP``), delivered as SIGTERM is: exit 129 (128 + 1)."""

    exit_status = 129
    said = "interrupted (SIGHUP: the terminal closed)"


_received: list[BaseException] = []


def _raise(exc: BaseException) -> None:
    if not _received:
        _received.append(exc)
    raise exc


def on_sigterm(signum, frame) -> None:
    _raise(Terminated("terminated by SIGTERM"))


def on_sighup(signum, frame) -> None:
    _quiet_dead_terminal()
    _raise(HungUp("interrupted by SIGHUP"))


def on_sigint(signum, frame) -> None:
    _raise(KeyboardInterrupt())


def _quiet_dead_terminal() -> None:
    """stdout and stderr that can no longer be written (a terminal that hung up answers EIO, even to an
    empty write) go to /dev/null: the progress display's last update and the closing lines then cannot
    fail, and stop, the saving of what was measured."""
    for fd in (1, 2):
        try:
            os.write(fd, b"")
        except OSError:
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, fd)
                os.close(null)
            except OSError:
                pass


def install() -> None:
    """The process's handlers for SIGTERM and SIGHUP (a SIGHUP ignored, as ``nohup`` leaves it, stays
    ignored); the main thread only."""
    signal.signal(signal.SIGTERM, on_sigterm)
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        signal.signal(signal.SIGHUP, on_sighup)


def exit_status(e: KeyboardInterrupt) -> tuple[int, str]:
    """(exit status, what to say) for an interrupt: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP."""
    if isinstance(e, Terminated):
        return e.exit_status, e.said
    return 130, "interrupted"


def check() -> None:
    """Raise the interrupt received since :func:`watch` began, if a library swallowed it."""
    if _received:
        raise _received[0]


@contextlib.contextmanager
def watch() -> Iterator[None]:
    """While measuring: SIGINT (when Python's default handler is in place) through :func:`on_sigint`; the
    record of received signals cleared on entry. The main thread only (signal handlers live there)."""
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    prev = signal.getsignal(signal.SIGINT)
    mine = prev is signal.default_int_handler
    if mine:
        signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        if mine:
            signal.signal(signal.SIGINT, prev)
