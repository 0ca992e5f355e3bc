"""A loopback-only Ray cluster of two nodes (tests/fleet_cluster.sh), in network and PID namespaces
of its own (only loopback; every address 127.0.0.1; every process dies with the namespace): both
nodes measure a bundle and merge; no node matches --targets (exit 2); a node killed mid-run (its rows
failed, naming it; the other node's kept; the report incomplete); Ctrl-C to the driver (exit 130); a
driver holding another token is refused at once in one line (exit 2); Ray's own output kept in the
driver's log file; what each port binds; `fleet leave` stopping one node of the host."""

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
        rcs.update({f.name: int(f.read_text().strip() or -1) for f in out.glob("*.ms")})
        texts = {f.name: f.read_text(errors="replace") for f in out.glob("*.txt")}
        logs.update({f"{d.name}/ray": (d / "ray-driver.log").read_text(errors="replace") for d in out.iterdir()
                     if (d / "ray-driver.log").is_file()})
        logs.update(texts)
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
    # both nodes run on the driver's host: each read the driver's bundle directory, nothing was shipped
    assert sum("read the driver's bundle directory" in n for n in rep["notes"]) == 2, rep["notes"]


def test_no_node_matches_targets_is_a_usage_error(cluster_run):
    _, rcs, logs, _ = cluster_run
    assert rcs.get("none") == 2
    assert "no node matches --targets node-z (nodes: node-a, node-b)" in logs["none"]


def test_a_driver_with_another_token_is_refused_at_once_in_one_line(cluster_run):
    _, rcs, logs, results = cluster_run
    assert rcs.get("badtok") == 2, logs.get("badtok")
    assert "badtok" not in results
    lines = logs["badtok"].strip().splitlines()  # no Ray retries, no 8.8.8.8 warning: one line
    assert len(lines) == 1 and lines[0].startswith("infer-compare: error: the Ray head at 127.0.0.2:6379 rejected "
                                                   "this machine: the token this machine holds"), lines
    assert rcs.get("badtok.ms", 0) < 12000, rcs  # seconds of start-up on a loaded 2-core machine, not 20 s of retries


def test_killed_node_leaves_failed_rows_and_keeps_the_others(cluster_run):
    """node-b dies mid-run: one failed row per configuration it would have measured (here one: ONNX Runtime
    fp32 on its CPU), its cell in the banner's count; Ray's raylet dump (colour codes and all) and its
    8.8.8.8 warning in the driver's log file, never in the user's output, whose path is said once."""
    _, rcs, logs, results = cluster_run
    assert rcs.get("kill") == 1, logs.get("kill")
    rep = results["kill"]
    by = {r["device"]: r for r in rep["rows"]}
    assert by["node-a:cpu"]["status"] == "ok"
    failed = [r for r in rep["rows"] if r["status"] == "run_failed"]
    assert [(r["backend"], r["format"], r["precision"], r["device"]) for r in failed] == [
        ("onnxruntime", "onnx", "fp32", "node-b:cpu")]
    assert "node node-b" in failed[0]["reason"] and rep["not_run"] == ["node-b:onnxruntime/onnx/fp32/cpu/b1"]
    assert not rep["complete"] and "node-b" in rep["incomplete_reason"]
    out = logs["kill"]
    assert "\x1b[" not in out and "Raylet is terminated" not in out and "8.8.8.8" not in out and "[state-dump]" not in out
    said = [line for line in out.splitlines() if "Ray's own messages" in line]
    assert len(said) == 1 and said[0].endswith("/kill/ray-driver.log"), out
    assert "Raylet is terminated" in logs["kill/ray"], logs["kill/ray"]  # the dump went to the log


def test_each_port_a_node_opens_is_listed_where_docs_fleet_md_says(cluster_run):
    """With --ip 127.0.0.2 (a lab interface's stand-in) the GCS, the raylet and the workers listen on every
    address of the machine (*), the runtime-env agent on --ip only; with the default --ip 127.0.0.1 all on
    loopback; nothing else listens: not the dashboard's 8265, not Ray Client's 10001 (docs/fleet.md)."""
    _, _, logs, _ = cluster_run
    ab = _listeners(logs["ports-ab.txt"], logs["ps-ab.txt"])
    workers = {x for x in ab if x[0].startswith("worker ")}  # prestarted workers: up or not yet, both nodes alike
    assert ab - workers == {("gcs_server", "*", "6379"), ("raylet node-a", "*", "port"), ("raylet node-b", "*", "port"),
                            ("runtime-env agent node-a", "127.0.0.2", "port"),
                            ("runtime-env agent node-b", "127.0.0.2", "port")}
    assert workers <= {("worker node-a", "*", "port"), ("worker node-b", "*", "port")}
    c = {x for x in _listeners(logs["ports-c.txt"], logs["ps-c.txt"]) if x[0].endswith("node-c")}
    assert c - {("worker node-c", "127.0.0.1", "port")} == {("raylet node-c", "127.0.0.1", "port"),
                                                            ("runtime-env agent node-c", "127.0.0.1", "port")}


def _listeners(ss: str, ps: str) -> set[tuple[str, str, str]]:
    """{(process and node, bound address, '6379' or 'port')} of every listening TCP socket (each raylet's two
    ports folded into one entry)."""
    import re

    procs = {int(f[0]): (int(f[1]), f[2]) for f in (line.split(None, 2) for line in ps.splitlines()) if len(f) == 3}

    def node(pid: int) -> str:
        while pid in procs:
            m = re.search(r"ic-node:([^,\s]+),", procs[pid][1])
            if m and "raylet" in procs[pid][1].split()[0]:
                return m[1]
            pid = procs[pid][0]
        return "?"

    out = set()
    for line in ss.splitlines():
        f = line.split()
        if not f or f[0] != "tcp":
            continue
        host, _, port = f[4].rpartition(":")
        host = host.strip("[]").removeprefix("::ffff:")
        pid = int(re.search(r"pid=(\d+)", line)[1])
        cmd = procs.get(pid, (0, "?"))[1]
        what = ("gcs_server" if "gcs_server" in cmd else f"raylet {node(pid)}" if "raylet" in cmd.split()[0]
                else f"runtime-env agent {node(pid)}" if "RuntimeEnv" in cmd or "runtime_env" in cmd
                else f"worker {node(pid)}" if cmd.startswith(("ray::", "ray_")) or "default_worker.py" in cmd else cmd[:40])
        out.add((what, host, port if what == "gcs_server" else "port"))
    return out


def test_leave_stops_this_node_only(cluster_run):
    _, rcs, logs, _ = cluster_run
    assert rcs.get("join-c") == 0 and rcs.get("leave") == 0, (logs.get("join-c"), logs.get("leave"))
    assert logs["leave"].strip().startswith("node node-c left: ") and "other Ray processes" in logs["leave"]
    assert rcs.get("leave-again") == 2 and "no node 'node-c' runs on this machine" in logs["leave-again"]
    left = logs["ps-left.txt"]
    assert "ic-node:node-c," not in left and "ic-node:node-a," in left and "gcs_server" in left


def test_ctrl_c_cancels_and_exits_130(cluster_run):
    _, rcs, logs, _ = cluster_run
    assert rcs.get("int") == 130, logs.get("int")
    assert "cancelled by Ctrl-C" in logs["int"]
