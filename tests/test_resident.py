"""Resident measuring processes (measure/resident.py, residents.py): one process per runtime and GPU
measures that runtime's configurations in turn, puts back what one configuration leaves before the
next, and keeps the isolation of one process per configuration: a configuration that crashes or hangs
its process is a failed row (its batch size in flight), and the configurations after it run in a
fresh resident process. Stand-in runners on the CPU (CI has no GPU)."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from infer_compare.measure import resident
from infer_compare.measure.bench import LoopSettings
from infer_compare.measure.cells import CellSpec
from infer_compare.measure.forkserver import ForkServer
from infer_compare.measure.isolate import run_cell
from infer_compare.measure.resident import between_configurations, reset_peak_rss
from infer_compare.measure.residents import Residents

from .conftest import python_env

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX-only")


def _spec(tmp_path, runner, precision="fp32", batches=(2,)):
    np.save(tmp_path / "in.npy", np.zeros((4, 1, 32, 32), np.float32))
    return CellSpec(runner=runner if runner == "null" else f"tests.fake_runners:{runner}", artifact="none",
                    precision=precision, batch_sizes=tuple(batches), inputs=str(tmp_path / "in.npy"),
                    loop=LoopSettings(warmup_iters=1, min_iters=3, min_time_s=0.0))


@pytest.fixture
def residents(tmp_path):
    pool = Residents(tmp_path / "residents")
    yield pool
    pool.close()


def _measure(tmp_path, pool, runner, tag, precision="fp32", batches=(2,), timeout=60, server=None):
    return run_cell(_spec(tmp_path, runner, precision, batches), timeout, tmp_path, tag, env=python_env(),
                    server=server, residents=pool)


def test_one_process_measures_the_configurations_in_turn_each_as_if_fresh(tmp_path, residents):
    got = [_measure(tmp_path, residents, "PidRunner", p, p, batches=(1, 2)) for p in ("fp32", "fp16", "bf16")]
    rows = [r for rs in got for r in rs]
    assert all(r.ok for r in rows) and [r.batch_size for r in rows] == [1, 2] * 3
    assert len({r.extra["pid"] for r in rows}) == 1  # one process for all three
    assert [rs[0].extra["resident_process"]["position"] for rs in got] == [1, 2, 3]
    assert all(r.extra["left_before_load"] == [] for rs in got for r in rs[:1])  # the reset ran before each
    assert got[2][0].extra["resident_process"]["reset"]["fake_reset"] == 2
    assert got[1][0].extra["resident_process"]["reset"]["peak_rss_reset"] in (True, False)
    assert residents.started == 1


def test_a_crash_is_one_failed_row_and_the_next_configuration_runs_in_a_fresh_process(tmp_path, residents):
    [a] = _measure(tmp_path, residents, "PidRunner", "a")
    [crash] = _measure(tmp_path, residents, "CrashRunner", "crash")
    assert crash.status == "run_failed" and "SIGSEGV" in crash.error
    [b] = _measure(tmp_path, residents, "PidRunner", "b", "fp16")
    assert a.ok and b.ok and a.extra["pid"] != b.extra["pid"]
    assert b.extra["resident_process"]["position"] == 1 and residents.started == 2


def test_a_failed_row_ends_the_process_and_the_next_configuration_gets_a_fresh_one(tmp_path, residents):
    """A configuration that failed (a Python error here; a CUDA error would stay with its context) may have
    left the process in a state no fresh one has: the process leaves, and nothing after it is lost."""
    [a] = _measure(tmp_path, residents, "PidRunner", "a")
    [bad] = _measure(tmp_path, residents, "RaiseRunner", "bad")
    assert bad.status == "run_failed" and "engine deserialisation failed" in bad.error
    assert bad.extra["resident_process"]["position"] == 2 and not residents.live  # it left, and was let go
    [b] = _measure(tmp_path, residents, "PidRunner", "b", "fp16")
    assert a.ok and b.ok and a.extra["pid"] != b.extra["pid"] and b.extra["resident_process"]["position"] == 1
    assert b.process == 1  # a fresh process by plan, not after a crash


def test_a_crash_in_one_batch_size_keeps_the_others(tmp_path, residents):
    res = _measure(tmp_path, residents, "CrashAtBatch4", "b4", batches=(1, 2, 4, 8))
    by = {r.batch_size: r for r in res}
    assert by[1].ok and by[2].ok and by[8].ok and not by[4].ok and "SIGSEGV" in by[4].error
    assert by[1].process == 1 and by[8].process == 2  # the rest in a fresh resident process
    [after] = _measure(tmp_path, residents, "PidRunner", "after")
    assert after.ok and after.extra["resident_process"]["position"] == 2  # it stayed for the next


def test_a_hang_is_killed_at_the_timeout_and_the_next_configuration_runs(tmp_path, residents):
    t0 = time.perf_counter()
    [hang] = _measure(tmp_path, residents, "HangRunner", "hang", timeout=3)
    assert time.perf_counter() - t0 < 30 and "timed out after 3 s" in hang.error
    [after] = _measure(tmp_path, residents, "PidRunner", "after")
    assert after.ok and after.extra["resident_process"]["position"] == 1


def test_forked_resident_gives_its_server_back_to_a_plain_child(tmp_path, residents):
    """A fork server serves one child at a time: a plain child of that server ends the resident first."""
    srv = ForkServer(("numpy", "infer_compare.measure.child", "tests.fake_runners"))
    assert srv.start(env=python_env()), srv.failed
    try:
        [a] = _measure(tmp_path, residents, "PidRunner", "a", server=srv)
        residents.release(srv)
        [plain] = run_cell(_spec(tmp_path, "null"), 60, tmp_path, "plain", env=python_env(), server=srv)
        [b] = _measure(tmp_path, residents, "PidRunner", "b", server=srv)
        assert a.ok and plain.ok and b.ok and a.extra["pid"] != b.extra["pid"]
    finally:
        residents.close()
        srv.close()


def test_another_runtime_on_the_same_gpu_ends_the_resident_before_it(residents):
    """One resident per environment (GPU): the next runtime's resident does not start beside an idle one."""

    class GoneServer:  # another runtime's fork server, gone: its resident starts as a fresh interpreter
        modules = ("other.runtime",)

        def spawn(self, *a, **k):
            raise OSError("the fork server is not running")

    env = python_env()
    first = residents.get(None, env)
    other_gpu = residents.get(None, {**env, "CUDA_VISIBLE_DEVICES": "1"})
    second = residents.get(GoneServer(), env)
    assert first.proc.poll() is not None  # ended, not left idle beside the second
    assert second.alive() and other_gpu.alive() and residents.started == 3


def test_peak_rss_reset_is_reported_not_assumed():
    assert reset_peak_rss() in (True, False)


def test_one_collection_between_configurations_and_its_time(monkeypatch):
    """A runtime's hook that collected (PyTorch's, after torch.compile forgot its graphs) is the only
    collection; without one, the resident collects once itself; either way the reset says how long it took."""
    calls = []
    monkeypatch.setattr(resident.gc, "collect", lambda *a: calls.append(1) or 0)

    class Collects:
        @classmethod
        def reset_process_state(cls):
            resident.gc.collect()
            return {"gc_collected": True}

    class Plain:
        pass

    done = between_configurations([Collects])
    assert len(calls) == 1 and done["gc_collected"] and done["between_s"] >= 0
    calls.clear()
    done = between_configurations([Plain])
    assert len(calls) == 1 and done["gc_collected"]


def test_a_forked_resident_finds_the_servers_imports_frozen_and_says_where_its_time_went(tmp_path, residents):
    """The fork server freezes what its imports made (gc.freeze) before it forks: the resident's collections
    walk only its own objects. Each row says where its time outside the timed loop went (extra.harness_s)."""
    server = ForkServer(("numpy", "infer_compare.measure.resident", "tests.fake_runners"))
    assert server.start(env=python_env()), server.failed
    try:
        got = [_measure(tmp_path, residents, "PidRunner", p, p, server=server) for p in ("fp32", "fp16")]
    finally:
        residents.close()
        server.close()
    rows = [r for rs in got for r in rs]
    assert all(r.ok and r.extra["gc_frozen"] > 1000 for r in rows)
    assert set(rows[0].extra["harness_s"]) >= {"prepare_s", "around_loop_s"}
    assert rows[1].extra["resident_process"]["reset"]["gc_collected"] is True
    assert rows[1].extra["resident_process"]["reset"]["between_s"] >= 0


def test_closing_without_waiting_hands_back_the_processes_and_reap_ends_them(tmp_path, residents):
    """The end of a comparison (measure/run.py close_servers): the residents are told to end and their fork
    server is killed at once, and what is left of their exits is waited for beside the report's writing
    (``reap``), which kills a process still running after its limit."""
    import subprocess
    import sys

    from infer_compare.measure.residents import reap

    srv = ForkServer(("numpy", "infer_compare.measure.child", "tests.fake_runners"))
    assert srv.start(env=python_env()), srv.failed
    [a] = _measure(tmp_path, residents, "PidRunner", "a", server=srv)
    procs = residents.close(wait=False)
    assert a.ok and len(procs) == 1 and residents.live == {}
    server_proc = srv.close(wait=False)
    assert server_proc is not None and srv.close(wait=False) is None  # closed once
    reap([*procs, server_proc])
    assert server_proc.returncode is not None and procs[0].returncode is not None
    stuck = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    t0 = time.perf_counter()
    reap([stuck], limit_s=0.3)
    assert stuck.wait(timeout=5) == -9 and time.perf_counter() - t0 < 5
