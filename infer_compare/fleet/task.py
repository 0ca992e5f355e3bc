"""What runs on a node: unpack the shipped bundle (hashes checked), measure the job's part of it."""

from __future__ import annotations

import tempfile

from infer_compare.fleet.bind import assigned_gpu_ids
from infer_compare.fleet.executor import Job
from infer_compare.fleet.local import measure_job, node_facts
from infer_compare.fleet.pack import unpack


def run_on_node(data: bytes, sha256: str, job: Job) -> dict:
    """{"report": Report dict, "node": facts} or {"error": one line, "node": facts}; never raises for a
    bad bundle or a failed run, so the driver can tell those from a node that died."""
    facts = {**node_facts(), "task": task_facts()}
    try:
        with tempfile.TemporaryDirectory(prefix="infer-compare-fleet-") as d:
            root = unpack(data, sha256, d)
            return {"report": measure_job(str(root), job), "node": facts}
    except Exception as e:  # noqa: BLE001 - a failure is a row that names the node
        return {"error": f"{type(e).__name__}: {e}".splitlines()[0], "node": facts}


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
