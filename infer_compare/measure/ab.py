"""Two sides of one configuration measured side by side (the A/B gate): each side's child loaded (one after
the other, the other side stopped), then timed in alternating blocks (measure/ab_child.py, under its side's
interpreter), so that whatever the machine does in those seconds falls on both.

Two processes of the same code differ lastingly by a few per cent (where their memory landed, measured:
unchanged LeNet-5 rows' estimates from one process pair each spread 1.2-2.4 % on the 2-core VM, while each
pair's own blocks agreed to 0.1-0.2 %). So each configuration is measured by ``replicates`` process pairs, one
after the other, and by as many more (at most ``max_replicates``) as the caller's ``needed`` asks for once the
planned ones are in (regress/ab.py: decided once, from their spread). Each pair starts both children (forked
from the fork server where there is one: one for both sides under one interpreter), loads, and times its share
of the pairs of blocks, half with A first and half with B first, in random order. The gate judges the spread
between the process pairs (regress/paired.py), not only within one.

Per batch size in each process pair: both children load (one after the other: not timed), the first pair's
pilot block of each sets the calls per block (the block time divided by the slower side's call; the later
pairs keep it), then its pairs of blocks, then (first pair only) each side's parity outputs. Each side's
result is a CellResult like a plain run's, its samples in time order, with the pairing in ``extra["ab"]``
(calls per block, process pairs measured and planned, which side went first in each pair, where the wall time
went), from which the gate takes the paired ratios.
"""

from __future__ import annotations

import json
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infer_compare.measure.ab_child import PROTOCOL
from infer_compare.measure.ab_plan import PairPlan
from infer_compare.measure.ab_proc import Child, Load, SideFailed
from infer_compare.measure.cells import CellResult, CellSpec

SIDES = ("a", "b")
MIN_CALLS = 3  # calls per block at least


def _start(specs: dict[str, CellSpec], pythons: dict[str, str | None], env: dict[str, str], work: Path,
           tag: str, plan: PairPlan, servers: dict[str, Any],
           order: tuple[str, ...] = SIDES) -> dict[str, Child]:
    """Both sides' children, started (and later loaded, ``_both``) in ``order``."""
    kids: dict[str, Child] = {}
    try:
        for s in order:
            path = work / f"{tag}-{s}.spec.json"
            path.write_text(json.dumps(specs[s].to_dict()))
            kids[s] = Child(s, path, pythons.get(s), env, work / f"{tag}-{s}.log", servers.get(s))
        for s in order:
            kids[s].hello = kids[s].read(plan.timeout_s)
            if kids[s].hello.get("hello") not in (1, PROTOCOL):
                raise SideFailed(f"side {s.upper()}'s infer-compare {kids[s].hello.get('version', '?')} "
                                 f"speaks the A/B protocol {kids[s].hello.get('hello')}, this one "
                                 f"{PROTOCOL}: install the same or a newer infer-compare there", s)
    except SideFailed:
        for k in kids.values():
            k.close()
        raise
    return kids


def _both(kids: dict[str, Child], cmd: dict[str, Any], plan: PairPlan) -> dict[str, dict[str, Any]]:
    """The same command to both sides (loads and parity: not timed). With ``plan.freeze``, one side after the
    other, the other stopped: two runtimes whose threads spin between calls, each with a thread per core, slow
    each other down many times over (PyTorch's load and warm-up of MobileNet v2 took 2.6 s side by side on the
    2-core VM, 0.5 s alone); else at the same time."""
    if not plan.freeze:
        for k in kids.values():
            k.signal(signal.SIGCONT)
            k.send(cmd)
        return {s: k.read(plan.timeout_s) for s, k in kids.items()}
    out = {}
    for s, k in kids.items():
        k.signal(signal.SIGCONT)
        out[s] = k.ask(cmd, plan.timeout_s)
        k.signal(signal.SIGSTOP)
        k.stopped()
    return out


def _block_size(kids: dict[str, Child], plan: PairPlan) -> tuple[int, int]:
    """(calls per block, pairs per process pair) from a pilot block of each side: ``plan.side_time_s`` split
    into the plan's pairs, at least MIN_CALLS calls per block (a block's median then drops its first call,
    slowed by the caches the other side left behind), with fewer pairs (at least 2 per process pair) where
    blocks of that size would overrun the side time."""
    pilot = {s: _timed(k, 3, plan) for s, k in kids.items()}
    for s, r in pilot.items():
        if not r.get("ok"):
            raise SideFailed.answered(s, r)
    call = max(max(sorted(r["ns"])[1] for r in pilot.values()) / 1e9, 1e-7)
    per, reps = plan.per_replicate, max(1, plan.replicates)
    calls = round(plan.side_time_s / (per * reps) / call)
    if calls < MIN_CALLS:
        calls, per = MIN_CALLS, max(2, min(per, 2 * round(plan.side_time_s / reps / (MIN_CALLS * call) / 2)))
    calls = max(calls, plan.tail_calls_per_block(per, call))
    return min(100_000, calls), per


def _timed(kid: Child, calls: int, plan: PairPlan) -> dict[str, Any]:
    """One block of ``kid``: continued for it, stopped again after it (``plan.freeze``)."""
    if plan.freeze:
        kid.signal(signal.SIGCONT)
    try:
        return kid.ask({"op": "block", "calls": calls}, plan.timeout_s)
    finally:
        if plan.freeze:
            kid.signal(signal.SIGSTOP)
            kid.stopped()  # stopped before the other side's block starts, not during it


def _orders(n: int, rng: random.Random) -> list[str]:
    """Which side goes first in each of ``n`` pairs: half A, half B (an odd one drawn), in random order."""
    firsts = ["a"] * (n // 2) + ["b"] * (n // 2) + ([rng.choice(SIDES)] if n % 2 else [])
    rng.shuffle(firsts)
    return firsts


def _blocks(kids: dict[str, Child], plan: PairPlan, calls: int, per: int,
            rng: random.Random) -> tuple[dict, list[str], Any]:
    samples: dict[str, list[int]] = {s: [] for s in SIDES}
    first = _orders(per, rng)
    load = Load(kids)
    for f in first:
        for s in (f, "b" if f == "a" else "a"):
            other = "b" if s == "a" else "a"
            r = load.block(other, lambda s=s: _timed(kids[s], calls, plan))
            if not r.get("ok"):
                raise SideFailed.answered(s, r)
            samples[s] += r["ns"]
    return samples, first, load.part()


def _result(b: int, loaded: dict[str, Any], samples: list[int], par: dict[str, Any],
            ab: dict[str, Any]) -> CellResult:
    return CellResult(
        batch_size=b, ok=True, load_s=loaded.get("load_s"), first_infer_ms=loaded.get("first_ms"),
        samples_ns=tuple(samples), wall_ns=sum(samples), exec_precision=loaded.get("exec_precision", ""),
        settings=dict(loaded.get("settings") or {}), notes=tuple(loaded.get("notes") or ()),
        versions=dict(loaded.get("versions") or {}), extra={"ab": ab}, outputs_written=bool(par.get("ok")),
        parity_n=par.get("n"), loop={"n": len(samples), "wall_ns": sum(samples), "stopped_by": "ab_pairs",
                                     "warmup_calls": loaded.get("warmup_calls")})


def _one(xs: list[Any]) -> Any:
    """The one value of ``xs`` (every process pair's), or the list where they differ."""
    return xs[0] if len(set(map(str, xs))) == 1 else xs


class _Series:
    """One batch size's blocks over the process pairs: the first pair's load answers, calls per block and
    parity; every pair's samples, orders and load figures."""

    def __init__(self, b: int):
        self.b = b
        self.loaded: dict[str, Any] = {}
        self.par: dict[str, Any] = {}
        self.calls, self.per = 0, 0  # calls per block, pairs per process pair (set by the first pair's pilot)
        self.samples: dict[str, list[int]] = {s: [] for s in SIDES}
        self.first: list[str] = []
        self.loaded_first = ""  # which side each process pair started and loaded first
        self.loads: list[Any] = []
        self.load_s: dict[str, list[float]] = {s: [] for s in SIDES}
        self.cpus: dict[str, list[Any]] = {s: [] for s in SIDES}  # each process's pinned calling thread's CPU
        self.opened = False  # both sides' runners loaded at once (their load times taken side by side)
        self.malloc: list[str] = []  # each process pair's malloc settings (_malloc)
        self.wall: dict[str, float] = {}  # this batch size's wall time: load, pilot, blocks, parity
        self.most = 0  # the most process pairs the second stage could give (max_replicates, the budget)

    def phase(self, name: str, t0: float) -> float:
        t1 = time.perf_counter()
        self.wall[name] = round(self.wall.get(name, 0.0) + t1 - t0, 3)
        return t1

    def results(self, plan: PairPlan, replicates: int) -> dict[str, CellResult]:
        ab = {"calls_per_block": self.calls, "pairs": len(self.first), "replicates": replicates,
              "replicates_planned": plan.replicates, "replicates_most": self.most or replicates,
              "replicates_max": plan.max_replicates, "replicates_budget_s": round(plan.budget_s, 1),
              "loaded_first": self.loaded_first,
              "first": "".join(self.first), "seed": plan.seed, "loaded_side_by_side": self.opened,
              "load": Load.summary(self.loads), "wall_s": self.wall, "malloc": _one(self.malloc or [""])}
        return {s: _result(self.b, self.loaded[s], self.samples[s], self.par.get(s) or {},
                           {**ab, "side": s, "load_s": [round(x, 3) for x in self.load_s[s]],
                            "calling_thread_cpu": _one(self.cpus[s])}) for s in SIDES}


def _batch(kids: dict[str, Child], specs: dict[str, CellSpec], ser: _Series, plan: PairPlan,
           rng: random.Random) -> None:
    """One process pair's share of batch size ``ser.b``: load both, time its pairs of blocks (the first pair
    also sets the calls per block and writes the parity outputs)."""
    t = time.perf_counter()
    if plan.freeze and all(k.hello.get("hello") == PROTOCOL for k in kids.values()):
        _open(kids, ser.b, plan)
        ser.opened = True
        t = ser.phase("open", t)
    loaded = _both(kids, {"op": "load", "batch": ser.b, "warmup_s": plan.warmup_s, "pin": plan.pin}, plan)
    ser.loaded_first += next(iter(kids))
    t = ser.phase("load", t)
    for s, r in loaded.items():
        if not r.get("ok"):
            raise SideFailed.answered(s, r)
        ser.load_s[s].append(float(r.get("load_s") or 0.0))
        ser.cpus[s].append(r.get("calling_thread_cpu"))
    first = not ser.loaded
    if first:
        ser.loaded = loaded
        ser.calls, ser.per = _block_size(kids, plan)
        t = ser.phase("pilot", t)
    samples, orders, load = _blocks(kids, plan, ser.calls, ser.per, rng)
    t = ser.phase("blocks", t)
    for s in SIDES:
        ser.samples[s] += samples[s]
    ser.first += orders
    ser.loads.append(load)
    if first and specs["a"].parity_inputs:
        ser.par = _both(kids, {"op": "parity", "batch": ser.b}, plan)
        ser.phase("parity", t)


def _malloc(kids: dict[str, Child], plan: PairPlan) -> str:
    """Both sides' malloc thresholds fixed (plan.malloc), before anything is loaded, where both can; the
    settings both processes run with, in words (the rows' ``extra.ab.malloc``)."""
    if not plan.malloc:
        return "glibc's default (thresholds moving with each process's history; --malloc default)"
    cannot = [s.upper() for s, k in kids.items() if not k.hello.get("malloc")]
    if cannot:
        return (f"the C library's default: side {' and '.join(cannot)} cannot fix its malloc thresholds "
                "(not glibc, or its infer-compare is older than this setting), so neither side's are")
    got = {s: k.ask({"op": "malloc"}, plan.timeout_s) for s, k in kids.items()}
    for s, r in got.items():
        if not r.get("ok"):
            raise SideFailed.answered(s, r)
    return _one([r.get("malloc", "") for r in got.values()])


def _open(kids: dict[str, Child], b: int, plan: PairPlan) -> None:
    """Both sides load batch ``b``'s runner at the same time, nothing run (a runtime's threads spin only after
    calls): a load is mostly one core's work, so two take little more than one (OpenVINO's MobileNet v2 on the
    2-core VM: 0.53-0.56 s a process pair instead of 0.71-0.73 s with its cold call and warm-up); then both
    are stopped again. The loads' figures are taken side by side: the rows' load times say so (extra.ab)."""
    for k in kids.values():
        k.signal(signal.SIGCONT)
        k.send({"op": "open", "batch": b})
    got: dict[str, dict[str, Any]] = {}
    try:
        for s, k in kids.items():
            got[s] = k.read(plan.timeout_s)  # both answers read before either failure is raised
    finally:
        for k in kids.values():
            k.signal(signal.SIGSTOP)
        for k in kids.values():
            k.stopped()
    for s, r in got.items():
        if not r.get("ok"):
            raise SideFailed.answered(s, r)


def _solo(kid: Child, spec: CellSpec, b: int, plan: PairPlan, why: str) -> CellResult:
    """One side measured alone, blocks as the pairs would have had them, after the other side failed: its row
    is measured (so that a candidate that crashes reads as a failure against a baseline that ran)."""
    kid.signal(signal.SIGCONT)  # it was stopped while the other side was timed
    try:
        loaded = kid.ask({"op": "load", "batch": b, "warmup_s": plan.warmup_s, "pin": plan.pin},
                         plan.timeout_s)
        if not loaded.get("ok"):
            raise SideFailed.answered(kid.name, loaded)
        calls, per = _block_size({kid.name: kid}, plan)
        total = per * max(1, plan.replicates)
        kid.signal(signal.SIGCONT)  # alone: nothing to stop it for
        samples: list[int] = []
        for _ in range(total):
            r = kid.ask({"op": "block", "calls": calls}, plan.timeout_s)
            if not r.get("ok"):
                raise SideFailed.answered(kid.name, r)
            samples += r["ns"]
        par = kid.ask({"op": "parity", "batch": b}, plan.timeout_s) if spec.parity_inputs else {}
    except SideFailed as e:
        return CellResult.failed(b, e.status, str(e), hint=e.hint, traceback=e.tb)
    return _result(b, loaded, samples, par, {"calls_per_block": calls, "pairs": total, "side": kid.name,
                                             "alone": f"measured alone, not paired: {why}"})


Needed = Callable[[list[tuple[list[int], list[int], int]], int, int], int]


def _most(plan: PairPlan, done: int, spent_s: float) -> int:
    """The most process pairs this configuration may have after ``done`` took ``spent_s`` seconds: at most
    ``plan.max_replicates``, and as many more as fit in ``plan.budget_s`` at the time each took so far
    (0: no bound)."""
    if plan.budget_s <= 0 or done <= 0:
        return max(done, plan.max_replicates)
    more = int(max(0.0, plan.budget_s - spent_s) / max(spent_s / done, 1e-6))
    return max(done, min(plan.max_replicates, done + more))


def measure_pair(specs: dict[str, CellSpec], pythons: dict[str, str | None], env: dict[str, str], work: Path,
                 tag: str, plan: PairPlan, servers: dict[str, Any] | None = None,
                 needed: Needed | None = None) -> dict[str, list[CellResult]]:
    """Both sides of one configuration at each of its batch sizes (latency scenario), over ``plan.replicates``
    process pairs, then as many more (up to ``plan.max_replicates``, and as fit in ``plan.budget_s``) as
    ``needed`` asks for, given each batch size's samples (A's, B's, calls per block) and the process pairs
    so far: asked once, so the number of
    process pairs is decided once. Never raises for a side's failure: its rows say why (a crash in any process
    pair fails the side), and the other side is measured alone (its rows say so). ``servers``: each side's
    fork server for this runtime (its children forked with the runtime imported), or none."""
    servers = servers or {}
    rng = random.Random(f"{plan.seed}:{tag}")
    series = [_Series(b) for b in specs["b"].batch_sizes]
    total, r, asked, t0 = max(1, plan.replicates), 0, needed is None, time.perf_counter()
    while r < total or not asked:
        if r >= total:
            asked = True
            most = _most(plan, r, time.perf_counter() - t0)
            total = max(r, min(most, needed(  # type: ignore[misc]
                [(s.samples["a"], s.samples["b"], s.calls) for s in series], r, most)))
            for ser in series:
                ser.most = most
            continue
        t = time.perf_counter()
        try:
            # the side forked and loaded first alternates between process pairs, ``needed``'s included: what
            # going first leaves (where a process's memory lands, what the other's load left in the caches)
            # falls on both sides; the estimate weighs both orders equally at any count (regress/balance.py)
            order = SIDES if r % 2 == 0 else SIDES[::-1]
            kids = _start(specs, pythons, env, work, f"{tag}-p{r}" if r else tag, plan, servers, order)
        except SideFailed as e:
            return _one_side(specs, pythons, env, work, tag, plan, e, servers)
        series[0].phase("start", t)
        try:
            fixed = _malloc(kids, plan)
            for ser in series:
                ser.malloc.append(fixed)
                _batch(kids, specs, ser, plan, rng)
        except SideFailed as e:
            return _failed(kids, specs, plan, e)
        finally:
            t = time.perf_counter()
            for k in kids.values():
                k.quit()
            for k in kids.values():
                k.close()
            series[0].phase("close", t)
        r += 1
    got = [ser.results(plan, r) for ser in series]
    return {s: [g[s] for g in got] for s in SIDES}


def _failed(kids: dict[str, Child], specs: dict[str, CellSpec], plan: PairPlan,
            e: SideFailed) -> dict[str, list[CellResult]]:
    """Side ``e.side`` failed in a process pair: every batch size of it fails;
    the other side is measured alone by its live child."""
    out: dict[str, list[CellResult]] = {s: [] for s in SIDES}
    good = {"a": "b", "b": "a"}.get(e.side, "")
    for b in specs["b"].batch_sizes:
        out[e.side or "a"].append(CellResult.failed(b, e.status, str(e), hint=e.hint, traceback=e.tb))
        if good:
            out[good].append(_solo(kids[good], specs[good], b, plan, str(e)))
        else:
            out["b"].append(CellResult.failed(b, "run_failed", str(e)))
    return out


def _one_side(specs: dict[str, CellSpec], pythons: dict[str, str | None], env: dict[str, str], work: Path,
              tag: str, plan: PairPlan, e: SideFailed,
              servers: dict[str, Any]) -> dict[str, list[CellResult]]:
    """A side could not be started: its rows say why; the other side is started alone and measured alone."""
    todo = list(specs["b"].batch_sizes)
    out = {s: [CellResult.failed(b, e.status, str(e), hint=e.hint) for b in todo] for s in SIDES}
    good = {"a": "b", "b": "a"}.get(e.side, "")
    if not good:
        return out
    path = work / f"{tag}-{good}.solo.spec.json"
    try:
        path.write_text(json.dumps(specs[good].to_dict()))
        kid = Child(good, path, pythons.get(good), env, work / f"{tag}-{good}.solo.log", servers.get(good))
    except (SideFailed, OSError) as e2:
        out[good] = [CellResult.failed(b, "run_failed", str(e2)) for b in todo]
        return out
    try:
        kid.hello = kid.read(plan.timeout_s)
        out[good] = [_solo(kid, specs[good], b, plan, str(e)) for b in todo]
    except SideFailed as e2:
        out[good] = [CellResult.failed(b, e2.status, str(e2)) for b in todo]
    finally:
        kid.close()
    return out
