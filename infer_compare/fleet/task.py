"""What runs on a node: read the driver's bundle directory where it is here, else unpack the shipped bundle
(either way every file hashed once against the driver's manifest, fleet/pack.py), and measure the job's part.
``run_on_node`` returns its answer as a dict (a pickle for Ray); ``run_on_node_data`` as JSON bytes, which the
driver of ``fleet run --untrusted`` reads as data (fleet/channel.py)."""

from __future__ import annotations

import tempfile

from infer_compare.fleet.bind import assigned_gpu_ids
from infer_compare.fleet.channel import as_data
from infer_compare.fleet.executor import Job
from infer_compare.fleet.local import measure_job, node_facts
from infer_compare.fleet.overlap import Background
from infer_compare.fleet.pack import local_bundle, unpack


def run_on_node(data: bytes | None, sha256: str, job: Job, path: str = "") -> dict:
    """{"report": Report dict, "node": facts} or {"error": one line, "node": facts}; never raises for a
    bad bundle or a failed run, so the driver can tell those from a node that died. ``data`` None: the driver
    sent its bundle directory ``path`` instead (a node on its host); {"absent": why, "node": facts} where that
    directory, with the manifest of sha256 ``sha256``, is not here (the driver then ships the bundle)."""
    if data is None:
        hashing = Background(local_bundle, path, sha256, name="infer-compare-hash")
    facts = {**node_facts(), "task": task_facts()}
    try:
        if data is None:
            _warm(job)  # beside the hashing: imports the run makes here anyway (fleet/overlap.py)
            v = hashing.result()
            if v is None:
                return {"absent": f"{path} (manifest sha256 {sha256[:16]}...) is not on this node",
                        "node": facts}
            facts["task"]["bundle"] = "read the driver's bundle directory (a node on the driver's host)"
            return {"report": measure_job(v, job), "node": facts}
        facts["task"]["bundle"] = "unpacked the bundle shipped through Ray's object store"
        with tempfile.TemporaryDirectory(prefix="infer-compare-fleet-") as d:  # mode 700: this task's own
            return {"report": measure_job(unpack(data, sha256, d), job), "node": facts}
    except Exception as e:  # noqa: BLE001 - a failure is a row that names the node
        return {"error": f"{type(e).__name__}: {e}".splitlines()[0], "node": facts}


def run_on_node_data(data: bytes | None, sha256: str, job: Job, path: str = "") -> bytes:
    """``run_on_node``'s answer as JSON bytes, for a driver that does not unpickle what nodes return."""
    return as_data(run_on_node(data, sha256, job, path))


def _warm(job: Job) -> None:
    """Import torch where the job measures a GPU: the run imports it in this process anyway (the report's CUDA
    and cuDNN versions, host/gpu.py), and here it overlaps the bundle's hashing instead of following it. Done
    in this thread, before any measuring process starts; a failure is left to the run, which reports it."""
    if job.gpus:
        import importlib.util

        if importlib.util.find_spec("torch") is not None:
            try:
                import torch  # noqa: F401
            except Exception:  # noqa: BLE001 - the run says what is wrong with torch
                pass


def task_facts() -> dict:
    """What the Ray worker's own environment says, recorded beside the report: the GPUs Ray assigned,
    CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS (Ray sets it for its workers), the worker's niceness (Ray's
    worker_niceness; the measuring processes run without that variable and at nice 0 where the OS allows,
    fleet/local.py) and how many cores the worker may use."""
    import os

    out = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")}
    out["ray_gpu_ids"] = assigned_gpu_ids()
    out["nice"] = os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None
    out["cores"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return out
