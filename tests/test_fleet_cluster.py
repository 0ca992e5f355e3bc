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
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from infer_compare.bundle import export_bundle

from .conftest import PY, ROOT


def _namespace() -> tuple[list[str], str]:
    """(unshare argv, "") for network + PID namespaces of the test's own (as root: unshare -n; otherwise a
    user namespace too: unshare -rn), or ([], why not). Ray never runs on a real interface: no namespace,
    no test."""
    if not shutil.which("unshare"):
        return [], "unshare is not installed"
    argv = ["unshare", *([] if os.geteuid() == 0 else ["-r"]), "-n", "-p", "-f", "--mount-proc"]
    p = subprocess.run([*argv, "sh", "-c", "ip link set lo up"], capture_output=True, text=True, check=False)
    if p.returncode != 0:
        return [], (f"cannot make a loopback-only network namespace ({' '.join(argv)}): "
                    f"{p.stderr.strip()[:200]}")
    return argv, ""


UNSHARE, NO_NAMESPACE = _namespace() if importlib.util.find_spec("ray") else ([], "")

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                       reason="Ray is not installed (infer-compare[fleet])"),
    pytest.mark.skipif(bool(NO_NAMESPACE), reason=NO_NAMESPACE),
]


@pytest.fixture(scope="module")
def cluster_run(cache_dir, tmp_path_factory):
    bundle = tmp_path_factory.mktemp("fleet") / "lenet5"
    export_bundle("lenet5", bundle, formats=["onnx"], precisions=["fp32"], cache_dir=cache_dir)
    out = Path(tempfile.mkdtemp(prefix="icf-", dir="/tmp"))  # short: Ray's socket paths live under it
    env = {**os.environ, "PYTHON": str(PY), "PYTHONPATH": str(ROOT)}
    try:
        p = subprocess.run(["timeout", "-k", "10", "300", *UNSHARE, "bash",
                            str(ROOT / "tests" / "fleet_cluster.sh"), str(bundle), str(out)],
                           env=env, capture_output=True, text=True, check=False)
        logs = {f.stem: f.read_text(errors="replace") for f in out.glob("*.log")}
        rcs = {f.stem: int(f.read_text().strip() or -1) for f in out.glob("*.rc")}
        rcs.update({f.name: int(f.read_text().strip() or -1) for f in out.glob("*.ms")})
        texts = {f.name: f.read_text(errors="replace") for f in [*out.glob("*.txt"), *out.glob("marker-*")]}
        logs.update({f"{d.name}/ray": (d / "ray-driver.log").read_text(errors="replace")
                     for d in out.iterdir() if (d / "ray-driver.log").is_file()})
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
    assert len(lines) == 1 and lines[0].startswith(
        "infer-compare: error: the Ray head at 127.0.0.2:6379 rejected this machine: "
        "the token this machine holds"), lines
    # seconds of start-up on a loaded 2-core machine, not 20 s of retries
    assert rcs.get("badtok.ms", 0) < 12000, rcs


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
    assert ("\x1b[" not in out and "Raylet is terminated" not in out and "8.8.8.8" not in out
            and "[state-dump]" not in out)
    said = [line for line in out.splitlines() if "Ray's own messages" in line]
    assert len(said) == 1 and said[0].endswith("/kill/ray-driver.log"), out
    assert "Raylet is terminated" in logs["kill/ray"], logs["kill/ray"]  # the dump went to the log


def test_each_port_a_node_opens_is_listed_where_docs_fleet_md_says(cluster_run):
    """With --ip 127.0.0.2 (a lab interface's stand-in) the GCS, the raylet and the workers listen on every
    address of the machine (*), the runtime-env agent on --ip only; with the default --ip 127.0.0.1 all on
    loopback; nothing else listens: not the dashboard's 8265, not Ray Client's 10001 (docs/fleet.md)."""
    _, _, logs, _ = cluster_run
    ab = _listeners(logs["ports-ab.txt"], logs["ps-ab.txt"])
    # prestarted workers: up or not yet, both nodes alike
    workers = {x for x in ab if x[0].startswith("worker ")}
    assert ab - workers == {("gcs_server", "*", "6379"),
                            ("raylet node-a", "*", "port"), ("raylet node-b", "*", "port"),
                            ("runtime-env agent node-a", "127.0.0.2", "port"),
                            ("runtime-env agent node-b", "127.0.0.2", "port")}
    assert workers <= {("worker node-a", "*", "port"), ("worker node-b", "*", "port")}
    c = {x for x in _listeners(logs["ports-c.txt"], logs["ps-c.txt"]) if x[0].endswith("node-c")}
    assert c - {("worker node-c", "127.0.0.1", "port")} == {("raylet node-c", "127.0.0.1", "port"),
                                                            ("runtime-env agent node-c", "127.0.0.1", "port")}


def _listeners(ss: str, ps: str) -> set[tuple[str, str, str]]:
    """{(process and node, bound address, '6379' or 'port')} of every listening TCP socket (each raylet's two
    ports folded into one entry)."""

    procs = {int(f[0]): (int(f[1]), f[2]) for f in (line.split(None, 2) for line in ps.splitlines())
             if len(f) == 3}

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
        what = ("gcs_server" if "gcs_server" in cmd
                else f"raylet {node(pid)}" if "raylet" in cmd.split()[0]
                else f"runtime-env agent {node(pid)}" if "RuntimeEnv" in cmd or "runtime_env" in cmd
                else f"worker {node(pid)}" if cmd.startswith(("ray::", "ray_")) or "default_worker.py" in cmd
                else cmd[:40])
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


def test_untrusted_run_reads_every_answer_as_data_and_merges_the_same(cluster_run):
    """`fleet run --untrusted`: the same two machines and rows as the run that unpickles what nodes return."""
    _, rcs, logs, results = cluster_run
    assert rcs.get("both-u") == 0, logs.get("both-u")
    rep, base = results["both-u"], results["both"]
    key = [(r["device"], r["backend"], r["batch_size"], r["status"]) for r in rep["rows"]]
    assert key == [(r["device"], r["backend"], r["batch_size"], r["status"]) for r in base["rows"]]
    assert set(rep["machines"]) == {"node-a", "node-b"} and rep["complete"]


def _crafted(results: dict, run: str) -> dict:
    """node-b's one row of a run where it answered a crafted payload; node-a's rows are kept."""
    rep = results[run]
    assert {r["status"] for r in rep["rows"] if r["device"] == "node-a:cpu"} == {"ok"}
    (row,) = [r for r in rep["rows"] if r["device"] == "node-b:cpu"]
    assert row["status"] == "run_failed" and not rep["complete"]
    return row


def test_a_pickle_from_a_node_runs_code_on_the_driver_unless_untrusted(cluster_run):
    """node-b answers an object whose __reduce__ writes a marker: the driver that unpickles what nodes return
    writes it (the threat, shown); with --untrusted the marker is absent and node-b's row is refused, saying
    why."""
    _, rcs, logs, results = cluster_run
    assert rcs.get("cr-trusted") == 1, logs.get("cr-trusted")
    assert "fleet run" in logs["marker-trusted"]  # written by the driver, as it unpickled node-b's answer
    assert rcs.get("cr-pickle") == 1, logs.get("cr-pickle")
    assert "marker-untrusted" not in logs
    row = _crafted(results, "cr-pickle")
    assert ("answer refused: node node-b cpu returned a pickled Python object (Ray metadata 'PYTHON')"
            in row["reason"])
    assert "not unpickled" in row["reason"] and "answer refused" in logs["cr-pickle"]


def test_an_oversized_or_schema_breaking_answer_is_refused_with_its_reason(cluster_run):
    _, rcs, logs, results = cluster_run
    assert rcs.get("cr-big") == 1 and rcs.get("cr-schema") == 1, (logs.get("cr-big"), logs.get("cr-schema"))
    big = _crafted(results, "cr-big")["reason"]
    assert ("node node-b cpu returned 67108881 bytes, more than the 64 MiB the untrusted channel takes; "
            "not fetched") in big, big
    bad = _crafted(results, "cr-schema")["reason"]
    assert "node node-b cpu's report: field rows[0].batch_size" in bad and "'one'" in bad, bad


def test_a_token_file_others_may_read_is_refused_at_join(cluster_run):
    _, rcs, logs, _ = cluster_run
    lines = logs["tok644"].strip().splitlines()
    assert rcs.get("tok644") == 2 and len(lines) == 1, logs["tok644"]
    assert re.fullmatch(r"infer-compare: error: the Ray token file (/\S+/token644) is readable by others "
                        r"\(mode 644\): chmod 600 \1", lines[0]), lines
    assert "ic-node:node-x," not in logs["ps-c.txt"]  # never started


def test_rays_files_are_in_a_folder_of_mode_700_of_the_tools_own(cluster_run):
    """Every node's Ray folder is `ic-ray-<uid>/ray` in $RAY_TMPDIR, that folder mode 700 (nothing of Ray's
    beside it); right after `fleet join` nothing in it is open to group or others; after the runs only the
    six folders Ray opens again whenever one of its workers starts are (docs/fleet.md), still inside that
    folder. `fleet join` says so, and that Ray trusts every node."""
    _, _, logs, _ = cluster_run
    uid = os.geteuid()
    said = logs["join-a"].splitlines()
    assert said[-1].startswith("trust: Ray trusts every node of a cluster alike: "
                               "whoever holds this token"), said
    assert re.search(rf"/ic-ray-{uid}/ray \(inside \S+, mode 700: this user's only; \d+ folder",
                     said[-2]), said
    for name in ("modes-a.txt", "modes-end.txt"):
        entries = [line.split(" ", 3) for line in logs[name].splitlines()]
        top = {e[3]: e for e in entries if "/" not in e[3]}
        assert set(top) == {"", f"ic-ray-{uid}"}, top  # $RAY_TMPDIR holds the tool's folder only
        assert top[f"ic-ray-{uid}"][:2] == ["700", "d"]
        wide = {e[3].split("/", 2)[-1] if e[3].count("/") > 1 else e[3] for e in entries
                if e[3].startswith(f"ic-ray-{uid}") and e[1] != "l" and int(e[0], 8) & 0o077}
        if name == "modes-a.txt":
            assert not wide, wide
        else:
            assert {re.sub(r"session_[^/]+", "SESSION", w) for w in wide} <= {
                "ray", "SESSION", "SESSION/sockets", "SESSION/logs", "SESSION/logs/old",
                "SESSION/runtime_resources"}, wide
