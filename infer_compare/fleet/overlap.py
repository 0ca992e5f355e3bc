"""Fixed work of a fleet run done beside a wait instead of after it, changing nothing that is measured:

* the driver imports the report's writers (matplotlib for the HTML plots: about 0.5 s) while the nodes
  measure, not after the last result;
* the driver stops its Ray connection (``ray.shutdown``) while it writes the report, not before;
* a node on the driver's host hashes the driver's bundle directory while its task imports the code that
  measures it (sha256 releases the GIL; the imports hold it).

Each is a thread whose outcome is the same as the serial order's: an error is raised where the serial
code would have raised it (``Background.result``), and a prefetch that fails is ignored (the real
import raises)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from infer_compare.report.writers import REPORT_WRITERS, import_writers


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


def prefetch(modules: Sequence[str] = REPORT_WRITERS) -> Background:
    """Import ``modules`` in the background (in order, stopping at the first that fails)."""
    return Background(import_writers, tuple(modules), name="infer-compare-prefetch")
