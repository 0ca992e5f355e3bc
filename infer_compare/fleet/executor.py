"""Executors: where units of work are measured.

What enters: ``Job`` records, each a self-contained description of one unit of work (a bundle
written by ``infer-compare export``, the ``run_bundle`` keywords that say what of it to measure,
and where it must run). What leaves: one ``JobResult`` per job, the node's Report as a plain dict
or the reason it has none. ``local`` (today's behaviour, the default) measures on this machine,
one job after another (``local.py``); ``ray`` places each job on a node of a Ray cluster
(``ray_executor.py``). Placement, retries (none: timed work is never re-run), progress and partial
results belong here, never to a runner.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, eq=False)  # identity: a job is one task
class Job:
    target: str  # the machine label its rows carry (a node name)
    run_kwargs: dict[str, Any]  # run_bundle() keywords, plain data
    # Ray custom resources it needs (capacity 1 each)
    resources: dict[str, float] = field(default_factory=dict)
    gpus: float = 0.0
    cores: tuple[int, ...] = ()  # CPU cores the measuring process is pinned to (() = no pinning)
    # jobs of one group run at the same time on one host (several GPUs); recorded in the rows
    group: str = ""
    # the node's runtimes (its labels): what a lost node's rows list; () = unknown
    runtimes: tuple[str, ...] = ()
    # the node's host name (Ray's): on the driver's host it reads the driver's bundle directory
    host: str = ""

    @property
    def label(self) -> str:
        """The job in progress lines: its node and devices (``srv cuda:1``)."""
        devs = self.run_kwargs.get("devices") or ()
        return f"{self.target} {','.join(devs)}" if devs else self.target


@dataclass
class JobResult:
    job: Job
    report: dict[str, Any] | None = None  # Report.to_dict() of the node's run
    error: str = ""  # why there is no report: which node and what happened
    node: dict[str, Any] = field(default_factory=dict)  # the node's facts: host, versions
    elapsed_s: float = 0.0
    checked: Any = field(default=None, repr=False)  # the report as a Report, where the driver checked it


Event = Callable[[str, str], None]  # (target, message): live progress per node


class Executor(Protocol):
    def run(self, bundle: str, jobs: Sequence[Job], on_event: Event) -> list[JobResult]:
        """Measure every job; a failed or cancelled job is a JobResult with its error, never an exception.
        KeyboardInterrupt: cancel what runs, and return what came back (results of cancelled jobs say so)."""
        ...
