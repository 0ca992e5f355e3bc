"""Two sides of one configuration measured side by side (the A/B gate): each side's child loaded at the
same time (measure/ab_child.py, under its own interpreter), then timed in alternating blocks, the order
inside each pair drawn at random, so that whatever the machine does in those seconds falls on both.

Per batch size: both children load (in parallel: not timed), a pilot block of each sets the calls per
block (the block time divided by the slower side's call), then ``pairs`` pairs of blocks, then each side's
parity outputs. Each side's result is a CellResult like a plain run's, its samples in time order, with the
pairing in ``extra["ab"]`` (calls per block, which side went first in each pair), from which the gate
takes the paired ratios (regress/paired.py).
"""

from __future__ import annotations

import json
import os
import random
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infer_compare.host.launch import ChildNotStarted, describe_exit, kill_group, popen, read_tail
from infer_compare.measure.ab_child import PROTOCOL
from infer_compare.measure.calibration import cpu_ticks, process_ticks
from infer_compare.measure.cells import CellResult, CellSpec

SIDES = ("a", "b")


@dataclass(frozen=True)
class PairPlan:
    pairs: int = 20  # pairs of blocks per row
    side_time_s: float = 1.0  # each side's timed calls per row, in seconds, split into the blocks
    seed: int = 0  # the draw of which side goes first in each pair
    timeout_s: float = 300.0  # any one answer of a child (a load, a block, parity)
    # the waiting side is stopped (SIGSTOP to its process group) while the other side is timed, and continued
    # (SIGCONT) for its own block: a runtime's threads spin after a call for a while (ONNX Runtime's pool took
    # 0.59 cores of the other side's blocks on the 2-core VM); stopped, they take none
    freeze: bool = True


class SideFailed(Exception):
    """Side ``side`` ('a' or 'b', '' when unknown) cannot go on; its rows get ``status`` and the message."""

    def __init__(self, msg: str, side: str = "", status: str = "run_failed", hint: str = "", tb: str = ""):
        super().__init__(msg)
        self.side, self.status, self.hint, self.tb = side, status, hint, tb

    @classmethod
    def answered(cls, side: str, r: dict[str, Any]) -> SideFailed:
        return cls(f"side {side.upper()}: {r.get('error', 'failed')}", side, r.get("status", "run_failed"),
                   r.get("hint", ""), r.get("traceback", ""))


class _Child:
    """One side's child process and its JSON-lines channel: a fresh interpreter speaking on its stdin and
    stdout, or, given its side's fork server (the runtime already imported), a forked child speaking on two
    named pipes (the server's children have their log as stdio)."""

    def __init__(self, name: str, spec_path: Path, python: str | None, env: dict[str, str], log: Path,
                 server: Any = None):
        self.name, self.log_path, self.fifos = name, log, []
        self.log = open(log, "w")  # noqa: SIM115 - closed with the child
        try:
            self.proc = self._fork(server, spec_path, env) if server is not None else None
            if self.proc is None:
                self.proc = popen("infer_compare.measure.ab_child", [str(spec_path)], env, python=python,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                  bufsize=1)
                self.w, self.r = self.proc.stdin, self.proc.stdout
        except ChildNotStarted as e:
            self.log.close()
            raise SideFailed(str(e), name) from None
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.r, selectors.EVENT_READ)
        self.hello: dict[str, Any] = {}

    def _fork(self, server: Any, spec_path: Path, env: dict[str, str]) -> Any:
        """The child forked by ``server`` on two named pipes, opened here first (read-write: never blocking,
        and never an end-of-file while the child starts; its death is seen by polling it); None when the
        server cannot fork it (a fresh interpreter then)."""
        to, frm = (spec_path.with_suffix(f".{d}.fifo") for d in ("to", "from"))
        try:
            for f in (to, frm):
                f.unlink(missing_ok=True)
                os.mkfifo(f)
                self.fifos.append(f)
            self.w = open(os.open(to, os.O_RDWR), "w", buffering=1)  # noqa: SIM115
            self.r = open(os.open(frm, os.O_RDWR))  # noqa: SIM115
            self.log.flush()
            return server.spawn("infer_compare.measure.ab_child", [str(spec_path), "--fifo", str(to), str(frm)],
                                env, str(self.log_path))
        except OSError:
            self._close_fifos()
            return None

    def _close_fifos(self) -> None:
        for f in ("w", "r"):
            try:
                getattr(self, f).close()
            except (AttributeError, OSError):
                pass
        for f in self.fifos:
            f.unlink(missing_ok=True)
        self.fifos = []

    def ask(self, cmd: dict[str, Any] | None, timeout_s: float) -> dict[str, Any]:
        if cmd is not None:
            self.send(cmd)
        return self.read(timeout_s)

    def send(self, cmd: dict[str, Any]) -> None:
        try:
            self.w.write(json.dumps(cmd) + "\n")
            self.w.flush()
        except (BrokenPipeError, OSError):
            raise SideFailed(self._gone(), self.name) from None

    def read(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while not self.sel.select(min(0.5, max(0.0, deadline - time.monotonic()))):
            if self.proc.poll() is not None:  # gone without a word (a forked child's pipe never ends)
                raise SideFailed(self._gone(), self.name)
            if time.monotonic() >= deadline:
                kill_group(self.proc)
                raise SideFailed(f"side {self.name.upper()} did not answer within {timeout_s:.0f} s (killed)",
                                 self.name)
        line = self.r.readline()
        if not line:
            raise SideFailed(self._gone(), self.name)
        return json.loads(line)

    def _gone(self) -> str:
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        self.log.flush()
        return (f"side {self.name.upper()}'s process ended ({describe_exit(rc)}): "
                f"{read_tail(self.log_path, 3).strip() or 'no output'}")

    def signal(self, sig: int) -> None:
        """``sig`` to the child's process group (its own session: the child and whatever it started)."""
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        self.signal(signal.SIGCONT)
        try:
            if self.proc.poll() is None:
                self.send({"op": "quit"})
                self.proc.wait(timeout=10)
        except (SideFailed, subprocess.TimeoutExpired):
            pass
        kill_group(self.proc)
        self.sel.close()
        self._close_fifos()
        self.log.close()


def _start(specs: dict[str, CellSpec], pythons: dict[str, str | None], env: dict[str, str], work: Path,
           tag: str, plan: PairPlan, servers: dict[str, Any]) -> dict[str, _Child]:
    kids: dict[str, _Child] = {}
    try:
        for s in SIDES:
            path = work / f"{tag}-{s}.spec.json"
            path.write_text(json.dumps(specs[s].to_dict()))
            kids[s] = _Child(s, path, pythons.get(s), env, work / f"{tag}-{s}.log", servers.get(s))
        for s in SIDES:
            kids[s].hello = kids[s].read(plan.timeout_s)
            if kids[s].hello.get("hello") != PROTOCOL:
                raise SideFailed(f"side {s.upper()}'s infer-compare {kids[s].hello.get('version', '?')} speaks the "
                                 f"A/B protocol {kids[s].hello.get('hello')}, this one {PROTOCOL}: install the same "
                                 "or a newer infer-compare there", s)
    except SideFailed:
        for k in kids.values():
            k.close()
        raise
    return kids


def _both(kids: dict[str, _Child], cmd: dict[str, Any], timeout_s: float) -> dict[str, dict[str, Any]]:
    """The same command to both sides, at the same time (loads and parity: not timed)."""
    for k in kids.values():
        k.signal(signal.SIGCONT)
        k.send(cmd)
    return {s: k.read(timeout_s) for s, k in kids.items()}


def _calls_per_block(kids: dict[str, _Child], plan: PairPlan) -> int:
    if plan.freeze:  # both stopped: from here on only the side being timed runs
        for k in kids.values():
            k.signal(signal.SIGSTOP)
    pilot = {s: _timed(k, 3, plan) for s, k in kids.items()}
    for s, r in pilot.items():
        if not r.get("ok"):
            raise SideFailed.answered(s, r)
    slowest = max(sorted(r["ns"])[1] for r in pilot.values()) / 1e9
    return max(1, min(100_000, round(plan.side_time_s / plan.pairs / max(slowest, 1e-7))))


class _Load:
    """What else used the CPUs while the blocks ran: other processes (the machine's busy time minus both
    sides' own), other guests (steal), and the waiting side itself while the other side was timed (a runtime's
    threads that keep spinning after their call: the two sides then disturb each other). In cores."""

    def __init__(self, kids: dict[str, _Child]):
        self.pids = {s: k.proc.pid for s, k in kids.items()}
        self.t0, self.own0 = cpu_ticks(), self._own()
        self.start = time.perf_counter()
        self.waiting = 0

    def _own(self) -> int | None:
        t = [process_ticks(p) for p in self.pids.values()]
        return None if None in t else sum(t)  # type: ignore[arg-type]

    def block(self, waiting_side: str, fn):
        before = process_ticks(self.pids[waiting_side])
        out = fn()
        after = process_ticks(self.pids[waiting_side])
        if before is not None and after is not None:
            self.waiting += after - before
        return out

    def summary(self) -> dict[str, float]:
        t1, own1, wall = cpu_ticks(), self._own(), time.perf_counter() - self.start
        if self.t0 is None or t1 is None or self.own0 is None or own1 is None or wall <= 0:
            return {}
        hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        other = max(0, (t1[0] - self.t0[0]) - (t1[1] - self.t0[1]) - (own1 - self.own0) - (t1[2] - self.t0[2]))
        return {"other_cores": round(other / hz / wall, 3), "steal_cores": round((t1[1] - self.t0[1]) / hz / wall, 3),
                "waiting_side_cores": round(self.waiting / hz / wall, 3)}


def _timed(kid: _Child, calls: int, plan: PairPlan) -> dict[str, Any]:
    """One block of ``kid``: continued for it, stopped again after it (``plan.freeze``)."""
    if plan.freeze:
        kid.signal(signal.SIGCONT)
    try:
        return kid.ask({"op": "block", "calls": calls}, plan.timeout_s)
    finally:
        if plan.freeze:
            kid.signal(signal.SIGSTOP)


def _blocks(kids: dict[str, _Child], plan: PairPlan, calls: int, rng: random.Random) -> tuple[dict, list[str], dict]:
    samples: dict[str, list[int]] = {s: [] for s in SIDES}
    first: list[str] = []
    load = _Load(kids)
    for _ in range(plan.pairs):
        order = list(SIDES) if rng.random() < 0.5 else list(reversed(SIDES))
        first.append(order[0])
        for s in order:
            other = "b" if s == "a" else "a"
            r = load.block(other, lambda s=s: _timed(kids[s], calls, plan))
            if not r.get("ok"):
                raise SideFailed.answered(s, r)
            samples[s] += r["ns"]
    return samples, first, load.summary()


def _result(b: int, loaded: dict[str, Any], samples: list[int], par: dict[str, Any], ab: dict[str, Any]) -> CellResult:
    return CellResult(
        batch_size=b, ok=True, load_s=loaded.get("load_s"), first_infer_ms=loaded.get("first_ms"),
        samples_ns=tuple(samples), wall_ns=sum(samples), exec_precision=loaded.get("exec_precision", ""),
        settings=dict(loaded.get("settings") or {}), notes=tuple(loaded.get("notes") or ()),
        versions=dict(loaded.get("versions") or {}), extra={"ab": ab}, outputs_written=bool(par.get("ok")),
        parity_n=par.get("n"), loop={"n": len(samples), "wall_ns": sum(samples), "stopped_by": "ab_pairs",
                                     "warmup_calls": loaded.get("warmup_calls")})


def _batch(kids: dict[str, _Child], specs: dict[str, CellSpec], b: int, plan: PairPlan,
           rng: random.Random) -> dict[str, CellResult]:
    loaded = _both(kids, {"op": "load", "batch": b}, plan.timeout_s)
    for s, r in loaded.items():
        if not r.get("ok"):
            raise SideFailed.answered(s, r)
    calls = _calls_per_block(kids, plan)
    samples, first, load = _blocks(kids, plan, calls, rng)
    par = _both(kids, {"op": "parity", "batch": b}, plan.timeout_s) if specs["a"].parity_inputs else {}
    ab = {"calls_per_block": calls, "pairs": plan.pairs, "first": "".join(first), "seed": plan.seed, "load": load}
    return {s: _result(b, loaded[s], samples[s], par.get(s) or {}, {**ab, "side": s}) for s in SIDES}


def _solo(kid: _Child, spec: CellSpec, b: int, plan: PairPlan, why: str) -> CellResult:
    """One side measured alone, blocks as the pairs would have had them, after the other side failed: its row
    is measured (so that a candidate that crashes reads as a failure against a baseline that ran)."""
    kid.signal(signal.SIGCONT)  # it was stopped while the other side was timed
    try:
        loaded = kid.ask({"op": "load", "batch": b}, plan.timeout_s)
        if not loaded.get("ok"):
            raise SideFailed.answered(kid.name, loaded)
        calls = _calls_per_block({kid.name: kid}, plan)
        kid.signal(signal.SIGCONT)  # alone: nothing to stop it for
        samples: list[int] = []
        for _ in range(plan.pairs):
            r = kid.ask({"op": "block", "calls": calls}, plan.timeout_s)
            if not r.get("ok"):
                raise SideFailed.answered(kid.name, r)
            samples += r["ns"]
        par = kid.ask({"op": "parity", "batch": b}, plan.timeout_s) if spec.parity_inputs else {}
    except SideFailed as e:
        return CellResult.failed(b, e.status, str(e), hint=e.hint, traceback=e.tb)
    return _result(b, loaded, samples, par, {"calls_per_block": calls, "pairs": plan.pairs, "side": kid.name,
                                             "alone": f"measured alone, not paired: {why}"})


def measure_pair(specs: dict[str, CellSpec], pythons: dict[str, str | None], env: dict[str, str], work: Path,
                 tag: str, plan: PairPlan, servers: dict[str, Any] | None = None) -> dict[str, list[CellResult]]:
    """Both sides of one configuration at each of its batch sizes (latency scenario); never raises for a
    side's failure: its rows say why, and the other side is measured alone (its rows say so). ``servers``:
    each side's fork server for this runtime (its children forked with the runtime imported), or none."""
    servers = servers or {}
    rng = random.Random(f"{plan.seed}:{tag}")
    out: dict[str, list[CellResult]] = {s: [] for s in SIDES}
    todo = list(specs["b"].batch_sizes)
    try:
        kids = _start(specs, pythons, env, work, tag, plan, servers)
    except SideFailed as e:
        return _one_side(specs, pythons, env, work, tag, plan, e, servers)
    try:
        while todo:
            got = _batch(kids, specs, todo[0], plan, rng)
            for s in SIDES:
                out[s].append(got[s])
            todo.pop(0)
    except SideFailed as e:
        good = {"a": "b", "b": "a"}.get(e.side, "")
        for b in todo:
            out[e.side or "a"].append(CellResult.failed(b, e.status, str(e), hint=e.hint, traceback=e.tb))
            if good:
                out[good].append(_solo(kids[good], specs[good], b, plan, str(e)))
            elif not e.side:
                out["b"].append(CellResult.failed(b, "run_failed", str(e)))
    finally:
        for k in kids.values():
            k.close()
    return out


def _one_side(specs: dict[str, CellSpec], pythons: dict[str, str | None], env: dict[str, str], work: Path,
              tag: str, plan: PairPlan, e: SideFailed, servers: dict[str, Any]) -> dict[str, list[CellResult]]:
    """A side could not be started: its rows say why; the other side is started alone and measured alone."""
    todo = list(specs["b"].batch_sizes)
    out = {s: [CellResult.failed(b, e.status, str(e), hint=e.hint) for b in todo] for s in SIDES}
    good = {"a": "b", "b": "a"}.get(e.side, "")
    if not good:
        return out
    path = work / f"{tag}-{good}.spec.json"
    try:
        path.write_text(json.dumps(specs[good].to_dict()))
        kid = _Child(good, path, pythons.get(good), env, work / f"{tag}-{good}.log", servers.get(good))
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
