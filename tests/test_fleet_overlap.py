"""The fleet's fixed work done beside a wait (fleet/overlap.py), with the serial order's outcome: the driver
writes the report while Ray shuts down and still shuts it down on every path; a node hashes the driver's
bundle directory while it imports what the run needs, and still refuses a file that does not match."""

from __future__ import annotations

import threading
import time

import pytest

from infer_compare.cli import main
from infer_compare.fleet import pack, task
from infer_compare.fleet.executor import Job, JobResult
from infer_compare.fleet.local import LocalExecutor
from infer_compare.fleet.overlap import Background, prefetch

from .conftest import FLEET_KW, altered_copy, lenet_onnx_bundle

KW = FLEET_KW


@pytest.fixture(scope="module")
def bundle(cache_dir, tmp_path_factory):
    return lenet_onnx_bundle(tmp_path_factory.mktemp("overlap") / "lenet5", cache_dir)


@pytest.fixture(scope="module")
def one_report(bundle):
    (res,) = LocalExecutor().run(str(bundle), [Job("x", KW)], lambda n, m: None)
    return res.report


def test_background_returns_the_value_or_raises_the_error_where_asked():
    assert Background(lambda a, b: a + b, 2, 3).result() == 5
    bad = Background(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        bad.result()
    slow = Background(time.sleep, 0.5)
    with pytest.raises(TimeoutError):
        slow.result(timeout=0.01)


def test_prefetch_imports_in_order_stops_at_a_failure_and_never_raises():
    assert prefetch(("json", "infer_compare_no_such_module", "csv")).result() == ["json"]


class _FakeRay:
    """ray as the driver uses it: one CPU node; shutdown takes 0.4 s and records when and where it ran."""

    def __init__(self):
        self.calls: list[tuple[str, float, float]] = []

    def nodes(self):
        return [{"Alive": True, "Resources": {"ic-node:n1": 1.0, "ic-device:n1/cpu": 1.0, "CPU": 2.0},
                 "Labels": {}, "NodeManagerHostname": "h"}]

    def shutdown(self):
        t0 = time.perf_counter()
        time.sleep(0.4)
        self.calls.append((threading.current_thread().name, t0, time.perf_counter()))


def _driver(monkeypatch, report, fail: bool = False):
    """The `fleet run` CLI with Ray, the head's check and the executor stood in;
    (fake ray, write start times)."""
    import infer_compare.cli.fleet as cli

    fake, writes = _FakeRay(), []

    class _Executor:
        def __init__(self, **kw):
            pass

        def run(self, bundle_, jobs, on_event):
            if fail:
                raise RuntimeError("the executor broke")
            return [JobResult(j, report, node={"host": "h"}) for j in jobs]

    real_write = cli.write_all

    def write_all(merged, out):
        writes.append(time.perf_counter())
        return real_write(merged, out)

    monkeypatch.setattr(cli, "require_ray", lambda import_it=False: None)
    monkeypatch.setattr(cli, "check_reachable", lambda a: None)
    monkeypatch.setattr(cli, "enable", lambda addresses=(): "")
    monkeypatch.setattr(cli, "connect", lambda a: fake)
    monkeypatch.setattr(cli, "RayExecutor", _Executor)
    monkeypatch.setattr(cli, "write_all", write_all)
    return fake, writes


def test_the_driver_writes_the_report_while_ray_shuts_down(bundle, one_report, monkeypatch, tmp_path):
    fake, writes = _driver(monkeypatch, one_report)
    out = tmp_path / "o"
    assert main(["fleet", "run", str(bundle), "--address", "127.0.0.1:6379", "--out", str(out)]) == 0
    assert (out / "results.json").is_file() and (out / "results.html").is_file()
    (name, t0, t1), = fake.calls  # shut down once, finished before the command returned
    assert name != threading.main_thread().name
    assert len(writes) == 1 and t0 <= writes[0] < t1  # the report was being written while Ray shut down


def test_the_driver_shuts_ray_down_when_the_run_fails(bundle, one_report, monkeypatch, tmp_path):
    fake, writes = _driver(monkeypatch, one_report, fail=True)
    with pytest.raises(RuntimeError, match="the executor broke"):
        main(["fleet", "run", str(bundle), "--address", "127.0.0.1:6379", "--out", str(tmp_path / "o")])
    assert [c[0] for c in fake.calls] == [threading.main_thread().name] and not writes


def test_a_node_hashes_the_driver_directory_beside_its_imports_and_still_refuses_a_mismatch(
        bundle, monkeypatch, tmp_path):
    spans: dict[str, tuple[float, float]] = {}
    real = task.local_bundle

    def hashing(path, sha):
        t0 = time.perf_counter()
        time.sleep(0.3)
        try:
            return real(path, sha)
        finally:
            spans["hash"] = (t0, time.perf_counter())

    def warm(job):
        t0 = time.perf_counter()
        time.sleep(0.3)
        spans["warm"] = (t0, time.perf_counter())

    monkeypatch.setattr(task, "local_bundle", hashing)
    monkeypatch.setattr(task, "_warm", warm)
    sha = pack.manifest_sha256(bundle)
    out = task.run_on_node(None, sha, Job("n1", KW), str(bundle))
    assert "report" in out and "driver's bundle directory" in out["node"]["task"]["bundle"]
    (h0, h1), (w0, w1) = spans["hash"], spans["warm"]
    assert h0 < w1 and w0 < h1  # at the same time
    copy = altered_copy(bundle, tmp_path / "b")
    out = task.run_on_node(None, sha, Job("n1", KW), str(copy))
    assert "report" not in out and "does not match" in out["error"]


def test_only_a_gpu_job_warms_torch(monkeypatch):
    seen = []
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: seen.append(name))  # None: not installed
    task._warm(Job("n1", KW))
    assert seen == []
    task._warm(Job("n1", {**KW, "devices": ["cuda:0"]}, gpus=1.0))
    assert seen == ["torch"]
