"""Two measuring processes on one GPU taking turns (host/gpu_turn.py): never both on the GPU, the tracer's
release lets the other in, each row says how long it waited; torch's compile-end callback takes the turn back
before compiled code runs; a GPU slot becomes two slots of that GPU, each worker keeps its own history."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace as NS

import numpy as np
import pytest

from infer_compare.backends.pytorch.run_cuda import compiling_beside
from infer_compare.host import gpu_turn
from infer_compare.measure.bench import LoopSettings
from infer_compare.measure.cells import CellSpec
from infer_compare.measure.gpus import Slot, with_turns
from infer_compare.measure.isolate import run_cell
from infer_compare.measure.lanes import lanes
from infer_compare.measure.parallel import Board

from .conftest import python_env

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="flock and fork: POSIX only")


def _spec(tmp_path, min_time_s: float) -> CellSpec:
    np.save(tmp_path / "in.npy", np.zeros((4, 1, 8, 8), np.float32))
    return CellSpec(runner="tests.fake_runners:TurnRunner", artifact="none", batch_sizes=(2,),
                    inputs=str(tmp_path / "in.npy"),
                    loop=LoopSettings(warmup_iters=1, min_iters=3, min_time_s=min_time_s,
                                      max_time_s=min_time_s, target_ci=None, warmup_time_s=0.0))


def _calls(path) -> list[float]:
    return [float(line.split()[1]) for line in path.read_text().splitlines()]


def test_two_processes_never_use_the_gpu_at_once_and_a_compile_lets_the_other_in(tmp_path):
    """B lets its turn go in its load (as torch.compile's tracing does) until A, started then, has taken the
    GPU; A measures for 1.2 s; B's calls come after A's; B's row says it waited and compiled beside, and its
    load time leaves out the wait. (B's release lasts until A's first call, not a fixed time: A's start takes
    from 0.3 s to several on a busy machine.)"""
    lock = str(tmp_path / "gpu0.turn")
    env = {**python_env(), gpu_turn.ENV: lock}
    got: dict[str, list] = {}

    def run(name: str, extra: dict[str, str], min_time_s: float) -> None:
        got[name] = run_cell(_spec(tmp_path / name, min_time_s), 60, tmp_path / name, name,
                             env={**env, **extra})

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    b_log, a_log = tmp_path / "b.log", tmp_path / "a.log"
    tb = threading.Thread(target=run, args=("b", {"TURN_LOG": str(b_log), "TURN_RELEASE_S": "0.3",
                                                  "TURN_RELEASE_UNTIL": str(a_log)}, 0.2))
    tb.start()
    t0 = time.time()
    while not (tmp_path / "b.log.released").exists() and time.time() - t0 < 30:
        time.sleep(0.01)
    ta = threading.Thread(target=run, args=("a", {"TURN_LOG": str(a_log)}, 1.2))
    ta.start()
    ta.join(90)
    tb.join(90)
    a, b = _calls(a_log), _calls(b_log)
    released_at = float((tmp_path / "b.log.released").read_text())
    returned_at = float((tmp_path / "b.log.returned").read_text())
    assert released_at < min(a) < returned_at, "A measured inside B's release"
    assert max(a) < min(b), "B measured only after A was done"
    [ra], [rb] = got["a"], got["b"]
    assert ra.ok and rb.ok
    turn_b, beside = rb.extra["gpu_turn"], returned_at - released_at
    assert beside - 0.05 <= turn_b["compiled_beside_s"] < beside + 0.2, (turn_b, beside)
    assert turn_b["waited_s"] >= max(a) - returned_at - 0.05 >= 0.4, (turn_b, max(a) - returned_at)
    assert rb.load_s < turn_b["compiled_beside_s"] + 0.3, "the wait for A is not B's load time"
    assert ra.extra["gpu_turn"]["waited_s"] < 0.5
    holds = [(h, who) for who, r in (("a", ra), ("b", rb)) for h in r.extra["gpu_turn"]["held"]]
    holds.sort()
    assert {w for _, w in holds} == {"a", "b"}
    assert all(h0[1] <= h1[0] + 0.002 for (h0, _), (h1, _) in zip(holds, holds[1:], strict=False)), \
        "no two holds overlap"


def test_a_turn_waits_for_the_holder_and_counts_its_wait(tmp_path):
    lock = str(tmp_path / "t.lock")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({lock!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(0.5)\n")],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    turn = gpu_turn.Turn(lock)
    with turn.holding():
        assert turn.held
        with turn.released():
            assert not turn.held
            time.sleep(0.05)
        assert turn.held
    assert not turn.held
    stats = turn.take_stats()
    assert stats["waited_s"] >= 0.3 and stats["compiled_beside_s"] >= 0.04
    (a0, a1), (b0, b1) = stats["held"]  # two holds, the release between them
    assert a0 <= a1 and b0 - a1 >= 0.04 and b0 <= b1
    assert turn.take_stats() == {"waited_s": 0.0, "compiled_beside_s": 0.0, "held": []}
    with turn.holding():
        time.sleep(0.02)
        first = turn.take_stats()["held"]  # a hold still on: up to now, and the rest in the next call's
        time.sleep(0.02)
    (c0, c1), = first
    (d0, d1), = turn.take_stats()["held"]
    assert c1 - c0 >= 0.015 and d0 == c1 and d1 - d0 >= 0.015
    holder.wait(10)


def test_no_lock_file_no_turn(monkeypatch):
    monkeypatch.delenv(gpu_turn.ENV, raising=False)
    assert gpu_turn.current() is None
    with gpu_turn.holding() as turn:
        assert turn is None


class _Handler:
    def __init__(self):
        self.end: list = []

    def register_end_callback(self, fn):
        self.end.append(fn)

    def remove_end_callback(self, fn):
        self.end.remove(fn)


def test_compiling_beside_lets_go_until_the_compile_ends(tmp_path):
    handler = _Handler()
    torch = NS(_dynamo=NS(callback=NS(callback_handler=handler)))
    turn = gpu_turn.Turn(str(tmp_path / "t.lock"))
    # a deferred turn (a load that traces first): taken at the compile's end
    with compiling_beside(torch, turn):
        assert not turn.held and len(handler.end) == 1  # tracing: the other process may use the GPU
        handler.end[0]("args of torch's callback")  # the compilation ended: the compiled code runs next
        assert turn.held
    assert turn.held and handler.end == []
    # held already (a shape the dynamic graph serves at once): kept throughout
    with compiling_beside(torch, turn):
        assert turn.held and handler.end == []
    assert turn.held
    with compiling_beside(torch, None):  # no turn: nothing registered
        assert handler.end == []
    turn.release()
    with compiling_beside(torch, turn):  # ... or after the block at the latest
        assert not turn.held
    assert turn.held
    turn.release()
    with compiling_beside(NS(), turn):  # a torch without the callback: taken before the block
        assert turn.held
    turn.release()


def test_a_deferred_turn_is_taken_on_demand_and_let_go_at_the_end(tmp_path, monkeypatch):
    monkeypatch.setenv(gpu_turn.ENV, str(tmp_path / "t.lock"))
    with gpu_turn.holding(defer=True) as turn:
        assert not turn.held
        gpu_turn.take()
        assert turn.held
    assert not turn.held
    with gpu_turn.holding() as turn:
        assert turn.held
    assert not turn.held


def test_torch_runs_the_compile_end_callback_before_the_compiled_code():
    """The contract compiling_beside relies on, in the installed torch: Dynamo's compile-end callbacks run
    after the backend compiled the frame and before its compiled code is called."""
    torch = pytest.importorskip("torch")
    handler = getattr(getattr(torch._dynamo, "callback", None), "callback_handler", None)
    if not hasattr(handler, "remove_end_callback"):
        pytest.skip("this torch has no compile-end callbacks: compilation keeps the GPU")
    order: list[str] = []

    def backend(gm, example_inputs):
        order.append("compiled")

        def run(*args):
            order.append("ran")
            return gm(*args)
        return run

    def end(*_):
        order.append("end")

    torch._dynamo.reset()  # (which also clears the callbacks)
    handler.register_end_callback(end)
    try:
        torch.compile(lambda x: x * 2 + 1, backend=backend)(torch.ones(3))
    finally:
        handler.remove_end_callback(end)
        torch._dynamo.reset()
    assert order[:3] == ["compiled", "end", "ran"]


def test_a_gpu_slot_becomes_two_slots_of_that_gpu_sharing_a_lock(tmp_path):
    gpu = Slot("cuda:0", {"index": 0, "name": "H", "uuid": "GPU-a"}, cores=(4, 5, 6, 7))
    lane = Slot("cpu", {}, cores=(0, 1, 2, 3), threads=4)
    small = Slot("cuda:1", {"index": 1, "name": "H", "uuid": "GPU-b"}, cores=(8,))
    one, two, cpu, kept = with_turns([gpu, lane, small], str(tmp_path),
                                     siblings=lambda c: (c, c + 1) if c % 2 == 0 else (c - 1, c))
    assert (one.cores, two.cores) == ((4, 5), (6, 7)) and (one.name, two.name) == ("cuda:0/1", "cuda:0/2")
    assert one.env()[gpu_turn.ENV] == two.env()[gpu_turn.ENV] == str(tmp_path / "gpu-cuda0.turn")
    assert one.env()["CUDA_VISIBLE_DEVICES"] == "GPU-a" and two.facts()["gpu_process"] == 2
    assert cpu is lane and kept is small and gpu_turn.ENV not in kept.env() and kept.name == "cuda:1"


def test_each_process_of_a_gpu_keeps_its_own_history_on_the_board():
    """Two workers of one GPU: each takes a precision of its own; then torch.compile of the precision it
    measured eagerly (cuDNN's choices are made in that process)."""
    cells = [NS(runner=r, precision=p) for r in ("pytorch", "pytorch-compile") for p in ("fp32", "tf32")]
    board = Board([(c, ("cuda:0",)) for c in cells], family=lambda c: "PyTorch")
    first, second = board.take("cuda:0", "cuda:0/1"), board.take("cuda:0", "cuda:0/2")
    assert (first.runner, first.precision, second.runner,
            second.precision) == ("pytorch", "fp32", "pytorch", "tf32")
    assert board.take("cuda:0", "cuda:0/2").precision == "tf32" and \
        board.take("cuda:0", "cuda:0/1").precision == "fp32"


def _wanted(cells, gpus=None, weights_bytes=0) -> tuple[bool, str]:
    """measure/lanes.py's decision for a run on ``gpus`` whose model has ``weights_bytes``: (turns, the
    report's note saying why not, where the plan compiles but the GPUs lack room)."""
    from infer_compare.measure.lanes import _turns_wanted

    weights = NS(numel=lambda: weights_bytes, element_size=lambda: 1)
    run = NS(environment=NS(gpus=gpus or []),
             prep=NS(model=NS(parameters=lambda: [weights], buffers=lambda: [])), notes=[])
    return _turns_wanted(run, cells), "".join(run.notes)


def test_turns_only_where_a_gpu_configuration_compiles_on_a_gpu_with_room(monkeypatch):
    cell = lambda runner, kind="cuda": NS(  # noqa: E731
        runner=runner, kind=kind, device=f"{kind}:0" if kind == "cuda" else kind)
    h100, orin = [{"memory_mib": 81559}], [{"memory_mib": 15656}]
    assert _wanted([cell("pytorch"), cell("pytorch-compile")], h100, 100 << 20) == (True, "")
    assert _wanted([cell("pytorch"), cell("onnxruntime")], h100) == (False, "")
    assert _wanted([cell("pytorch-compile", "cpu")], h100) == (False, "")
    small, why = _wanted([cell("pytorch-compile")], orin, 100 << 20)
    assert not small and "15656 MiB" in why  # a Jetson's shared memory: one process, and the report says why
    big, why = _wanted([cell("pytorch-compile")], h100, 2 << 30)  # weights over 1/50 of the GPU's memory
    assert not big and "2048 MiB" in why
    assert not _wanted([cell("pytorch-compile")], [], 0)[0]  # memory unknown: one process
    monkeypatch.setenv(gpu_turn.SWITCH, "0")
    assert _wanted([cell("pytorch-compile")], h100) == (False, "")


def test_one_gpu_gets_a_slot_of_its_own_where_its_processes_take_turns():
    run = NS(environment=NS(gpus=[{"index": 0, "cuda": 0, "name": "H", "uuid": "GPU-a"}]),
             settings=NS(threads=2), notes=[])
    sel = NS(cpu_rows="after", gpus="spread")
    cells = [NS(runner="pytorch-compile", kind="cuda", device="cuda:0")]
    assert lanes(run, cells, sel) == ([], None)
    slots, lane = lanes(run, cells, sel, turns=True)
    assert [s.device for s in slots] == ["cuda:0"] and lane is None


def test_a_comparison_that_compiles_on_a_stand_in_gpu_measures_it_with_two_processes(monkeypatch, cache_dir):
    """Through compare() with one stand-in GPU (no GPU here) and torch.compile in the plan: the GPU's
    configurations run in two measuring processes sharing its lock, each on its own cores, and the report says
    so; ONNX Runtime's CUDA rows (no CUDA provider here: skipped by their child) name the GPU and which of its
    processes ran them."""
    import infer_compare.catalog.device_kinds as dk
    from infer_compare import compare
    from infer_compare.backends.onnxruntime.run import OnnxRuntimeRunner

    monkeypatch.setattr(dk, "all_gpus",
                        lambda: [{"index": 0, "name": "H", "uuid": "GPU-aaaa-0000", "memory_mib": 81559}])
    probe = OnnxRuntimeRunner.probe.__func__
    monkeypatch.setattr(OnnxRuntimeRunner, "probe", classmethod(lambda c, device="cpu": probe(c, "cpu")))
    rep = compare("lenet5", backends=["onnxruntime", "pytorch-compile"], precisions=["fp32", "fp16"],
                  devices=["cuda:0"], batch_sizes=[1], threads=1, min_time_s=0.05, max_time_s=0.1,
                  warmup_time_s=0.0, cache_dir=cache_dir)
    ort = [r for r in rep.rows if r.backend == "onnxruntime"]
    assert len(ort) == 2 and {r.extra["gpu_process"] for r in ort} <= {1, 2}
    assert all(r.extra["gpu_uuid"] == "GPU-aaaa-0000" and r.extra["concurrent_with"] == "cuda:0" for r in ort)
    assert any("two such processes taking turns" in n and "cuda:0/2" in n for n in rep.notes)
    monkeypatch.setenv(gpu_turn.SWITCH, "0")
    rep = compare("lenet5", backends=["onnxruntime", "pytorch-compile"], precisions=["fp32"],
                  devices=["cuda:0"], batch_sizes=[1], threads=1, min_time_s=0.05, max_time_s=0.1,
                  warmup_time_s=0.0, cache_dir=cache_dir)
    assert not any("taking turns" in n for n in rep.notes)
    assert all("gpu_process" not in r.extra for r in rep.rows)


def test_turns_beside_the_cpu_lane_keep_it_as_large_as_without_them(monkeypatch):
    """32 CPUs: one GPU's two processes get 4 each (the lane keeps 24, 75 %); with two GPUs 4 each would leave
    the lane 16 (under auto's 75 %): each GPU's two processes share the 4 one process would have had (lane
    24)."""
    import infer_compare.measure.gpus as gpus_mod
    import infer_compare.measure.lanes as lanes_mod

    monkeypatch.setattr(lanes_mod, "usable_cpus", lambda: list(range(32)))
    monkeypatch.setattr(gpus_mod, "usable_cpus", lambda: list(range(32)))
    monkeypatch.setattr(gpus_mod, "siblings_of", lambda c: (c,))
    two = [{"index": i, "cuda": i, "name": "H", "uuid": f"GPU-{i}"} for i in (0, 1)]
    run = NS(environment=NS(gpus=two), settings=NS(threads=32), notes=[])
    sel = NS(cpu_rows="auto", gpus="spread", threads_asked=None)
    cpu = NS(runner="onnxruntime", kind="cpu", device="cpu")
    one_gpu = [NS(runner="pytorch-compile", kind="cuda", device="cuda:0"), cpu]
    slots, lane = lanes(run, one_gpu, sel, turns=True)
    assert [len(s.cores) for s in slots] == [8] and len(lane.cores) == 24
    both = [*one_gpu, NS(runner="pytorch-compile", kind="cuda", device="cuda:1")]
    slots, lane = lanes(run, both, sel, turns=True)
    assert [len(s.cores) for s in slots] == [4, 4] and len(lane.cores) == 24 and not run.notes
