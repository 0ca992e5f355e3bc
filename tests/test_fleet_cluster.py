"""A loopback-only Ray cluster of two nodes (tests/fleet_cluster.sh), in network and PID namespaces
of its own (only loopback; every address 127.0.0.1; every process dies with the namespace): both
nodes measure a bundle and merge; no node matches --targets (exit 2); a node killed mid-run (its rows
failed, naming it; the other node's kept; the report incomplete); Ctrl-C to the driver (exit 130); a
driver holding another token is refused (Ray's token authentication, exit 2)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from infer_compare.bundle import export_bundle

from .conftest import PY, ROOT


def _namespace() -> tuple[list[str], str]:
    """(unshare argv, "") for network + PID namespaces of the test's own (as root: unshare -n; otherwise a
    user namespace too: unshare -rn), or ([], why not). Ray never runs on a real interface: no namespace, no test."""
    if not shutil.which("unshare"):
        return [], "unshare is not installed"
    argv = ["unshare", *([] if os.geteuid() == 0 else ["-r"]), "-n", "-p", "-f", "--mount-proc"]
    p = subprocess.run([*argv, "sh", "-c", "ip link set lo up"], capture_output=True, text=True, check=False)
    if p.returncode != 0:
        return [], f"cannot make a loopback-only network namespace ({' '.join(argv)}): {p.stderr.strip()[:200]}"
    return argv, ""


UNSHARE, NO_NAMESPACE = _namespace() if importlib.util.find_spec("ray") else ([], "")

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (infer-compare[fleet])"),
    pytest.mark.skipif(bool(NO_NAMESPACE), reason=NO_NAMESPACE),
]


@pytest.fixture(scope="module")
def cluster_run(cache_dir, tmp_path_factory):
    bundle = tmp_path_factory.mktemp("fleet") / "lenet5"
    export_bundle("lenet5", bundle, formats=["onnx"], precisions=["fp32"], cache_dir=cache_dir)
    out = Path(tempfile.mkdtemp(prefix="icf-", dir="/tmp"))  # short: Ray's socket paths live under it
    env = {**os.environ, "PYTHON": str(PY), "PYTHONPATH": str(ROOT)}
    try:
        p = subprocess.run(["timeout", "-k", "10", "180", *UNSHARE, "bash",
                            str(ROOT / "tests" / "fleet_cluster.sh"), str(bundle), str(out)],
                           env=env, capture_output=True, text=True, check=False)
        logs = {f.stem: f.read_text(errors="replace") for f in out.glob("*.log")}
        rcs = {f.stem: int(f.read_text().strip() or -1) for f in out.glob("*.rc")}
        results = {d.name: json.loads((d / "results.json").read_text()) for d in out.iterdir()
                   if (d / "results.json").is_file()}
        yield p, rcs, logs, results
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_two_nodes_measure_and_merge(cluster_run):
    p, rcs, logs, results = cluster_run
    assert rcs.get("join-a") == 0, logs.get("join-a")
    assert rcs.get("both") == 0, logs.get("both")
    rep = results["both"]
    assert set(rep["machines"]) == {"node-a", "node-b"}
    ok = [r for r in rep["rows"] if r["status"] == "ok"]
    assert {r["extra"]["machine"] for r in ok} == {"node-a", "node-b"}
    assert {r["device"] for r in ok} == {"node-a:cpu", "node-b:cpu"}
    assert {r["batch_size"] for r in ok} == {1, 4} and rep["complete"]


def test_no_node_matches_targets_is_a_usage_error(cluster_run):
    _, rcs, logs, _ = cluster_run
    assert rcs.get("none") == 2
    assert "no node matches --targets node-z (nodes: node-a, node-b)" in logs["none"]


def test_a_driver_with_another_token_is_refused(cluster_run):
    _, rcs, logs, results = cluster_run
    assert rcs.get("badtok") == 2, logs.get("badtok")
    last = logs["badtok"].strip().splitlines()[-1]  # Ray's own retry warnings come first
    assert "badtok" not in results and "InvalidAuthToken" in logs["badtok"], logs["badtok"]
    assert last.startswith("infer-compare: error: cannot connect") and "token" in last


def test_killed_node_leaves_failed_rows_and_keeps_the_others(cluster_run):
    _, rcs, logs, results = cluster_run
    assert rcs.get("kill") == 1, logs.get("kill")
    rep = results["kill"]
    by = {r["device"]: r for r in rep["rows"]}
    assert by["node-a:cpu"]["status"] == "ok"
    failed = [r for r in rep["rows"] if r["status"] == "run_failed"]
    assert failed and all("node-b" in r["reason"] for r in failed)
    assert not rep["complete"] and "node-b" in rep["incomplete_reason"]


def test_ctrl_c_cancels_and_exits_130(cluster_run):
    _, rcs, logs, _ = cluster_run
    assert rcs.get("int") == 130, logs.get("int")
    assert "cancelled by Ctrl-C" in logs["int"]
