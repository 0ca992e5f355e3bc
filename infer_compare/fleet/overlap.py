"""Fixed work of a fleet run done beside a wait instead of after it, changing nothing that is measured:

* the driver imports the report's writers (matplotlib for the HTML plots: about 0.5 s) while the nodes
  measure, not after the last result;
* the driver stops its Ray connection (``ray.shutdown``) while it writes the report, not before;
* a node on the driver's host hashes the driver's bundle directory while its task imports the code that
  measures it (sha256 releases the GIL; the imports hold it).

Each is a thread whose outcome is the same as the serial order's: an error is raised where the serial code
would have raised it (``Background.result``), and a prefetch that fails is ignored (the real import raises)."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

# what write_all() imports on its first call beyond the CLI's own modules (report/plots.py, its _svg)
REPORT_WRITERS = ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_svg", "infer_compare.report.plots")


class Background:
    """``fn(*args)`` in a daemon thread; ``result()`` waits and returns its value or raises its exception."""

    def __init__(self, fn: Callable[..., Any], *args: Any, name: str = "infer-compare-fleet"):
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., Any], args: tuple) -> None:
        try:
            self._value = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the caller by result()
            self._error = e

    def result(self, timeout: float | None = None) -> Any:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"{self._thread.name}: still running after {timeout} s")
        if self._error is not None:
            raise self._error
        return self._value


def _import_all(modules: Sequence[str]) -> list[str]:
    """The modules that imported; a failure is left for the real import to report."""
    done = []
    for m in modules:
        try:
            importlib.import_module(m)
            done.append(m)
        except Exception:  # noqa: BLE001 - a prefetch never fails the run
            break
    return done


def prefetch(modules: Sequence[str] = REPORT_WRITERS) -> Background:
    """Import ``modules`` in the background (in order, stopping at the first that fails)."""
    return Background(_import_all, tuple(modules), name="infer-compare-prefetch")
