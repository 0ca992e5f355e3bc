"""Several GPUs of one host, with a stand-in device list (CPU-only CI): which GPUs CUDA sees
(CUDA_VISIBLE_DEVICES by index or UUID), the CPU cores of each GPU's measuring process (whole
physical cores, disjoint), which GPU measures which configuration (--gpus spread/every/sequential),
the workers that measure at the same time (whichever GPU is free takes the next configuration; an
error anywhere stops all), a measuring child pinned to its cores, and the fleet's binding of a task
to the GPU Ray assigned (rows named by the physical GPU; a device the task cannot see: Unbound)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from infer_compare.base.errors import UsageError
from infer_compare.catalog.device_kinds import visible
from infer_compare.fleet.auth import enable, is_loopback
from infer_compare.fleet.bind import Unbound, bind, relabel
from infer_compare.measure.gpus import Slot, assign, core_slices, make_slots, parse_cores, spell_cores
from infer_compare.measure.parallel import run_on_slots
from infer_compare.measure.plan import Cell, make_selection

H100 = "NVIDIA H100 80GB HBM3"
GPUS = [{"index": 0, "name": H100, "uuid": "GPU-aaaa-0000"},
        {"index": 1, "name": H100, "uuid": "GPU-bbbb-1111"}]


def _siblings(c: int) -> tuple[int, ...]:  # 16 physical cores, two threads each: c and c+16
    return (c % 16, c % 16 + 16)


def test_cuda_visible_devices_by_index_or_uuid_filters_and_orders():
    assert [g["cuda"] for g in visible(GPUS, None)] == [0, 1]
    one = visible(GPUS, "1")
    assert [(g["index"], g["cuda"]) for g in one] == [(1, 0)]
    assert [(g["index"], g["cuda"]) for g in visible(GPUS, "GPU-bbbb,GPU-aaaa")] == [(1, 0), (0, 1)]
    assert visible(GPUS, "") == [] and visible(GPUS, "-1") == []
    assert [g["index"] for g in visible(GPUS, "0,7,1")] == [0]  # CUDA stops at the first bad entry


def test_core_slices_are_whole_physical_cores_and_disjoint():
    a, b = core_slices(list(range(32)), 2, _siblings)
    assert set(a).isdisjoint(b) and len(a) == len(b) == 16
    assert all(_siblings(c)[1] in a for c in a if c < 16)  # a core's two threads stay together
    assert spell_cores(a) == "0-7,16-23" and parse_cores("0-7,16-23") == set(a)
    assert core_slices([0, 1], 3, lambda c: (c,)) == [(), (0,), (1,)]  # fewer CPUs than slots: some unpinned


def test_slots_carry_the_physical_gpu_and_bind_by_uuid():
    gpus = visible(GPUS, None)
    s0, s1 = make_slots(gpus, ["cuda:0", "cuda:1"], list(range(32)), _siblings)
    assert s1.env() == {"CUDA_VISIBLE_DEVICES": "GPU-bbbb-1111"} and s1.pool == s0.pool == H100
    assert s1.facts() == {"gpu_index": 1, "gpu_name": H100, "gpu_uuid": "GPU-bbbb-1111",
                          "cores": "8-15,24-31"}
    assert "GPU 1" in s1.describe() and "GPU-bbbb-1111" in s1.describe()


def _cells() -> list[Cell]:
    out = []
    for p in ("fp32", "fp16"):
        out += [Cell("onnx", "onnxruntime", p, "cuda", f"cuda:{i}") for i in (0, 1)]
    return out + [Cell("onnx", "onnxruntime", "fp32", "cpu", "cpu")]


def test_spread_measures_each_configuration_once_per_gpu_model():
    slots = make_slots(visible(GPUS, None), ["cuda:0", "cuda:1"], list(range(4)), lambda c: (c,))
    work, rest = assign(_cells(), slots, "spread")
    assert [(c.precision, allowed) for c, allowed in work] == [("fp32", ("cuda:0", "cuda:1")),
                                                                ("fp16", ("cuda:0", "cuda:1"))]
    assert [c.device for c in rest] == ["cpu"]
    every, _ = assign(_cells(), slots, "every")
    assert [(c.device, allowed) for c, allowed in every] == [("cuda:0", ("cuda:0",)),
                                                             ("cuda:1", ("cuda:1",))] * 2
    seq, rest = assign(_cells(), slots, "sequential")
    assert seq == [] and len(rest) == 5
    mixed = make_slots([GPUS[0], {**GPUS[1], "name": "NVIDIA L4"}], ["cuda:0", "cuda:1"], [0, 1],
                       lambda c: (c,))
    work, _ = assign(_cells(), mixed, "spread")  # two models: each is measured
    assert [allowed for _, allowed in work] == [("cuda:0",), ("cuda:1",)] * 2
    with pytest.raises(UsageError, match="--gpus must be one of"):
        make_selection(gpus="both")
    assert make_selection().gpus == "spread"


def test_workers_measure_at_the_same_time_whichever_gpu_is_free():
    slots = [Slot("cuda:0"), Slot("cuda:1")]
    work = [(f"c{i}", ("cuda:0", "cuda:1")) for i in range(4)] + [("only1", ("cuda:1",))]
    seen: list[tuple[str, str, float, float]] = []
    lock = threading.Lock()

    def measure_one(cell, slot):
        t0 = time.perf_counter()
        time.sleep(0.3 if cell == "c0" else 0.05)
        with lock:
            seen.append((cell, slot.device, t0, time.perf_counter()))

    run_on_slots(work, slots, measure_one, threading.Event())
    by = {c: d for c, d, _, _ in seen}
    assert sorted(by) == ["c0", "c1", "c2", "c3", "only1"] and by["only1"] == "cuda:1"
    other = "cuda:1" if by["c0"] == "cuda:0" else "cuda:0"
    # the GPU measuring c0 was busy: the free one took the rest
    assert by["c1"] == by["c2"] == by["c3"] == other
    c0 = next(s for s in seen if s[0] == "c0")
    assert any(s[2] < c0[3] and s[0] != "c0" for s in seen)  # overlapped


def test_an_error_in_one_worker_stops_the_others_and_is_raised():
    cancel = threading.Event()
    done = []

    def measure_one(cell, slot):
        if cell == "bad":
            raise KeyboardInterrupt("cancelled")
        cancel.wait(2)
        done.append(cell)

    with pytest.raises(KeyboardInterrupt):
        run_on_slots([("slow", ("cuda:0",)), ("bad", ("cuda:1",)), ("later", ("cuda:0",))],
                     [Slot("cuda:0"), Slot("cuda:1")], measure_one, cancel)
    assert cancel.is_set() and "later" not in done


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no sched_setaffinity on this platform")
def test_a_measuring_child_pins_itself_to_its_cores():
    cpu = sorted(os.sched_getaffinity(0))[0]
    code = "import os; from infer_compare.measure.isolate import pin_from_env; pin_from_env(); " \
           "print(sorted(os.sched_getaffinity(0)))"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "INFER_COMPARE_CORES": str(cpu)},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"[{cpu}]"


def test_fleet_task_binds_to_the_gpu_ray_assigned_and_names_the_physical_gpu():
    seen = visible(GPUS, "1")  # Ray gave this task GPU 1: the task sees it as cuda:0
    kw, bound = bind({"devices": ["cuda:0"], "batch_sizes": [1]}, seen, ["1"], "srv", "1")
    assert kw["devices"] == ["cuda:0"] and bound["cuda:0"]["index"] == 1
    rep = {"rows": [{"device": "cuda:0", "status": "ok", "extra": {}}, {"device": "cpu", "status": "ok"}],
           "not_run": ["pytorch/pytorch/fp32/cuda:0/b8"]}
    out = relabel(rep, bound, "srv")
    assert out["rows"][0]["device"] == "cuda:1" and out["rows"][0]["extra"]["gpu_uuid"] == "GPU-bbbb-1111"
    assert out["rows"][1]["device"] == "cpu" and out["not_run"] == ["pytorch/pytorch/fp32/cuda:1/b8"]


def test_fleet_job_whose_gpu_the_task_cannot_see_is_unbound():
    with pytest.raises(Unbound, match=r"node srv: cuda:1 not visible to the task \(Ray "
                                      r"assigned GPU\(s\) \[\]"):
        bind({"devices": ["cuda:1"]}, [], [], "srv", "")
    rows = {"rows": [{"device": "cuda:0", "status": "skipped", "skip_kind": "no_device",
                      "reason": "cuda:0 does not exist (PyTorch sees 0 CUDA device(s))"}]}
    with pytest.raises(Unbound, match="node srv: cuda:1"):
        relabel(rows, {"cuda:0": GPUS[1] | {"cuda": 0}}, "srv")


def test_auth_off_is_refused_unless_every_address_is_loopback(monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert enable(addresses=("127.0.0.1", "127.0.0.1:6379")) == ""
    assert enable(addresses=("localhost:6379",)) == "" and is_loopback("::1")
    for addrs in (("10.0.0.1",), ("127.0.0.1", "10.0.0.1:6379"), ("192.168.1.5:6379",), ()):
        with pytest.raises(UsageError, match="RAY_AUTH_MODE=disabled is refused"):
            enable(addresses=addrs)


def test_fleet_task_holding_both_gpus_measures_both_named_physically():
    seen = visible(GPUS, "1,0")  # Ray's order
    kw, bound = bind({"devices": ["cuda:0", "cuda:1"]}, seen, ["1", "0"], "srv", "1,0")
    assert kw["devices"] == ["cuda:0", "cuda:1"] and [bound[d]["index"] for d in kw["devices"]] == [1, 0]
    out = relabel({"rows": [{"device": "cuda:0", "extra": {}}, {"device": "cuda:1", "extra": {}}]},
                  bound, "srv")
    assert [r["device"] for r in out["rows"]] == ["cuda:1", "cuda:0"]


def test_a_comparison_on_two_stand_in_gpus_runs_them_at_once_and_names_each(monkeypatch, cache_dir):
    """End to end through compare() with two stand-in GPUs (no GPU here): ONNX Runtime's CUDA rows run in
    measuring children bound to each GPU (its UUID) and pinned to its cores, at the same time; without a CUDA
    provider each child says so in a skipped row, which still names the GPU, and the report says what ran
    concurrently."""
    import infer_compare.catalog.device_kinds as dk
    from infer_compare import compare
    from infer_compare.backends.onnxruntime.run import OnnxRuntimeRunner

    monkeypatch.setattr(dk, "all_gpus", lambda: [dict(g) for g in GPUS])
    probe = OnnxRuntimeRunner.probe.__func__
    monkeypatch.setattr(OnnxRuntimeRunner, "probe", classmethod(lambda c, device="cpu": probe(c, "cpu")))
    rep = compare("lenet5", backends=["onnxruntime"], precisions=["fp32", "fp16"],
                  devices=["cuda:0", "cuda:1"], batch_sizes=[1], threads=1, min_time_s=0.05, max_time_s=0.1,
                  warmup_time_s=0.0, cache_dir=cache_dir)
    rows = [r for r in rep.rows if r.device.startswith("cuda")]
    # each configuration once (identical GPUs), plan order
    assert [r.precision for r in rows] == ["fp32", "fp16"]
    for r in rows:
        assert r.extra["gpu_uuid"] == {"cuda:0": "GPU-aaaa-0000", "cuda:1": "GPU-bbbb-1111"}[r.device]
        assert r.extra["concurrent_with"] == "cuda:0, cuda:1" and r.extra.get("cores") != ""
    assert any("ran concurrently (--gpus spread" in n and "GPU-bbbb-1111" in n for n in rep.notes)


def test_merge_label_as_a_comma_list_labels_each_file(tmp_path):
    """docs/fleet.md's `merge fleet/results.json devboard/results.json --label fleet,devboard` form."""
    import json
    from pathlib import Path

    from infer_compare.cli import main

    src = str(Path(__file__).parent.parent / "reports" / "cpu-lenet5" / "results.json")
    assert main(["merge", src, src, "--label", "fleet,devboard", "-o", str(tmp_path / "m")]) == 0
    assert list(json.loads((tmp_path / "m" / "results.json").read_text())["machines"]) == ["fleet",
                                                                                           "devboard"]
    assert main(["merge", src, src, "--label", "fleet,", "-o", str(tmp_path / "n")]) == 2


def test_two_nodes_on_one_host_are_warned_about():
    from infer_compare.fleet.run import shared_hosts

    w = shared_hosts({"a": {"host": "lab1"}, "b": {"host": "lab1"}, "c": {"host": "lab2"}})
    assert len(w) == 1 and w[0].startswith("nodes a, b ran on one host (lab1)")
    assert shared_hosts({"a": {"host": "lab1"}, "c": {"host": "lab2"}}) == []
