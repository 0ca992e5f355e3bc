"""The progress display on stderr (rich): a spinner and bar while exporting and
measuring, log lines and each finished row above it. The CLI's (``--quiet``: warnings only) and, by
default, the Python API's (``compare(progress=...)``, api.py). On a console that is not a terminal (a
file, a pipe, a captured stream) rich draws no bar: the log lines, warnings and rows are printed as
plain lines. rich is imported when a display is made, not with this module."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def _esc(s: str) -> str:
    from rich.markup import escape

    return escape(s)


def _columns():
    """Spinner, what runs, and for a phase with a total its bar and "done/total"; for one without a total
    (or an export inside one) only the spinner and the elapsed time: no "0/?"."""
    from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    class Bar(BarColumn):
        def render(self, task):
            return Text("") if task.total is None else super().render(task)

    class Count(MofNCompleteColumn):
        def render(self, task):
            return Text("") if task.total is None else super().render(task)

    return SpinnerColumn(), TextColumn("{task.description}"), Bar(), Count(), TimeElapsedColumn()


class RichProgress:
    """Progress display on stderr: a spinner/bar while exporting and measuring, log lines above it."""

    def __init__(self, quiet: bool, console=None):
        from rich.console import Console
        from rich.progress import Progress

        self.con = console or Console(stderr=True)
        self.quiet = quiet
        self.p = Progress(*_columns(), console=self.con, transient=True, disable=quiet)
        self.task_id = None
        self._name = ""

    def __enter__(self):
        self.p.start()
        return self

    def __exit__(self, *exc):
        self.p.stop()

    def log(self, msg: str) -> None:
        if not self.quiet:
            self.p.console.print(f"[dim]·[/] {_esc(msg)}")

    def warn(self, msg: str) -> None:
        self.p.console.print(f"[bold yellow]WARNING:[/] {_esc(msg)}")

    def task(self, msg: str, total: int | None = None) -> None:
        if self.task_id is not None:
            self.p.remove_task(self.task_id)
        self.task_id = self.p.add_task(_esc(msg), total=total)
        self._name = msg
        self.log(msg)

    def step(self, msg: str) -> None:
        """Names the unit of the current phase that runs now."""
        if self.task_id is not None:
            self.p.update(self.task_id, description=_esc(f"{self._name} {msg}"))

    def advance(self, msg: str | None = None) -> None:
        """One unit of the current phase is done (measured, skipped or failed)."""
        if self.task_id is None:
            return
        self.p.advance(self.task_id, 1)
        if msg:
            self.step(msg)

    @contextmanager
    def phase(self, msg: str) -> Iterator[None]:
        """A nested step (an export): the line names it, with its own elapsed time, while it lasts."""
        if self.task_id is not None:
            self.p.update(self.task_id, visible=False)
        sub = self.p.add_task(_esc(msg), total=None)
        try:
            yield
        finally:
            self.p.remove_task(sub)
            if self.task_id is not None:
                self.p.update(self.task_id, visible=True)

    def row(self, r) -> None:
        if self.quiet:
            return
        if r.status == "skipped":
            return
        if r.latency is not None:
            extra = f", cos {r.parity.cosine_mean:.5f}" if r.parity else ""
            col = "green" if r.status == "ok" else "red"
            self.p.console.print(f"  [{col}]{r.status}[/] {r.label}: p50 {r.latency.p50_ms:.3f} ms, "
                                 f"{r.throughput:.1f} img/s{extra}")
        else:
            self.p.console.print(f"  [red]{r.status}[/] {r.label}: {_esc(r.reason)}")
