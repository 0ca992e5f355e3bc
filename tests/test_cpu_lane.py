"""--cpu-rows beside (measure/gpus.py make_lanes, measure/lanes.py): the CPU configurations run at the
same time as the GPU ones, still one at a time, on cores of their own with as many threads as those
cores; each GPU's measuring process keeps its own few cores; one GPU is enough. Stand-in GPUs (CI has
none)."""

from __future__ import annotations

import pytest

from infer_compare.base.errors import UsageError
from infer_compare.measure.gpus import concurrency_note, make_lanes, parse_cores
from infer_compare.measure.plan import make_selection

H100 = "NVIDIA H100 80GB HBM3"
GPUS = [{"index": 0, "name": H100, "uuid": "GPU-aaaa-0000"},
        {"index": 1, "name": H100, "uuid": "GPU-bbbb-1111"}]


def _siblings(c: int) -> tuple[int, ...]:  # 16 physical cores, two threads each: c and c+16
    return (c % 16, c % 16 + 16)


def test_each_gpu_keeps_its_own_cores_and_the_cpu_lane_has_the_rest():
    gpu_slots, lane = make_lanes(GPUS, ["cuda:0", "cuda:1"], threads=16, cpus=list(range(32)),
                                 siblings=_siblings)
    cores = [set(s.cores) for s in gpu_slots] + [set(lane.cores)]
    assert [len(c) for c in cores] == [4, 4, 24]  # two whole physical cores (4 CPUs) per GPU
    assert set().union(*cores) == set(range(32)) and sum(len(c) for c in cores) == 32  # disjoint, all used
    assert lane.threads == 12 and lane.device == "cpu" and not lane.is_gpu and lane.env() == {}
    assert gpu_slots[1].env() == {"CUDA_VISIBLE_DEVICES": "GPU-bbbb-1111"}
    note = concurrency_note("spread", [*gpu_slots, lane])
    assert "--cpu-rows beside" in note and "with 12 threads" in note


def test_one_gpu_is_enough_and_a_small_host_gets_no_lane():
    gpu_slots, lane = make_lanes(GPUS[:1], ["cuda:0"], threads=8, cpus=list(range(8)),
                                 siblings=lambda c: (c,))
    assert [len(s.cores) for s in gpu_slots] == [4] and lane.threads == 4
    assert make_lanes(GPUS[:1], ["cuda:0"], threads=8, cpus=list(range(6)), siblings=lambda c: (c,)) is None


def test_the_lane_threads_never_exceed_what_was_asked():
    _, lane = make_lanes(GPUS[:1], ["cuda:0"], threads=2, cpus=list(range(16)), siblings=lambda c: (c,))
    assert lane.threads == 2 and len(lane.cores) == 12


def test_cpu_rows_is_checked():
    assert make_selection(cpu_rows="beside").cpu_rows == "beside" and make_selection().cpu_rows == "auto"
    assert make_selection(cpu_rows="after").cpu_rows == "after"
    with pytest.raises(UsageError, match="--cpu-rows"):
        make_selection(cpu_rows="sideways")


def test_a_comparison_on_one_stand_in_gpu_measures_the_cpu_rows_beside(monkeypatch, cache_dir):
    """Through compare() with one stand-in GPU: ONNX Runtime's CPU rows run in the CPU lane, pinned to its
    cores with its threads, at the same time as its (skipped, no CUDA provider here) GPU rows."""
    import os

    import infer_compare.catalog.device_kinds as dk
    import infer_compare.measure.gpus as gpus_mod
    from infer_compare import compare
    from infer_compare.backends.onnxruntime.run import OnnxRuntimeRunner

    if len(os.sched_getaffinity(0)) < 1:
        pytest.skip("no CPU affinity here")
    monkeypatch.setattr(dk, "all_gpus", lambda: [dict(g) for g in GPUS[:1]])
    monkeypatch.setattr(gpus_mod, "GPU_LANE_CPUS", 1)
    monkeypatch.setattr(gpus_mod, "MIN_CPU_LANE", 1)
    probe = OnnxRuntimeRunner.probe.__func__
    monkeypatch.setattr(OnnxRuntimeRunner, "probe", classmethod(lambda c, device="cpu": probe(c, "cpu")))
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: no room for a lane beside the GPU")
    rep = compare("lenet5", backends=["onnxruntime"], precisions=["fp32"], devices=["cpu", "cuda:0"],
                  batch_sizes=[1], threads=1, min_time_s=0.05, max_time_s=0.1, warmup_time_s=0.0,
                  cache_dir=cache_dir, cpu_rows="beside")
    [cpu] = [r for r in rep.rows if r.device == "cpu"]
    assert cpu.status == "ok" and cpu.threads == 1
    assert parse_cores(cpu.extra["cores"]) and cpu.extra["concurrent_with"] == "cuda:0, cpu"
    assert any("--cpu-rows beside" in n for n in rep.notes)


def test_a_pinned_child_sizes_an_already_imported_torch_to_its_cores():
    """A fork server imported PyTorch before the child was pinned: its pool is sized to the pinned cores."""
    import os
    import subprocess
    import sys

    pytest.importorskip("torch")
    cpu = sorted(os.sched_getaffinity(0))[0]
    code = ("import os, torch; torch_threads = torch.get_num_threads; "
            "from infer_compare.measure.isolate import pin_from_env; pin_from_env(); "
            "print(torch_threads(), os.environ['OMP_NUM_THREADS'])")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "INFER_COMPARE_CORES": str(cpu)},
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1", "1"]


def test_auto_measures_the_cpu_rows_beside_only_where_they_keep_most_of_the_host():
    from infer_compare.measure.gpus import Slot, cpu_rows_beside

    big = Slot("cpu", {}, tuple(range(28)), threads=28)  # the 32-CPU host with one GPU: 28 of 32 CPUs
    assert cpu_rows_beside("auto", big, 32, None) == (True, "")
    assert cpu_rows_beside("beside", big, 32, None) == (True, "")
    assert cpu_rows_beside("after", big, 32, None) == (False, "")
    small = Slot("cpu", {}, tuple(range(4)), threads=4)  # an 8-CPU host: beside would halve the CPU rows
    beside, why = cpu_rows_beside("auto", small, 8, None)
    assert not beside and "4 of 8 CPUs" in why and "after the GPU ones" in why
    assert cpu_rows_beside("beside", small, 8, None) == (True, "")  # asked for: beside even so
    beside, why = cpu_rows_beside("auto", big, 32, 32)  # --threads 32: more than the lane's 28 cores
    assert not beside and "--threads 32" in why
    assert cpu_rows_beside("auto", big, 32, 28) == (True, "")
    beside, why = cpu_rows_beside("auto", None, 6, None)  # too few cores for any lane
    assert not beside and "too few CPU cores" in why


def test_auto_judges_the_threads_the_user_asked_for_not_those_filled_in_from_the_host():
    sel = make_selection()
    sel.threads = 32  # what the comparison fills in from the host (api.py) when --threads is not given
    assert sel.threads_asked is None and make_selection(threads=32).threads_asked == 32
