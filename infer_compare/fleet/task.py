"""What runs on a node: unpack the shipped bundle (hashes checked), measure the job's part of it."""

from __future__ import annotations

import tempfile

from infer_compare.fleet.executor import Job
from infer_compare.fleet.local import measure_job, node_facts
from infer_compare.fleet.pack import unpack


def run_on_node(data: bytes, sha256: str, job: Job) -> dict:
    """{"report": Report dict, "node": facts} or {"error": one line, "node": facts}; never raises for a
    bad bundle or a failed run, so the driver can tell those from a node that died."""
    facts = node_facts()
    try:
        with tempfile.TemporaryDirectory(prefix="infer-compare-fleet-") as d:
            root = unpack(data, sha256, d)
            return {"report": measure_job(str(root), job), "node": facts}
    except Exception as e:  # noqa: BLE001 - a failure is a row that names the node
        return {"error": f"{type(e).__name__}: {e}".splitlines()[0], "node": facts}
