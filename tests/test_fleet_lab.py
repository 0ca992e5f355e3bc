"""The fleet as a lab user meets it, without a cluster: a lost node's configurations as failed rows (one per
configuration) and its cells counted by the banner; a rejected token said at once in one line; Ray's own
output kept in a log file; `fleet leave` picking this node's processes only; `merge --label a,b`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from infer_compare.base.errors import UsageError
from infer_compare.bundle import export_bundle
from infer_compare.cli import main
from infer_compare.fleet.executor import Job, JobResult
from infer_compare.fleet.leave import Proc, _short, node_processes
from infer_compare.fleet.local import LocalExecutor
from infer_compare.fleet.run import run_fleet
from infer_compare.report.common import incomplete_banner

from .conftest import FAST, PY, ROOT

KW = dict(backends=["onnxruntime"], devices=["cpu"], batch_sizes=[1], threads=1, **FAST)


@pytest.fixture(scope="module")
def bundle(cache_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("fleet-lab") / "lenet5"
    export_bundle("lenet5", out, formats=["onnx"], precisions=["fp32", "fp16"], cache_dir=cache_dir)
    return out


@pytest.fixture(scope="module")
def report(bundle):
    (res,) = LocalExecutor().run(str(bundle), [Job("x", KW)], lambda n, m: None)
    assert not res.error, res.error
    return res.report


class _Lose:
    """Node ``lost`` dies (no report); every other node replays a real report."""

    def __init__(self, report: dict, lost: str):
        self.report, self.lost = report, lost

    def run(self, bundle, jobs, on_event):
        return [JobResult(j, error=f"node {j.label}: NodeDiedError: Task failed because the node it was "
                                   "running on is dead or unavailable")
                if j.target == self.lost else JobResult(j, self.report) for j in jobs]


def test_a_lost_node_lists_each_configuration_failed_and_the_banner_counts_its_cells(bundle, report):
    """node-b (CPU, ONNX Runtime and OpenVINO) dies: its 4 configurations (2 runtimes x fp32/fp16 of the
    bundle) are 4 failed rows naming it, its 8 cells (2 batch sizes each) are listed as not run, and the
    banner says so; node-a's rows are kept."""
    kw_b = {**KW, "backends": ["onnxruntime", "openvino"], "batch_sizes": [1, 4], "devices": None}
    jobs = [Job("node-a", KW, {"ic-node:node-a": 1.0}),
            Job("node-b", kw_b, {"ic-node:node-b": 1.0}, runtimes=("onnxruntime", "openvino", "pytorch"))]
    merged, _ = run_fleet(str(bundle), _Lose(report, "node-b"), jobs, lambda n, m: None, ["x"])
    failed = [r for r in merged.rows if r.status == "run_failed"]
    assert sorted((r.backend, r.format, r.precision, r.device) for r in failed) == [
        ("onnxruntime", "onnx", "fp16", "node-b:cpu"), ("onnxruntime", "onnx", "fp32", "node-b:cpu"),
        ("openvino", "onnx", "fp16", "node-b:cpu"), ("openvino", "onnx", "fp32", "node-b:cpu")]
    assert all("node node-b" in r.reason and "NodeDiedError" in r.reason and r.extra["machine"] == "node-b"
               for r in failed)
    lost = [x for x in merged.not_run if x.startswith("node-b:")]
    assert len(lost) == 8 and "node-b:openvino/onnx/fp16/cpu/b4" in lost
    banner = incomplete_banner(merged)
    assert f"{len(merged.not_run)} cells did not run" in banner and len(merged.not_run) >= 8
    assert "node-b: node node-b" in banner and any(r.device == "node-a:cpu" and r.status == "ok"
                                                   for r in merged.rows)


def test_a_lost_node_without_a_runtime_lists_only_what_it_would_have_run(bundle, report):
    jobs = [Job("a", KW, {"ic-node:a": 1.0}),
            Job("b", {**KW, "backends": ["onnxruntime", "openvino"]}, {"ic-node:b": 1.0},
                runtimes=("onnxruntime",))]
    merged, _ = run_fleet(str(bundle), _Lose(report, "b"), jobs, lambda n, m: None, ["x"])
    failed = [r for r in merged.rows if r.status == "run_failed"]
    assert {r.backend for r in failed} == {"onnxruntime"} and len(failed) == 2  # fp32, fp16
    assert sorted(x for x in merged.not_run if x.startswith("b:")) == ["b:onnxruntime/onnx/fp16/cpu/b1",
                                                                       "b:onnxruntime/onnx/fp32/cpu/b1"]


def test_a_rejected_token_is_one_line_at_once(monkeypatch, tmp_path):
    """Ray's GCS client refuses a wrong token with AuthenticationError on its first attempt (about 0.3 s,
    measured on the loopback cluster); ray.init would retry it for about 20 s. Stand-in: that error."""
    exceptions = pytest.importorskip("ray.exceptions")
    from infer_compare.fleet.connect import check_token

    tok = tmp_path / "token"
    tok.write_text("0" * 64)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tok))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    calls = []

    def rejecting(addr):
        calls.append(addr)
        raise exceptions.AuthenticationError("RPC error: InvalidAuthToken: "
                                             "Authentication token is missing or incorrect")
    with pytest.raises(UsageError) as e:
        check_token("10.0.0.1:6379", make=rejecting)
    line = str(e.value)
    assert calls == ["10.0.0.1:6379"] and "\n" not in line
    assert line.startswith("the Ray head at 10.0.0.1:6379 rejected this machine: "
                           f"the token this machine holds ({tok}) is not the head's")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    with pytest.raises(UsageError, match="authentication is off here \\(RAY_AUTH_MODE=disabled\\) "
                                         "and the head requires"):
        check_token("10.0.0.1:6379", make=rejecting)


def test_a_head_that_fails_otherwise_is_left_to_ray_init():
    from infer_compare.fleet.connect import check_token

    def down(addr):
        raise ConnectionError("Failed to connect to GCS at 10.0.0.1:6379")

    check_token("10.0.0.1:6379", make=down)  # not a token problem: ray.init says what it is
    check_token("10.0.0.1:6379", make=lambda a: object())


RAY_CHATTER = """
import os, sys
from pathlib import Path
from infer_compare.fleet.raylog import RayOutput
print("before", flush=True)
with RayOutput(Path(sys.argv[1]) / "ray-driver.log") as io:
    os.write(1, b"\\x1b[33m(raylet)\\x1b[0m Raylet is terminated. Termination is unexpected.\\n")
    os.write(2,
        b"[W network_util.cc:330] Failed to determine local IP via external connectivity to: 8.8.8.8:53\\n")
    print("(raylet) [state-dump] NodeManager ...")
    print("[  1.0 s] node-b cpu: done", file=io.err)
print(io.said(), file=sys.stderr)
print("after", flush=True)
"""


def test_ray_output_goes_to_a_log_named_once(tmp_path):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    p = subprocess.run([str(PY), "-c", RAY_CHATTER, str(tmp_path / "out")], capture_output=True, text=True,
                       env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    log = tmp_path / "out" / "ray-driver.log"
    assert p.stdout.splitlines() == ["before", "after"]
    assert p.stderr.splitlines() == ["[  1.0 s] node-b cpu: done",
                                     "fleet: Ray's own messages (3 lines: node deaths, warnings) "
                                     f"are in {log}"]
    text = log.read_text()
    assert "Raylet is terminated" in text and "8.8.8.8" in text and "state-dump" in text


def test_ray_output_removes_its_log_on_a_one_line_error(tmp_path):
    from infer_compare.fleet.raylog import RayOutput

    with pytest.raises(UsageError), RayOutput(tmp_path / "new" / "ray-driver.log"):
        raise UsageError("rejected")
    assert not (tmp_path / "new").exists()


def _lab() -> list[Proc]:
    """Two nodes on one host, as `fleet join` starts them (each in a session of its own), and a shell."""
    ray = "/v/lib/python3.11/site-packages/ray"
    res = "--static_resource_list=ic-node:{},1.0,node:127.0.0.1,1.0,CPU,2"
    return [
        Proc(10, 1, 10, f"{ray}/core/src/ray/gcs/gcs_server --gcs_server_port=6379"),
        Proc(11, 1, 10, f"/v/bin/python -u {ray}/_private/log_monitor.py --session-dir=/tmp/ray/s"),
        Proc(12, 1, 10, f"{ray}/core/src/ray/raylet/raylet --node_id=aa {res.format('node-a')} --head"),
        Proc(13, 12, 10, "ray::DashboardAgent"),
        Proc(20, 1, 20, f"/v/bin/python -u {ray}/_private/log_monitor.py --session-dir=/tmp/ray/s"),
        Proc(21, 1, 20, f"{ray}/core/src/ray/raylet/raylet --node_id=bb {res.format('node-b')}"),
        Proc(22, 21, 20, "ray::RuntimeEnvAgent"),
        Proc(23, 21, 20, "ray::IDLE"),
        Proc(24, 1, 20, "bash ./lab.sh"),  # not Ray: never touched
        Proc(30, 1, 30, f"{ray}/core/src/ray/raylet/raylet --node_id=cc {res.format('node-ab')}"),
    ]


def test_leave_stops_this_node_only():
    raylet, procs = node_processes("node-b", _lab(), me=99)
    assert raylet.pid == 21 and [p.pid for p in procs] == [21, 20, 22, 23]
    _, head = node_processes("node-a", _lab(), me=99)
    assert [p.pid for p in head] == [12, 10, 11, 13]
    assert [_short(p) for p in head] == ["raylet", "gcs_server", "log_monitor.py", "ray::DashboardAgent"]
    with pytest.raises(UsageError, match=r"no node 'node-z' runs on this machine \(infer-compare nodes here: "
                                         r"node-a, node-ab, node-b\)"):
        node_processes("node-z", _lab(), me=99)
    shared = [p if p.pid != 21 else Proc(21, 1, 10, p.cmd) for p in _lab()]
    with pytest.raises(UsageError, match="node node-b shares its process group with node"):
        node_processes("node-b", shared, me=99)


def test_leave_of_an_unknown_node_is_one_line_exit_2(capsys):
    assert main(["fleet", "leave", "--name", "no-such-node-here"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no node 'no-such-node-here' runs on this machine" in err[0]


def test_merge_label_list_must_match_the_files(tmp_path, capsys):
    src = str(ROOT / "reports" / "cpu-lenet5" / "results.json")
    assert main(["merge", src, src, "--label", "fleet,devboard", "-o", str(tmp_path / "m")]) == 0
    assert (list(json.loads((tmp_path / "m" / "results.json").read_text())["machines"])
            == ["fleet", "devboard"])
    capsys.readouterr()
    assert main(["merge", src, src, "--label", "a,b,c", "-o", str(tmp_path / "n")]) == 2
    assert (capsys.readouterr().err.strip().splitlines()
            == ["infer-compare: error: 3 labels for 2 results files"])
    assert not (tmp_path / "n").exists()


def test_fleet_help_lists_leave():
    p = subprocess.run([sys.executable, "-m", "infer_compare", "fleet", "--help"], capture_output=True,
                       text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert p.returncode == 0 and "leave" in p.stdout
