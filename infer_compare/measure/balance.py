"""Spreading a pool of identical GPUs' configurations so that the GPUs end together (issue 37).

Without knowing how long each configuration keeps its GPU, the board (measure/parallel.py) hands them out in
plan order, and the pool waits at the end for whichever GPU drew the longer work: on 2 x H200, ResNet-50's two
GPUs ended 0.4 to 4 s apart (reports/gpu-h200x2p-r8-*). So each configuration's GPU seconds are kept in the
cache after a run, and the next run of the same model and settings plans by them:

* **Measured**: two figures per configuration. Its GPU seconds, what it keeps its GPU from others: the seconds
  its process held the GPU (the turns of host/gpu_turn.py, each row's ``extra.gpu_turn.held``), or, where a
  GPU had one process (no turns), its wall time in its worker. And its own seconds, what it takes with a GPU
  to itself: its wall time less the seconds its process waited for the other's turns (torch.compile's tracing
  included, which beside another configuration costs the GPU nothing). Kept per GPU model (a pool), the last
  KEEP runs of each. Per group (below), the median of its sums plans (``estimates``).
* **Kept**: ``<cache root>/gpu-seconds/<key>.json`` (GPU model -> its last KEEP runs), the key made of the
  model (its name, weights' hash, inputs and outputs) and the settings that shape the work (the GPU batch
  sizes, the sampling rule, scenarios; not the devices: a one-GPU run's figures plan a two-GPU run).
  ``--no-cache`` neither reads nor writes; a file that cannot be read or written is no plan.
* **Planned**: the unit is a *group*, the configurations of one runtime and precision (what a GPU's process
  keeps together: torch.compile after eager reuses cuDNN's choices for that precision, and split it would tune
  them twice). The groups are split over the pool's GPUs so that the largest expected sum is smallest
  (``partition``: every split for two GPUs, longest first otherwise). A plan is made only where every group of
  the pool has a figure; else plan order, and the report says why.

**Off by default** (``INFER_COMPARE_GPU_PLAN=1`` turns it on; the figures are kept either way): on three
leases of 2 x H200 (round 9, reports/gpu-x2-round9.md) the planned runs' two GPUs still ended 2.6-5.0 s apart
(10 s with the first version, which counted GPU seconds alone), no closer than in plan order (1.9-4.0 s): a
group's figures move by 1-2 s from run to run with what ran before it in its process (cuDNN's autotuning, the
CUDA context).
"""

from __future__ import annotations

import itertools
import os
import statistics
from collections.abc import Callable, Iterable
from typing import Any

from infer_compare.base.cache import Cache, key_of
from infer_compare.base.cache_notes import read_note, write_note
from infer_compare.base.records import EXPORT_FAILED, RUN_FAILED

SWITCH = "INFER_COMPARE_GPU_PLAN"  # 1: plan by the kept figures; default off (round 9 did not show it helps)
DIR = "gpu-seconds"
KEEP = 3  # runs kept per configuration and GPU model; their median plans
EXHAUSTIVE_MAX = 12  # at most this many groups: every split over two GPUs is tried (2 ** 11 of them, 5 ms)
# the settings that change a configuration's work
SHAPING = ("batch_sizes", "warmup_iters", "min_iters", "min_time_s", "parity_samples", "target_ci",
           "max_time_s", "warmup_time_s", "scenarios", "io", "concurrency")
MODEL = ("name", "family", "weights", "weights_hash", "input_shape", "num_classes", "inputs",
         "outputs")  # its identity


def enabled() -> bool:
    """Whether the board plans by the kept figures (they are kept either way)."""
    return os.environ.get(SWITCH, "0") in ("1", "true", "yes")


def label(cell: Any) -> str:
    """A configuration's name in the store: runner, format and precision."""
    return f"{cell.runner} {cell.fmt} {cell.precision}"


def store_key(minfo: Any, settings: Any) -> str:
    """The store's key for this model and the settings that shape each configuration's work."""
    s = settings.to_dict() if hasattr(settings, "to_dict") else dict(settings)
    m = minfo.to_dict() if hasattr(minfo, "to_dict") else dict(minfo)
    shaping = {k: s.get(k) for k in SHAPING}
    shaping["batch_sizes"] = (s.get("batch_sizes") or {}).get("cuda")
    return key_of({"model": {k: m.get(k) for k in MODEL}, "settings": shaping})


def _path(cache: Cache, key: str) -> Any:
    return cache.root / DIR / f"{key}.json"


Run = dict[str, tuple[float, float]]  # one run's figures: configuration label -> (GPU seconds, own seconds)


def _run(x: Any) -> Run:
    if not isinstance(x, dict):
        return {}
    return {str(k): (float(v[0]), float(v[1])) for k, v in x.items()
            if isinstance(v, list) and len(v) == 2 and all(isinstance(f, int | float) for f in v)}


def load(cache: Cache | None, key: str) -> dict[str, list[Run]]:
    """GPU model -> its kept runs (oldest first); {} without a store or for a file that cannot be read."""
    got = read_note(cache, _path(cache, key)) if cache is not None else None
    if not isinstance(got, dict):
        return {}
    return {str(pool): [r for r in map(_run, runs) if r]
            for pool, runs in got.items() if isinstance(runs, list)}


def save(cache: Cache | None, key: str, measured: dict[str, Run]) -> None:
    """Add this run's figures (GPU model -> label -> (GPU seconds, own seconds)) to the store, keeping the
    last KEEP runs of each GPU model; a cache that cannot be written just does not remember."""
    if cache is None or not measured:
        return
    kept = load(cache, key)
    for pool, run in measured.items():
        kept[pool] = [*kept.get(pool, []),
                      {k: (round(g, 3), round(o, 3)) for k, (g, o) in run.items()}][-KEEP:]
    write_note(cache, _path(cache, key), kept, indent=1, sort_keys=True)


def estimates(cells: Iterable[Any], runs: list[Run],
              group_of: Callable[[Any], Any]) -> dict[Any, tuple[float, float]]:
    """Each cell's expected (GPU seconds, own seconds) from the kept ``runs``. Per group (``group_of``: one
    runtime and precision), the median over the runs that have all its cells of the group's sums, shared among
    its cells as their own medians are: a group's cuDNN autotuning lands on whichever of its configurations
    came first, so a configuration's figure moves between runs while the group's sum holds. A group no run has
    whole: no figures."""
    groups: dict[Any, list[Any]] = {}
    for c in cells:
        groups.setdefault(group_of(c), []).append(c)
    out: dict[Any, tuple[float, float]] = {}
    for cs in groups.values():
        whole = [r for r in runs if all(label(c) in r for c in cs)]
        if not whole:
            continue
        for i, part in ((0, "g"), (1, "o")):
            total = statistics.median(sum(r[label(c)][i] for c in cs) for r in whole)
            each = {c: statistics.median(r[label(c)][i] for r in whole) for c in cs}
            norm = sum(each.values())
            for c in cs:
                share = each[c] / norm if norm > 0 else 1 / len(cs)
                g, o = out.get(c, (0.0, 0.0))
                out[c] = (total * share, o) if part == "g" else (g, total * share)
    return out


def measured(rows: Iterable[Any], done: Iterable[tuple[Any, Any, float]]) -> dict[str, Run]:
    """This run's (GPU seconds, own seconds) of each configuration measured on a GPU slot (see the module),
    but one with a failed row: ``done`` holds (cell, slot, wall seconds in its worker); the rows, when their
    process held the GPU and how long it waited for it."""
    held: dict[tuple[str, str], float] = {}
    waited: dict[tuple[str, str], float] = {}
    failed: set[str] = set()  # a configuration that failed took a time that says nothing of the next run's
    for r in rows:
        x = getattr(r, "extra", None) or {}
        if r.status in (RUN_FAILED, EXPORT_FAILED):
            failed.add(f"{r.backend} {r.format} {r.precision}")
        turn = x.get("gpu_turn") or {}
        if turn and x.get("gpu_name"):
            k = (str(x["gpu_name"]), f"{r.backend} {r.format} {r.precision}")
            held[k] = held.get(k, 0.0) + sum(float(b) - float(a) for a, b in turn.get("held") or [])
            waited[k] = waited.get(k, 0.0) + float(turn.get("waited_s") or 0.0)
    out: dict[str, Run] = {}
    for cell, slot, wall in done:
        if not slot.is_gpu or label(cell) in failed:
            continue
        k = (slot.pool, label(cell))
        gpu_s = held[k] if slot.turn and held.get(k) else wall
        out.setdefault(slot.pool, {})[k[1]] = (gpu_s, max(gpu_s, wall - waited.get(k, 0.0)))
    return out


def load_of(parts: int, sums: tuple[float, float]) -> float:
    """A GPU's expected span from its groups' summed (GPU seconds, own seconds) and its measuring processes:
    the GPU's work one after another, and each process's own work (torch.compile's tracing included) shared
    among ``parts`` processes, whichever is longer: a GPU given several torch.compile groups cannot hide their
    tracing behind its GPU work (2 x H200: three of them on one GPU left it idle 7.4-8.9 s of 37 s)."""
    return max(sums[0], sums[1] / max(1, parts))


def partition(costs: dict[Any, tuple[float, float]], devices: list[str],
              parts: dict[str, int] | None = None) -> dict[Any, str]:
    """Each group (key -> expected (GPU seconds, own seconds), in plan order) on one of ``devices``
    (``parts``: each one's measuring processes, default 1), the largest ``load_of`` as small as can be: every
    split for two devices and at most EXHAUSTIVE_MAX groups (ties: the split that moves fewest groups off the
    first device), else the longest group first onto the device it loads least."""
    groups = list(costs)
    n = {d: (parts or {}).get(d, 1) for d in devices}
    if len(devices) == 1 or not groups:
        return {g: devices[0] for g in groups}

    def span(d: str, gs: Iterable[Any]) -> float:
        gs = list(gs)
        return load_of(n[d], (sum(costs[g][0] for g in gs), sum(costs[g][1] for g in gs)))

    if len(devices) == 2 and len(groups) <= EXHAUSTIVE_MAX:
        best: tuple[float, int, tuple[int, ...]] | None = None
        for bits in itertools.product((0, 1), repeat=len(groups) - 1):
            # the first group on the first device (with equal devices the mirror is the same)
            side = (0, *bits)
            worst = max(span(d, [g for g, s in zip(groups, side, strict=True) if s == i])
                        for i, d in enumerate(devices))
            cand = (round(worst, 6), sum(side), side)
            best = cand if best is None or cand < best else best
        assert best is not None
        return {g: devices[s] for g, s in zip(groups, best[2], strict=True)}
    out: dict[Any, str] = {}
    for g in sorted(groups, key=lambda g: -max(costs[g])):
        d = min(devices, key=lambda d: (span(d, [*(x for x in out if out[x] == d), g]), devices.index(d)))
        out[g] = d
    return out
