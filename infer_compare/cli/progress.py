"""The progress display on stderr (rich): a spinner and bar while exporting and
measuring, log lines and each finished row above it."""

from __future__ import annotations


def _esc(s: str) -> str:
    from rich.markup import escape

    return escape(s)


class RichProgress:
    """Progress display on stderr: a spinner/bar while exporting and measuring, log lines above it."""

    def __init__(self, quiet: bool):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self.con = Console(stderr=True)
        self.quiet = quiet
        self.p = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=self.con, transient=True, disable=quiet)
        self.task_id = None

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
        self.task_id = self.p.add_task(msg, total=total)
        self._done = 0
        self.log(msg)

    def advance(self, msg: str | None = None) -> None:
        """Called as each measured cell starts: shows it and how many are done."""
        if self.task_id is None:
            return
        done = getattr(self, "_done", 0)
        self.p.update(self.task_id, description=f"measuring {msg}" if msg else None, completed=done)
        self._done = done + 1

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
