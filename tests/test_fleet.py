"""Fleet pieces without a cluster: the bundle on the wire (hash checked on arrival, tampering refused),
the join step's resources and version refusal, planning per node and per GPU, the driver's merge of
partial results (failed rows naming the node, version skew, Ctrl-C), and the CLI's one-line errors."""

from __future__ import annotations

import io
import os
import shutil
import socket
import sys
import tarfile
import types

import pytest

from infer_compare.base.errors import UsageError
from infer_compare.bundle import BundleError
from infer_compare.cli import main
from infer_compare.fleet import join, local, pack, plan, ray_executor
from infer_compare.fleet.executor import Job, JobResult
from infer_compare.fleet.local import LocalExecutor
from infer_compare.fleet.run import run_fleet, skew, waves
from infer_compare.fleet.task import run_on_node

from .conftest import FLEET_KW, altered_copy, lenet_onnx_bundle

KW = FLEET_KW


@pytest.fixture(scope="module")
def bundle(cache_dir, tmp_path_factory):
    return lenet_onnx_bundle(tmp_path_factory.mktemp("fleet") / "lenet5", cache_dir)


def _altered(data: bytes, suffix: str) -> bytes:
    """The archive with one byte of its member ending in ``suffix`` flipped (sizes and headers unchanged)."""
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        m = next(m for m in tar.getmembers() if m.name.endswith(suffix))
    bad = bytearray(data)
    bad[m.offset_data + m.size // 2] ^= 1
    return bytes(bad)


def test_pack_unpack_round_trip_and_tampering(bundle, tmp_path):
    data, sha = pack.pack(bundle)
    # what is sent: the manifest's hash, its files' hashes inside it
    assert sha == pack.manifest_sha256(bundle)
    v = pack.unpack(data, sha, tmp_path / "ok")
    assert (v.root / "manifest.json").is_file() and v.hashed and v.n_files == len(v.manifest["files"])
    # a file altered on the way: the manifest's hash of it refuses it
    with pytest.raises(BundleError, match="sha256 of artifacts/onnx-fp32/model.onnx does not match"):
        pack.unpack(_altered(data, ".onnx"), sha, tmp_path / "bad")
    # the manifest altered on the way (with it, the files' hashes): the driver's hash of it refuses it
    with pytest.raises(BundleError, match="manifest of sha256"):
        pack.unpack(_altered(data, "manifest.json"), sha, tmp_path / "man")
    with pytest.raises(BundleError, match="cannot be read"):
        pack.unpack(data[:700], sha, tmp_path / "cut")


def test_archive_member_leaving_the_bundle_is_refused(tmp_path):
    import hashlib

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("../evil")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    data = buf.getvalue()
    with pytest.raises(BundleError, match="not a plain relative file"):
        pack.unpack(data, hashlib.sha256(data).hexdigest(), tmp_path / "x")
    assert not (tmp_path / "evil").exists()


def test_node_task_refuses_an_altered_file_shipped_or_in_the_driver_directory(bundle, tmp_path):
    """A node never measures a bundle whose file does not match the manifest the driver sent: shipped (altered
    on the way) or read from the driver's directory (a node on its host; altered after the driver's check)."""
    data, sha = pack.pack(bundle)
    out = run_on_node(_altered(data, ".onnx"), sha, Job("n1", KW))
    assert ("sha256 of artifacts/onnx-fp32/model.onnx does not match" in out["error"]
            and out["node"]["tool_version"])
    copy = altered_copy(bundle, tmp_path / "b")
    out = run_on_node(None, sha, Job("n1", KW), str(copy))
    assert "report" not in out and "sha256 of artifacts/onnx-fp32/model.onnx does not match" in out["error"]


def test_node_task_without_the_driver_directory_asks_for_the_bundle(bundle, tmp_path):
    """Another host (no such directory, or another manifest at that path): "absent", nothing measured, and the
    driver ships the bundle."""
    sha = pack.manifest_sha256(bundle)
    assert "absent" in run_on_node(None, sha, Job("n1", KW), str(tmp_path / "nowhere"))
    other = tmp_path / "other"
    shutil.copytree(bundle, other)
    (other / "manifest.json").write_text((other / "manifest.json").read_text() + " ")
    assert "absent" in run_on_node(None, sha, Job("n1", KW), str(other))


def test_local_executor_measures_a_job(bundle):
    events = []
    (res,) = LocalExecutor().run(str(bundle), [Job("here", KW)], lambda n, m: events.append((n, m)))
    assert not res.error and res.report["rows"]
    assert any(r["status"] == "ok" for r in res.report["rows"]) and events[-1] == ("here cpu", "done")


def test_advertised_resources_one_per_device():
    res, labels = join.advertised("jet", {"cpu": ["cpu"], "cuda": ["cuda:0", "cuda:1"], "edgetpu": ["usb:0"]},
                                  {"onnxruntime": "1.20.0", "tensorrt": "10.3 (JetPack)"})
    assert res == {"ic-node:jet": 1.0, "ic-device:jet/cuda:0": 1.0, "ic-device:jet/cuda:1": 1.0,
                   "ic-device:jet/usb:0": 1.0}
    assert (labels["infer-compare/onnxruntime"] == "1.20.0"
            and labels["infer-compare/tensorrt"] == "10.3_JetPack_")
    argv = join.ray_start_argv("jet", None, 6379, res, labels, "127.0.0.1")
    assert "--include-dashboard=false" in argv and "--dashboard-host=127.0.0.1" in argv


def test_version_mismatch_is_one_line_with_both_versions():
    msg = ("Version mismatch: The cluster was started with:\n    Ray: 2.60.0\n    Python: 3.11.7\n"
           "This process on node 10.0.0.5 was started with:\n    Ray: 2.49.0\n    Python: 3.10.12\n")
    line = join.mismatch_line(msg)
    assert ("\n" not in line and "Ray 2.60.0 on Python 3.11.7" in line
            and "Ray 2.49.0 on Python 3.10.12" in line)
    assert join.mismatch_line("some other failure") is None


def test_planning_one_task_per_gpu_then_cpu_alone():
    nodes = plan.nodes_of([
        {"Alive": True, "Resources": {"CPU": 8, "GPU": 2, "ic-node:srv": 1, "ic-device:srv/cuda:0": 1,
                                      "ic-device:srv/cuda:1": 1}},
        {"Alive": True, "Resources": {"CPU": 4, "ic-node:pi": 1}},
        {"Alive": False, "Resources": {"ic-node:gone": 1}},
        {"Alive": True, "Resources": {"CPU": 2}}])
    assert set(nodes) == {"srv", "pi"} and nodes["srv"]["devices"] == ["cuda:0", "cuda:1"]
    jobs = [j for n, node in nodes.items() for j in plan.jobs_for(n, node, {"batch_sizes": [1]})]
    srv, pi = jobs  # one task per node: it measures there as a local run does (both GPUs at once, then CPU)
    assert srv.run_kwargs["devices"] == ["cpu", "cuda:0", "cuda:1"] and srv.gpus == 2.0
    assert srv.resources == {"ic-node:srv": 1.0, "ic-device:srv/cuda:0": 1.0, "ic-device:srv/cuda:1": 1.0}
    assert pi.run_kwargs["devices"] is None and pi.gpus == 0.0 and pi.resources == {"ic-node:pi": 1.0}
    (one,) = plan.jobs_for("srv", nodes["srv"], {"devices": ["cuda:1"]})
    assert one.gpus == 1.0 and one.resources == {"ic-node:srv": 1.0, "ic-device:srv/cuda:1": 1.0}
    assert waves(jobs) == [jobs]
    with pytest.raises(UsageError, match="no node matches --targets x"):
        plan.select(nodes, ["pi", "x"])
    with pytest.raises(UsageError, match="no infer-compare node"):
        plan.select({}, None)


class _Fake:
    """An executor that replays a real report for some nodes and an error for others."""

    def __init__(self, report: dict, fail: dict[str, str], interrupt_after: int | None = None):
        self.report, self.fail, self.interrupt_after = report, fail, interrupt_after

    def run(self, bundle, jobs, on_event):
        out = []
        for i, j in enumerate(jobs):
            if self.interrupt_after is not None and i >= self.interrupt_after:
                out.append(JobResult(j, error=f"node {j.target}: cancelled by Ctrl-C before it finished"))
            elif j.target in self.fail:
                out.append(JobResult(j, error=f"node {j.target}: {self.fail[j.target]}"))
            else:
                out.append(JobResult(j, self.report,
                                     node={"tool_version": "0.1.0", "python": f"3.{10 + i}.1"}))
        return out


@pytest.fixture(scope="module")
def one_report(bundle):
    (res,) = LocalExecutor().run(str(bundle), [Job("x", KW)], lambda n, m: None)
    return res.report


def test_driver_merges_keeps_good_nodes_and_names_the_failed_one(one_report):
    jobs = [Job(n, KW, {f"ic-node:{n}": 1}) for n in ("a", "b", "c")]
    merged, results = run_fleet("B", _Fake(one_report, {"b": "NodeDiedError: node is dead"}), jobs,
                                lambda n, m: None, ["infer-compare", "fleet"])
    assert set(merged.machines) == {"a", "c"} and not merged.complete
    failed = [r for r in merged.rows if r.status == "run_failed"]
    assert (len(failed) == 1 and failed[0].device.startswith("b:")
            and "node b: NodeDiedError" in failed[0].reason)
    assert {r.extra.get("machine") for r in merged.rows} == {"a", "b", "c"}
    assert any("version skew, python" in w for w in merged.warnings)


def test_bundle_route_results_merge_beside_the_nodes(one_report):
    from infer_compare.base.records import Report

    jobs = [Job("a", KW, {"ic-node:a": 1})]
    merged, _ = run_fleet("B", _Fake(one_report, {}), jobs, lambda n, m: None, ["x"],
                          others=[("devboard", Report.from_dict(one_report))])
    assert list(merged.machines) == ["a", "devboard"]
    assert {r.extra.get("machine") for r in merged.rows} == {"a", "devboard"}
    assert any("devboard (bundle route)" in n for n in merged.notes)


def test_with_needs_name_and_a_results_file(capsys, bundle):
    assert main(["fleet", "run", str(bundle), "--address", "127.0.0.1:1", "--out", "x",
                 "--with", "nofile"]) == 2
    assert "--with 'nofile': expected NAME=RESULTS.json" in capsys.readouterr().err


def test_ctrl_c_keeps_what_came_back(one_report):
    jobs = [Job(n, KW) for n in ("a", "b")]
    merged, _ = run_fleet("B", _Fake(one_report, {}, interrupt_after=1), jobs, lambda n, m: None, ["x"])
    assert set(merged.machines) == {"a"} and not merged.complete
    assert "interrupted by Ctrl-C" in merged.incomplete_reason


def test_skew_lists_each_node():
    assert skew({"a": {"tool_version": "0.1.0"}, "b": {"tool_version": "0.2.0"}}) == \
        ["version skew, tool_version: a 0.1.0, b 0.2.0"]
    assert skew({"a": {"ray": "2.60.0"}, "b": {"ray": "2.60.0"}}) == []


def test_fleet_without_ray_is_one_line_exit_2(monkeypatch, capsys, bundle):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "ray" else real(n, *a))
    assert main(["fleet", "run", str(bundle), "--address", "127.0.0.1:1", "--out", "x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["infer-compare: error: infer-compare fleet needs Ray, which is not installed "
                   "(install: pip install 'ray>=2.60')"]  # the extra's own requirement: not on an index


def test_unreachable_address_is_one_line_exit_2(capsys, bundle):
    pytest.importorskip("ray")
    assert main(["fleet", "run", str(bundle), "--address", "127.0.0.1:1", "--out", "x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot reach the Ray head at 127.0.0.1:1" in err[0]
    assert main(["fleet", "run", str(bundle), "--address", "nohostport", "--out", "x"]) == 2


def test_a_gpu_job_whose_device_the_task_cannot_see_fails_and_the_run_exits_1(bundle, one_report, monkeypatch,
                                                                              tmp_path, capsys):
    """Ray gave the task no GPU it can see (stand-in: no GPU here): a failed job naming node and device, never
    a skipped row; the fleet run saves what came back and exits 1."""
    from infer_compare.cli.fleet import _save
    from infer_compare.fleet import bind

    monkeypatch.setattr(bind, "assigned_gpu_ids", lambda: [])
    monkeypatch.setattr("infer_compare.catalog.device_kinds.gpus", lambda: ())
    data, sha = pack.pack(bundle)
    gpu_job = Job("srv", {**KW, "devices": ["cuda:1"]}, {"ic-device:srv/cuda:1": 1.0}, gpus=1.0)
    out = run_on_node(data, sha, gpu_job)
    assert "report" not in out and "node srv: cuda:1 not visible to the task" in out["error"]

    class _Replay:
        def run(self, bundle_, jobs, on_event):
            task = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "ray_gpu_ids": [], "cores": 2}
            return [JobResult(j, error=f"node {j.label}: {out['error']}") if j is gpu_job else
                    JobResult(j, one_report, node={"task": task}) for j in jobs]

    merged, results = run_fleet("B", _Replay(), [gpu_job, Job("srv", KW, {"ic-node:srv": 1})],
                                lambda n, m: None, ["x"])
    failed = [r for r in merged.rows if r.status == "run_failed"]
    assert len(failed) == 1 and failed[0].device == "srv:cuda:1" and "cuda:1 not visible" in failed[0].reason
    assert not merged.complete and any("the Ray task of srv cpu saw CUDA_VISIBLE_DEVICES=''" in n
                                       for n in merged.notes)
    assert _save(merged, results, tmp_path / "o") == 1
    assert "node srv cuda:1: " in capsys.readouterr().err


def test_fleet_join_starts_the_node_with_workers_at_nice_0():
    env = join.node_env({"PATH": "/bin", "RAY_worker_niceness": "15"})
    assert env["RAY_worker_niceness"] == "0" and env["PATH"] == "/bin"


def test_a_ray_worker_at_nice_15_measures_at_0_and_is_restored(monkeypatch):

    state = {"nice": 15, "calls": []}
    monkeypatch.setattr(os, "getpriority", lambda which, who: state["nice"])

    def setp(which, who, value):
        state["calls"].append(value)
        state["nice"] = value
    monkeypatch.setattr(os, "setpriority", setp)
    with local.as_local_run((), in_ray=True) as warnings:
        assert state["nice"] == 0 and warnings == []
    assert state["calls"] == [0, 15] and state["nice"] == 15
    state["calls"].clear()
    with local.as_local_run((), in_ray=False):  # a local run keeps the user's own niceness
        pass
    assert state["calls"] == []


def test_a_worker_whose_niceness_cannot_be_reset_is_a_warning(monkeypatch):

    monkeypatch.setattr(os, "getpriority", lambda which, who: 15)

    def refused(which, who, value):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(os, "setpriority", refused)
    with local.as_local_run((), in_ray=True) as warnings:
        pass
    assert len(warnings) == 1 and "nice 15" in warnings[0] and "fleet join" in warnings[0]


def test_ray_executor_reads_the_driver_directory_on_its_host_and_ships_elsewhere(bundle, monkeypatch,
                                                                                 tmp_path):
    """A node on the driver's host gets the directory, not the archive (nothing packed for it); a node
    elsewhere, or one on a host of the same name without that directory ("absent"), gets the archive,
    packed once."""
    got, puts = {}, []

    def node(data, sha, job, path=""):
        if data is None:
            return {"absent": "no"} if job.target == "twin" else {"report": {"via": path}, "node": {}}
        return {"report": {"via": pack.unpack(data, sha, tmp_path / job.target).n_files}, "node": {}}

    def remote(**_kw):
        def wrap(fn):
            class _Task:
                def options(self, **_o):
                    return self

                def remote(self, *a):
                    ref = object()
                    got[ref] = fn(*a)
                    return ref
            return _Task()
        return wrap

    fake = types.SimpleNamespace(remote=remote, put=lambda d: puts.append(d) or d, get=got.__getitem__,
                                 wait=lambda p, num_returns, timeout: (p[:1], p[1:]),
                                 cancel=lambda *a, **k: None)
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setattr(ray_executor, "run_on_node", node)
    here = socket.gethostname()
    jobs = [Job("a", KW, host=here), Job("b", KW, host="elsewhere"), Job("twin", KW, host=here)]
    events = []
    res = ray_executor.RayExecutor(poll_s=0).run(str(bundle), jobs, lambda n, m: events.append((n, m)))
    n = pack.verify(bundle).n_files
    assert [r.report["via"] for r in res] == [str(bundle.resolve()), n, n] and len(puts) == 1
    assert ("twin cpu", "the driver's bundle directory is not on this node: shipped") in events
    puts.clear()
    ray_executor.RayExecutor(poll_s=0).run(str(bundle), jobs[:1], lambda n, m: None)
    assert not puts  # every node on the driver's host: nothing packed
