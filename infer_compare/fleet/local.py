"""The local executor: every job on this machine, one after another (today's behaviour)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from infer_compare.base.version import __version__
from infer_compare.bundle import run_bundle
from infer_compare.fleet.executor import Event, Job, JobResult


def node_facts() -> dict:
    """What a node says about itself next to its report: the versions that must agree across a fleet."""
    import platform
    import socket

    facts = {"host": socket.gethostname(), "tool_version": __version__, "python": platform.python_version()}
    try:
        from importlib.metadata import version

        facts["ray"] = version("ray")
    except Exception:  # noqa: BLE001 - no Ray on a local run
        facts["ray"] = ""
    return facts


def measure_job(bundle: str, job: Job) -> dict:
    """Run one job's part of a verified bundle directory here; the Report as a dict."""
    import os

    if job.cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(job.cores))  # the measuring children inherit it
    rep = run_bundle(bundle, **job.run_kwargs)
    return rep.to_dict()


class LocalExecutor:
    def run(self, bundle: str, jobs: Sequence[Job], on_event: Event) -> list[JobResult]:
        out: list[JobResult] = []
        for job in jobs:
            t0 = time.perf_counter()
            on_event(job.target, "measuring")
            try:
                out.append(JobResult(job, measure_job(bundle, job), node=node_facts(),
                                     elapsed_s=time.perf_counter() - t0))
            except KeyboardInterrupt:
                out += [JobResult(j, error=f"{j.target}: cancelled (interrupted)") for j in jobs[len(out):]]
                return out
            except Exception as e:  # noqa: BLE001 - a failed job is a row, not a crash
                out.append(JobResult(job, error=f"{job.target}: {type(e).__name__}: {e}",
                                     elapsed_s=time.perf_counter() - t0))
            on_event(job.target, out[-1].error or "done")
        return out
