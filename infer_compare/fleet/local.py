"""The local executor: every job on this machine, one after another (today's behaviour)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from infer_compare.base.version import __version__
from infer_compare.bundle import Verified, run_bundle
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


def measure_job(bundle: str | Verified, job: Job) -> dict:
    """Run one job's part of a bundle directory (or what ``verify`` returned for it: not hashed again)
    here; the Report as a dict. Inside a Ray task the job's GPUs are the ones Ray assigned
    (fleet/bind.py) and Unbound is raised when the task cannot see them; the measuring processes run
    as a local run's do (``as_local_run``)."""
    # deferred: only a fleet task needs the binding and the device table (+2 modules)
    from infer_compare.catalog.device_kinds import gpus
    from infer_compare.fleet.bind import assigned_gpu_ids, bind, relabel

    assigned = assigned_gpu_ids()
    kwargs, bound = job.run_kwargs, {}
    if assigned is not None:
        kwargs, bound = bind(job.run_kwargs, list(gpus()), assigned, job.target,
                             os.environ.get("CUDA_VISIBLE_DEVICES"))
    with as_local_run(tuple(job.cores), in_ray=assigned is not None) as warnings:
        rep = run_bundle(bundle, **kwargs).to_dict()
    if warnings:
        rep["warnings"] = [*(rep.get("warnings") or ()), *warnings]
    return relabel(rep, bound, job.target) if bound else rep


@contextmanager
def as_local_run(cores: tuple[int, ...], in_ray: bool) -> Iterator[list[str]]:
    """For the job's length only (a Ray worker runs later tasks too): this thread, and so the measuring
    processes it starts, pinned to ``cores`` (if any); inside a Ray task without Ray's OMP_NUM_THREADS for
    its workers, and at nice 0 as a local run's processes: Ray starts its workers at nice 15 (its
    ``worker_niceness``, so that Ray's own processes win the CPU), and its measuring processes inherited that,
    losing their cores to any busy process at nice 0. On the two-GPU H100 host no row was measured to move by
    it (reports/gpu-x2-fleet-round3.md); the fleet measures as a local run does all the same. ``fleet join``
    starts its node with workers at nice 0; a worker of another node is reset here where the OS allows, and
    the report warns where it does not. Yields the warnings."""
    before = os.sched_getaffinity(0) if cores and hasattr(os, "sched_setaffinity") else None
    omp = os.environ.pop("OMP_NUM_THREADS", None) if in_ray else None
    nice, warnings = (normal_priority() if in_ray else (None, []))
    try:
        if before is not None:
            os.sched_setaffinity(0, set(cores))  # the measuring children inherit it
        yield warnings
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)
        if omp is not None:
            os.environ["OMP_NUM_THREADS"] = omp
        if nice:
            _set_nice(nice)


def normal_priority() -> tuple[int | None, list[str]]:
    """(the niceness to restore afterwards, or None; warnings): this thread's niceness (Linux: per thread,
    inherited by the threads and processes it starts) back to 0 where it is above."""
    try:
        nice = os.getpriority(os.PRIO_PROCESS, 0)
    except (AttributeError, OSError):
        return None, []
    if nice <= 0:
        return None, []
    if _set_nice(0):
        return nice, []
    return nice, [f"this node's Ray worker runs at nice {nice} (Ray's worker_niceness) and could not be "
                  "reset to 0: its measuring processes ran at that priority, and rows of short calls "
                  "(a CPU-bound launch loop) may be slower than a local run's; start the node with "
                  "`infer-compare fleet join` (docs/fleet.md)"]


def _set_nice(value: int) -> bool:
    try:
        os.setpriority(os.PRIO_PROCESS, 0, value)
    except OSError:  # lowering the niceness needs CAP_SYS_NICE (or RLIMIT_NICE)
        return False
    return True


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
