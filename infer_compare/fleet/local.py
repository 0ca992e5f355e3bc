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
    """Run one job's part of a verified bundle directory here; the Report as a dict. Inside a Ray task the
    job's GPUs are the ones Ray assigned (fleet/bind.py) and Unbound is raised when the task cannot see
    them; the process is pinned to the job's cores (if any) for the job's length only (a Ray worker runs
    later tasks too); Ray's OMP_NUM_THREADS for its workers is not passed on to the measuring
    processes, which run as a local run's do."""
    import os

    # deferred: only a fleet task needs the binding and the device table (+2 modules)
    from infer_compare.catalog.device_kinds import gpus
    from infer_compare.fleet.bind import assigned_gpu_ids, bind, relabel

    assigned = assigned_gpu_ids()
    kwargs, bound = job.run_kwargs, {}
    if assigned is not None:
        kwargs, bound = bind(job.run_kwargs, list(gpus()), assigned, job.target, os.environ.get("CUDA_VISIBLE_DEVICES"))
    cores = tuple(job.cores)
    before = os.sched_getaffinity(0) if cores and hasattr(os, "sched_setaffinity") else None
    omp = os.environ.pop("OMP_NUM_THREADS", None) if assigned is not None else None
    try:
        if before is not None:
            os.sched_setaffinity(0, set(cores))  # the measuring children inherit it
        rep = run_bundle(bundle, **kwargs).to_dict()
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)
        if omp is not None:
            os.environ["OMP_NUM_THREADS"] = omp
    return relabel(rep, bound, job.target) if bound else rep


class LocalExecutor:
    def run(self, bundle: str, jobs: Sequence[Job], on_event: Event) -> list[JobResult]:
        out: list[JobResult] = []
        for job in jobs:
            t0 = time.perf_counter()
            on_event(job.label, "measuring")
            try:
                out.append(JobResult(job, measure_job(bundle, job), node=node_facts(),
                                     elapsed_s=time.perf_counter() - t0))
            except KeyboardInterrupt:
                out += [JobResult(j, error=f"{j.target}: cancelled (interrupted)") for j in jobs[len(out):]]
                return out
            except Exception as e:  # noqa: BLE001 - a failed job is a row, not a crash
                out.append(JobResult(job, error=f"{job.target}: {type(e).__name__}: {e}",
                                     elapsed_s=time.perf_counter() - t0))
            on_event(job.label, out[-1].error or "done")
        return out
