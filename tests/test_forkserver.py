"""The fork server (measure/forkserver.py): configurations of runtimes with a slow import are forked from
one server that imported them once; each is still its own process, with the same failure
handling as a fresh interpreter (a crash, a hang, a crash in one batch size)."""

import os
import time

import numpy as np
import pytest

from infer_compare.measure.bench import LoopSettings
from infer_compare.measure.cells import CellSpec
from infer_compare.measure.forkserver import ForkServer
from infer_compare.measure.forkservers import ForkServers, preloads
from infer_compare.measure.isolate import run_cell

from .conftest import python_env

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")


def _spec(tmp_path, runner, batches=(2,)):
    np.save(tmp_path / "in.npy", np.zeros((4, 1, 32, 32), np.float32))
    return CellSpec(runner=runner if runner == "null" else f"tests.fake_runners:{runner}", artifact="none",
                    batch_sizes=tuple(batches), inputs=str(tmp_path / "in.npy"),
                    loop=LoopSettings(warmup_iters=1, min_iters=3, min_time_s=0.0))


@pytest.fixture
def server():
    srv = ForkServer(("numpy", "infer_compare.measure.child", "tests.fake_runners"))
    assert srv.start(env=python_env()), srv.failed
    yield srv
    srv.close()


def test_children_are_forked_measured_and_each_its_own_process(tmp_path, server):
    a = run_cell(_spec(tmp_path, "null", batches=(1, 2)), 60, tmp_path, "a", env=python_env(), server=server)
    b = run_cell(_spec(tmp_path, "null"), 60, tmp_path, "b", env=python_env(), server=server)
    assert [r.batch_size for r in a] == [1, 2] and all(r.ok and len(r.samples_ns) >= 3 for r in a + b)
    assert server.proc is not None and server.proc.poll() is None  # the server outlives its children
    # each child reported its own peak RSS: a fresh process, not the server itself
    assert all(r.peak_rss_mb and r.peak_rss_mb > 0 for r in a + b)


def test_crash_and_hang_in_a_forked_child(tmp_path, server):
    [res] = run_cell(_spec(tmp_path, "CrashRunner"), 60, tmp_path, "crash", env=python_env(), server=server)
    assert res.status == "run_failed" and "SIGSEGV" in res.error
    t0 = time.perf_counter()
    [res] = run_cell(_spec(tmp_path, "HangRunner"), 3, tmp_path, "hang", env=python_env(), server=server)
    assert time.perf_counter() - t0 < 30 and "timed out after 3 s" in res.error
    # the server still serves after a crash and a killed child
    [res] = run_cell(_spec(tmp_path, "null"), 60, tmp_path, "after", env=python_env(), server=server)
    assert res.ok


def test_crash_in_one_batch_size_keeps_the_others_when_forked(tmp_path, server):
    res = run_cell(_spec(tmp_path, "CrashAtBatch4", batches=(1, 2, 4, 8)), 60, tmp_path, "b4",
                   env=python_env(), server=server)
    by = {r.batch_size: r for r in res}
    assert by[1].ok and by[2].ok and by[8].ok and not by[4].ok
    assert by[8].process == 2 and "crashed" in by[4].error


def test_python_error_in_a_forked_child_is_its_row(tmp_path, server):
    [res] = run_cell(_spec(tmp_path, "RaiseRunner"), 60, tmp_path, "raise", env=python_env(), server=server)
    assert res.status == "run_failed" and res.error.startswith("load:")


def test_child_gets_the_request_environment(tmp_path, server):
    log = tmp_path / "env.log"
    child = server.spawn("tests.fake_runners", ["FAKE_ENV_PROBE"],
                         {**python_env(), "FAKE_ENV_PROBE": "yes-42"}, str(log))
    assert child.wait(timeout=60) == 0
    assert "FAKE_ENV_PROBE=yes-42" in log.read_text()


def test_a_server_that_cannot_import_is_not_used():
    srv = ForkServer(("no_such_module_anywhere",))
    assert srv.start() is False and "no_such_module_anywhere" in srv.failed
    optional = ForkServer(("?no_such_module_anywhere", "json"))
    assert optional.start() is True
    optional.close()
    msgs = []
    servers = ForkServers(msgs.append)
    assert servers.for_modules(("no_such_module_anywhere",)) is None
    assert any("not used" in m for m in msgs)
    servers.close()


def test_disabled_by_environment(monkeypatch):
    monkeypatch.setenv("INFER_COMPARE_FORKSERVER", "0")
    assert ForkServers().for_modules(("json",)) is None


def test_one_server_per_runtime_with_its_runners_preloads():
    got = preloads(["pytorch", "pytorch-compile", "onnxruntime"])
    assert got["pytorch"] == got["pytorch-compile"]  # one server for the PyTorch runtime
    assert "torch" in got["pytorch"]
    assert "?torch._inductor.compile_fx" in got["pytorch"]  # torch.compile's configurations are selected
    assert "onnxruntime" not in got  # a cheap import: fresh interpreters
    eager = preloads(["pytorch"])["pytorch"]  # no torch.compile rows (a machine without CUDA): no Inductor
    assert not any("_inductor" in m for m in eager) and set(eager) < set(got["pytorch"])


def test_a_server_that_imported_more_serves_a_narrower_request():
    servers = ForkServers()
    try:
        wide = servers.for_modules(("json", "?no_such_module_anywhere", "csv"))
        assert wide is not None and wide.ready
        assert servers.for_modules(("json", "csv")) is wide  # no second server, no second import
        assert len(servers.servers) == 1
    finally:
        servers.close()


def test_a_driver_initialised_by_any_library_poisons_the_server(monkeypatch):
    """cuInit by a library other than torch also leaves forked children without CUDA: the server checks
    the driver itself (cuDeviceGetCount answers 3, CUDA_ERROR_NOT_INITIALIZED, before cuInit)."""
    import ctypes

    from infer_compare.measure import forkserver

    class FakeDriver:
        def __init__(self, rc):
            self.rc = rc

        def cuDeviceGetCount(self, ref):  # noqa: N802 - the driver's name
            return self.rc

    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeDriver(3))
    assert forkserver._driver_initialised() is False
    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeDriver(0))
    assert forkserver._driver_initialised() is True

    def no_driver(name):
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", no_driver)
    assert forkserver._driver_initialised() is False


def test_a_server_whose_imports_initialise_cuda_is_refused(tmp_path):
    """A forked child cannot use CUDA that its parent initialised: such a server must not be used.
    Stand-in: a module whose import marks torch's CUDA as initialised."""
    pytest.importorskip("torch")
    mod = tmp_path / "ic_fake_cuda_init.py"
    mod.write_text("import torch\ntorch.cuda._initialized = True\n")
    srv = ForkServer(("torch", "ic_fake_cuda_init"))
    assert srv.start(env={**python_env(),
                          "PYTHONPATH": f"{tmp_path}{os.pathsep}{python_env()['PYTHONPATH']}"}) is False
    assert "initialised CUDA" in srv.failed


def test_spare_servers_for_each_gpu_beyond_the_first(monkeypatch):
    """Several GPUs measured at once: each slot after the first forks from servers launched before the
    preparation (stand-in devices); none with --gpus sequential or one GPU asked for."""
    from types import SimpleNamespace as NS

    from infer_compare.measure import forkservers

    two = {"cpu": ["cpu"], "cuda": ["cuda:0", "cuda:1"]}
    assert forkservers.spare_slots(two, NS(gpus="spread", devices=None)) == 1
    assert forkservers.spare_slots(two, NS(gpus="sequential", devices=None)) == 0
    assert forkservers.spare_slots(two, NS(gpus="spread", devices=("cuda:0",))) == 0
    assert forkservers.spare_slots(two, NS(gpus="every", devices=("cpu", "cuda"))) == 1
    assert forkservers.spare_slots({"cpu": ["cpu"], "cuda": ["cuda:0"]}, NS(gpus="spread", devices=None)) == 0
    launched = []
    monkeypatch.setattr(forkservers.ForkServers, "launch",
                        lambda self, mods: launched.append((id(self), mods)))
    sel = NS(gpus="spread", devices=None, backends=("pytorch",))
    servers = forkservers.launch_fork_servers("resnet50", sel, two, NS(root="/tmp"), NS(log=print))
    assert len(servers.spares) == 1 and len({i for i, _ in launched}) == 2  # its own and one spare's
    spare = servers.take_spare()
    assert spare is not None and servers.take_spare() is None


def test_closing_without_waiting_hands_back_every_server_process_its_spares_included():
    """measure/run.py close_servers: each server killed, and one flat list of processes for the reaper."""
    from infer_compare.measure.residents import reap

    servers, spare = ForkServers(), ForkServers()
    try:
        assert servers.for_modules(("json",)) is not None and spare.for_modules(("csv",)) is not None
        servers.spares.append(spare)
        procs = servers.close(wait=False)
        assert len(procs) == 2 and all(hasattr(p, "wait") for p in procs)
        assert servers.servers == {} and servers.spares == [] and servers.close(wait=False) == []
        reap(procs)
        assert all(p.returncode is not None for p in procs)
    finally:
        servers.close()
        spare.close()
