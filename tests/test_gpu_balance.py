"""Spreading a GPU pool's configurations by the GPU seconds each took in an earlier run (measure/balance.py,
the Board's plan in measure/parallel.py): the split, a group (one runtime and precision) kept on one GPU, a
GPU that runs dry taking over an untouched group only where the pool ends sooner, the store in the cache, and,
on the configurations' held seconds of a real two-GPU run of ResNet-50 (2 x H200), the pool's end against plan
order. Stand-in cells and devices (CPU-only CI)."""

from __future__ import annotations

import json
from pathlib import Path

from infer_compare.base.cache import Cache
from infer_compare.measure import balance
from infer_compare.measure.gpus import Slot
from infer_compare.measure.lanes import runtime_of
from infer_compare.measure.parallel import WAIT, Board
from infer_compare.measure.plan import Cell

BOTH = ("cuda:0", "cuda:1")
REPORTS = Path(__file__).parent / "data" / "reports"  # two real two-GPU runs' results.json


def _family(c: Cell) -> tuple[str, str]:
    return (c.kind, runtime_of(c.runner))


def _cells() -> list[Cell]:
    """The GPU configurations of `infer-compare --model resnet50` with ONNX Runtime CUDA, in plan order."""
    out = [Cell("pytorch", r, p, "cuda", "cuda:0") for r in ("pytorch", "pytorch-compile")
           for p in ("fp32", "tf32", "fp16", "bf16")]
    return out + [Cell("onnx", "onnxruntime", p, "cuda", "cuda:0") for p in ("fp32", "tf32", "fp16")]


def _held(path: Path) -> dict[str, float]:
    """Configuration label -> the seconds its process held the GPU, from a committed report."""
    rows = json.loads(path.read_text())["rows"]
    out: dict[str, float] = {}
    for r in rows:
        spans = ((r.get("extra") or {}).get("gpu_turn") or {}).get("held") or []
        k = f"{r['backend']} {r['format']} {r['precision']}"
        out[k] = out.get(k, 0.0) + sum(b - a for a, b in spans)
    return {k: v for k, v in out.items() if v > 0}


def test_partition_finds_the_best_split_for_two_and_spreads_longest_first_for_more():
    costs = {"a": 15.7, "b": 8.3, "c": 7.7, "d": 7.5, "e": 3.4, "f": 2.3, "g": 3.4}
    got = balance.partition({g: (c, c) for g, c in costs.items()}, ["x", "y"])
    loads = sorted(round(sum(c for g, c in costs.items() if got[g] == d), 6) for d in "xy")
    assert loads == [24.0, 24.3]  # the best of the 64 splits (total 48.3)
    three = balance.partition(
        {g: (c, c) for g, c in {"a": 5.0, "b": 4.0, "c": 3.0, "d": 3.0, "e": 2.0}.items()}, ["x", "y", "z"])
    assert three == {"a": "x", "b": "y", "c": "z", "d": "z", "e": "y"}
    assert (balance.partition({"a": (1.0, 1.0)}, ["x"]) == {"a": "x"}
            and balance.partition({}, ["x", "y"]) == {})


def test_a_gpu_is_not_given_more_tracing_than_its_two_processes_can_hide():
    """Round 9's first plans (2 x H200) balanced the GPU seconds alone and gave one GPU three torch.compile
    groups (each about 7 GPU seconds and 15 s of its own with the tracing): that GPU stood idle 7.4-8.9 s.
    Counting each process's own seconds, the plan keeps them apart."""
    # (GPU s, own s), as measured there
    costs = {"fp32": (15.4, 23.1), "tf32": (7.5, 16.6), "fp16": (7.4, 17.8), "bf16": (6.8, 14.7),
             "ort16": (4.3, 5.2), "ort32": (4.4, 5.4), "ort_tf32": (2.2, 3.0)}
    only_gpu = balance.partition({g: (c[0], c[0]) for g, c in costs.items()}, ["x", "y"], {"x": 2, "y": 2})
    both = balance.partition(costs, ["x", "y"], {"x": 2, "y": 2})
    compiled = ("tf32", "fp16", "bf16")
    assert sorted(sum(only_gpu[g] == d for g in compiled) for d in "xy") == [0, 3]  # what ran on the H200s
    assert sorted(sum(both[g] == d for g in compiled) for d in "xy") == [1, 2]
    spans = [balance.load_of(2, tuple(sum(costs[g][i] for g in costs if both[g] == d) for i in (0, 1)))
             for d in "xy"]
    other = [balance.load_of(2, tuple(sum(costs[g][i] for g in costs if only_gpu[g] == d) for i in (0, 1)))
             for d in "xy"]
    # 24.4 against 26.05 s (the three groups' own 52.1 s over 2 processes)
    assert max(spans) < max(other) - 1.0


def test_the_plan_keeps_a_runtime_and_precision_on_one_gpu_and_balances_the_rest():
    secs = {"pytorch fp32": 12.8, "pytorch-compile fp32": 2.9,
            "pytorch tf32": 2.0, "pytorch-compile tf32": 6.3,
            "pytorch fp16": 6.1, "pytorch-compile fp16": 1.6,
            "pytorch bf16": 2.2, "pytorch-compile bf16": 5.3,
            "onnxruntime fp32": 3.4, "onnxruntime tf32": 2.3, "onnxruntime fp16": 3.4}
    now = [0.0]
    b = Board([(c, BOTH) for c in _cells()], _family,
              seconds=lambda c, a: (secs[f"{c.runner} {c.precision}"],) * 2, clock=lambda: now[0])
    where = {(g[1][1], g[2]): d for g, d in b.plan.items()}
    assert where[("pytorch", "fp32")] == where[("pytorch", "tf32")] != where[("pytorch", "fp16")]
    assert sorted(round(s, 1) for s in b.expected.values()) == [24.0, 24.3]
    taken: dict[str, list[Cell]] = {d: [] for d in BOTH}
    take = b.take
    b.take = lambda d, who=None: _log(taken, d, take(d, who))  # type: ignore[method-assign]
    end = _simulate(b, {c: secs[f"{c.runner} {c.precision}"] for c in _cells()}, now)
    # each GPU measured exactly its plan, eager before torch.compile of a precision, and ended on time
    for d in BOTH:
        assert {(_family(c)[1], c.precision) for c in taken[d]} == {k for k, v in where.items() if v == d}
        assert round(end[d], 1) == round(b.expected[d], 1)
        names = [f"{c.runner} {c.precision}" for c in taken[d]]
        assert all(names.index(f"pytorch {p}") < names.index(f"pytorch-compile {p}")
                   for p in ("fp32", "tf32", "fp16", "bf16") if f"pytorch {p}" in names)
    assert b.moved == [] and "ended 0.3 s apart" in b.note()


def _log(taken: dict[str, list[Cell]], device: str, cell: object) -> object:
    if isinstance(cell, Cell):
        taken[device].append(cell)
    return cell


def test_without_a_figure_for_every_configuration_there_is_no_plan_and_the_note_says_why():
    b = Board([(c, BOTH) for c in _cells()], _family,
              seconds=lambda c, a: None if c.precision == "bf16" else (1.0, 1.0))
    assert b.plan == {} and "has no GPU seconds from an earlier run" in b.note()
    assert b.take("cuda:0").precision == "fp32"  # plan order, as without seconds
    assert Board([(c, BOTH) for c in _cells()], _family).note() == ""


def _onnx_board(now: list[float], alone: dict[str, float] | None = None) -> Board:
    """ONNX Runtime fp32 (10 s) planned on cuda:0; tf32, fp16 (4 s each) and bf16 (2 s) on cuda:1; ``alone``:
    the seconds of those that take longer with a GPU to themselves (tracing that overlapped the other
    process's work)."""
    cells = [Cell("onnx", "onnxruntime", p, "cuda", "cuda:0") for p in ("fp32", "tf32", "fp16", "bf16")]
    secs = {"fp32": 10.0, "tf32": 4.0, "fp16": 4.0, "bf16": 2.0}
    own = {**secs, **(alone or {})}
    t0, now[0] = now[0], 0.0
    b = Board([(c, BOTH) for c in cells], _family, seconds=lambda c, a: (secs[c.precision], own[c.precision]),
              clock=lambda: now[0], parts={d: 2 for d in BOTH})
    assert b.take("cuda:0").precision == "fp32" and b.take("cuda:1").precision == "tf32"
    now[0] = t0
    return b


def test_a_gpu_that_runs_dry_takes_over_an_untouched_group_where_the_pool_ends_sooner():
    now = [6.0]  # cuda:0's fp32 took 6 s; cuda:1's tf32 still runs (4 s expected): 6 s left there, none here
    b = _onnx_board(now)
    assert b.take("cuda:0").precision == "fp16"  # cuda:0 ends at 10 with it, cuda:1 at 8 without it (12 with)
    assert [m[:3] for m in b.moved] == [("onnxruntime fp16", "cuda:1", "cuda:0")]
    assert "cuda:0 took onnxruntime fp16 over" in b.note()
    now[0] = 7.0
    assert b.take("cuda:1").precision == "bf16"
    now[0] = 10.0
    assert b.take("cuda:0") is None and b.take("cuda:1") is None
    assert "ended 0.0 s apart" in b.note()


def test_work_that_takes_longer_with_a_gpu_to_itself_is_not_taken_over_where_it_would_end_later():
    now = [6.0]  # as above, but fp16 and bf16 trace 5 s beside their GPU work: alone they take 9 and 7 s
    b = _onnx_board(now, alone={"fp16": 9.0, "bf16": 7.0})
    assert b.take("cuda:0") is WAIT and b.moved == []  # 0 + 9 or 0 + 7 here against 6 s left there


def test_a_gpu_waits_rather_than_take_work_that_would_end_the_pool_later():
    now = [4.0]
    b = _onnx_board(now)
    assert b.take("cuda:1").precision == "fp16"  # tf32 done at 4
    # cuda:0 done; cuda:1's fp16 ran over: bf16 (2 s) left there, and 2 s here would end no sooner
    now[0] = 9.5
    assert b.take("cuda:0") is WAIT and b.moved == []
    now[0] = 10.0
    assert b.take("cuda:1").precision == "bf16" and b.take("cuda:0") is None


def _simulate(board: Board, seconds: dict[Cell, float], now: list[float]) -> dict[str, float]:
    """When each device's last configuration ends, ``board`` followed by one worker a GPU and each
    configuration taking ``seconds``; a worker told to wait asks again when another GPU's configuration
    ends."""
    free = {d: 0.0 for d in BOTH}
    end = dict(free)
    live = set(BOTH)
    while live:
        d = min(live, key=lambda x: (free[x], x))
        now[0] = free[d]
        cell = board.take(d)
        if cell is None:
            live.discard(d)
        elif cell is WAIT:
            later = [free[x] for x in live if free[x] > now[0]]
            free[d] = min(later) if later else now[0] + 0.1
        else:
            free[d] = end[d] = now[0] + seconds[cell]
    return end


def test_on_a_real_two_gpu_runs_figures_the_plan_ends_the_pool_sooner_than_plan_order():
    """The held seconds of each configuration in tests/data/reports/gpu-h200x2-two-gpus-warm-4 (whose GPUs'
    last holds ended 4.0 s apart) plan the same work by the figures of run 5: the pool's end comes closer to
    half the work."""
    est = _held(REPORTS / "gpu-h200x2-two-gpus-warm-5" / "results.json")
    real = _held(REPORTS / "gpu-h200x2-two-gpus-warm-4" / "results.json")
    cells = [c for c in _cells() if balance.label(c) in real]
    assert len(cells) == 11
    secs = {c: real[balance.label(c)] for c in cells}
    now = [0.0]
    planned = _simulate(Board([(c, BOTH) for c in cells], _family,
                              seconds=lambda c, a: (est[balance.label(c)],) * 2, clock=lambda: now[0]),
                        secs, now)
    order = _simulate(Board([(c, BOTH) for c in cells], _family, clock=lambda: now[0]), secs, now)
    half = sum(secs.values()) / 2
    assert max(planned.values()) < max(order.values())
    assert max(planned.values()) - half < 1.5


def test_the_store_keeps_the_last_runs_per_gpu_model(tmp_path):
    cache = Cache(tmp_path)
    key = balance.store_key({"name": "m", "notes": ["built"]},
                            {"batch_sizes": {"cuda": [1]}, "devices": ["cuda:0"]})
    assert key == balance.store_key({"name": "m", "notes": ["cached"]},
                                    {"batch_sizes": {"cuda": [1], "cpu": [8]},
                                     "devices": ["cuda:0", "cuda:1"]})
    assert key != balance.store_key({"name": "m"}, {"batch_sizes": {"cuda": [1, 8]}})
    assert key != balance.store_key({"name": "m", "weights_hash": "b"}, {"batch_sizes": {"cuda": [1]}})
    for s in (1.0, 9.0, 2.0, 3.0):
        balance.save(cache, key, {"H100": {"pytorch pytorch fp32": (s, 10 * s)}})
    assert balance.load(cache, key) == {"H100": [{"pytorch pytorch fp32": (s, 10 * s)}
                                                 for s in (9.0, 2.0, 3.0)]}
    assert balance.load(Cache(tmp_path, enabled=False), key) == {} and balance.load(None, key) == {}
    (tmp_path / balance.DIR / f"{key}.json").write_text("not json")
    assert balance.load(cache, key) == {}


def test_a_groups_estimate_is_the_median_of_its_sums_shared_as_its_configurations_medians():
    """fp16's cuDNN autotuning (4 s) lands on eager or torch.compile, whichever ran first: the group's sum
    holds."""
    eager, comp = (Cell("pytorch", "pytorch", "fp16", "cuda", "cuda:0"),
                   Cell("pytorch", "pytorch-compile", "fp16", "cuda", "cuda:0"))
    ort = Cell("onnx", "onnxruntime", "fp16", "cuda", "cuda:0")
    runs = [{"pytorch pytorch fp16": (5.0, 5.0), "pytorch-compile pytorch fp16": (1.0, 6.0),
             "onnxruntime onnx fp16": (3.0, 4.0)},
            {"pytorch pytorch fp16": (1.0, 1.0), "pytorch-compile pytorch fp16": (5.2, 9.0)},
            {"pytorch pytorch fp16": (1.2, 1.2), "pytorch-compile pytorch fp16": (5.0, 8.0)}]
    est = balance.estimates([eager, comp, ort], runs, _family)
    # sums 6.0, 6.2, 6.2 (the medians per configuration: 3.2)
    assert round(est[eager][0] + est[comp][0], 6) == 6.2
    assert round(est[eager][0] / est[comp][0], 6) == round(1.2 / 5.0, 6)
    # ort: the one run that has it
    assert round(est[eager][1] + est[comp][1], 6) == 10.0 and est[ort] == (3.0, 4.0)
    assert balance.estimates([eager], [], _family) == {}


def test_a_configurations_gpu_seconds_are_its_held_seconds_where_its_process_took_turns():
    class Row:
        def __init__(self, precision, held, waited, status="ok"):
            self.backend, self.format, self.precision, self.status = "pytorch", "pytorch", precision, status
            self.extra = {"gpu_name": "H", "gpu_turn": {"held": held, "waited_s": waited}}

    turns, alone, cpu = (Slot("cuda:0", {"name": "H"}, turn="/tmp/l"), Slot("cuda:1", {"name": "H"}),
                         Slot("cpu"))
    c32, c16 = (Cell("pytorch", "pytorch", "fp32", "cuda", "cuda:0"),
                Cell("pytorch", "pytorch", "fp16", "cuda", "cuda:0"))
    rows = [Row("fp32", [[0.0, 1.5], [2.0, 2.5]], 1.0), Row("fp32", [[3.0, 4.0]], 0.5)]
    got = balance.measured(rows, [(c32, turns, 9.0), (c16, alone, 4.0), (c32, cpu, 7.0)])
    # fp32: held 3 s of its 9 s, waited 1.5 s for the other process's turns: 7.5 s its own (its tracing
    # included)
    assert got == {"H": {"pytorch pytorch fp32": (3.0, 7.5), "pytorch pytorch fp16": (4.0, 4.0)}}
    rows.append(Row("fp16", [], 0.0, status="run_failed"))  # a configuration that failed: no figure
    assert (balance.measured(rows, [(c32, turns, 9.0), (c16, alone, 4.0)])
            == {"H": {"pytorch pytorch fp32": (3.0, 7.5)}})


def test_a_second_comparison_on_two_stand_in_gpus_is_planned_by_the_first(monkeypatch, cache_dir):
    """Through compare() with two stand-in GPUs (no GPU here; ONNX Runtime's CUDA rows are skipped by their
    children, which still take their time), the plan switched on: the first run says it had no figures and
    keeps them in the cache; the second plans by them and says how; switched off (the default), plan order."""
    import infer_compare.catalog.device_kinds as dk
    from infer_compare import compare
    from infer_compare.backends.onnxruntime.run import OnnxRuntimeRunner

    gpus = [{"index": i, "name": "H", "uuid": f"GPU-{i}"} for i in (0, 1)]
    monkeypatch.setattr(dk, "all_gpus", lambda: [dict(g) for g in gpus])
    monkeypatch.setenv(balance.SWITCH, "1")
    probe = OnnxRuntimeRunner.probe.__func__
    monkeypatch.setattr(OnnxRuntimeRunner, "probe", classmethod(lambda c, device="cpu": probe(c, "cpu")))

    def run():
        return compare("lenet5", backends=["onnxruntime"], precisions=["fp32", "fp16"],
                       devices=["cuda:0", "cuda:1"], batch_sizes=[1], threads=1, min_time_s=0.05,
                       max_time_s=0.1, warmup_time_s=0.0, cache_dir=cache_dir)

    first = run()
    assert any("spread in plan order, not by their GPU seconds: onnxruntime fp32 has no" in n
               for n in first.notes)
    kept = list((Path(cache_dir) / balance.DIR).glob("*.json"))
    assert len(kept) == 1 and set(json.loads(kept[0].read_text())["H"][0]) == {"onnxruntime onnx fp32",
                                                                               "onnxruntime onnx fp16"}
    second = run()
    assert any("by the GPU seconds each took in earlier runs" in n and "planned cuda:0" in n
               for n in second.notes)
    monkeypatch.setenv(balance.SWITCH, "0")  # the default: plan order, the figures still kept
    third = run()
    assert (not any("GPU seconds" in n for n in third.notes)
            and len(balance.load(Cache(cache_dir), kept[0].stem)["H"]) == 3)
    assert {r.device for r in second.rows if r.device.startswith("cuda")} == {"cuda:0", "cuda:1"}
