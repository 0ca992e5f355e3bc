"""Ctrl-C and SIGTERM that no library can swallow.

Python raises KeyboardInterrupt wherever the main thread happens to be when the signal arrives. Inside a
C extension's import that can turn into something else: a SIGINT during ``import onnxruntime`` (its
pybind11 module init) came out as an ImportError, which the runner's probe reported as "onnxruntime fails
to import", and the run went on to the end and exited 0 (tests/test_faults.py caught it, one run in a few).
So the handlers below also remember the signal, and the measuring loop calls :func:`check` after every
probe and between cells: a signal that was swallowed is raised again there.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as an interrupt: the run stops the same way as on Ctrl-C (exit 143)."""


_received: list[BaseException] = []


def _raise(exc: BaseException) -> None:
    if not _received:
        _received.append(exc)
    raise exc


def on_sigterm(signum, frame) -> None:
    _raise(Terminated("terminated by SIGTERM"))


def on_sigint(signum, frame) -> None:
    _raise(KeyboardInterrupt())


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
