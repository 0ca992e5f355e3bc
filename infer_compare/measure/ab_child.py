"""One side of an A/B gate (``python -m infer_compare.measure.ab_child SPEC``): load the configuration
once, then time blocks of calls when the parent asks, so that the parent can alternate the two sides'
blocks (measure/ab.py).

The child speaks JSON lines: it writes a greeting (the protocol and its own infer-compare version), then
answers each command the parent writes on its stdin, on a private copy of its stdout (the runtimes' own
prints go to stderr):

* ``{"op": "open", "batch": B}`` (protocol 2): load (or re-shape) the runner for batch B, nothing run: the
  parent sends it to both sides at once (loading is mostly one core's work); answers the load time;
* ``{"op": "load", "batch": B, "warmup_s": S, "pin": P}``: load (or re-shape) the runner for batch B unless
  "open" did, make the cold call and warm up as the spec's loop says (its calls; at least S seconds where
  given, else its time); with P true (protocol 2), the calling thread is pinned after the cold call to the
  highest-numbered CPU the process may use (``calling_thread_cpu``; the runtime's own threads, started by
  then, keep their CPUs); answers the load time, the first call, the precision executed, settings, notes
  and library versions;
* ``{"op": "block", "calls": N}``: N timed calls; answers their times in ns, in order;
* ``{"op": "parity", "batch": B}``: the parity inputs at batch B, outputs saved where the spec says;
* ``{"op": "malloc"}``: glibc's malloc thresholds fixed in this process (host/malloc.py), sent by the parent
  before the first load where both sides' greetings say ``"malloc": true``; answers what was set;
* ``{"op": "quit"}``.

``--fifo IN OUT`` after SPEC: commands from the named pipe IN, answers to OUT (a child forked by its side's
fork server, whose stdin and stdout are its log). Each side runs under its own interpreter
(``--python-a/--python-b``): its own runtimes and its own infer-compare. A child of another protocol version
is refused by the parent at the greeting.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

from infer_compare.base import batches
from infer_compare.base.errors import BackendUnavailable
from infer_compare.base.version import __version__
from infer_compare.host import malloc
from infer_compare.measure.cells import CellSpec
from infer_compare.measure.child import Session, parity_outputs, tile

PROTOCOL = 2  # 2: "open", and "pin" in "load"; a parent speaking 2 still drives a child of 1 without them


class _Side:
    def __init__(self, spec: Any):
        self.spec, self.sess = spec, Session(spec)
        self.images = batches.load(spec.inputs)
        self.x: Any = None
        self.opened: tuple[int, float] | None = None  # (batch, load seconds) of an "open" not yet warmed up
        self.pin = _Pin()

    def open(self, batch: int) -> dict[str, Any]:
        self.pin.release()  # threads a runtime starts while loading must not inherit the one CPU
        _, load_s = self.sess.runner_for(batch)
        self.opened = (batch, load_s)
        return {"ok": True, "load_s": load_s}

    def load(self, batch: int, warmup_s: float | None = None, pin: bool = False) -> dict[str, Any]:
        self.pin.release()
        runner, load_s = self.sess.runner_for(batch)
        if self.opened and self.opened[0] == batch and not load_s:
            load_s = self.opened[1]  # loaded by "open"
        self.opened = None
        if runner.fixed_batch is not None and runner.fixed_batch != batch:
            return {"ok": False, "status": "skipped",
                    "error": f"the artifact has a static batch of {runner.fixed_batch}; "
                             f"batch {batch} cannot run"}
        self.x = runner.prepare(tile(self.images, batch))
        t0 = time.perf_counter_ns()
        runner.run(self.x)
        first = time.perf_counter_ns() - t0
        cpu = self.pin.hold() if pin else None
        loop, calls, start = self.spec.loop, 1, time.perf_counter()
        warm_s = loop.warmup_time_s if warmup_s is None else warmup_s
        while calls < loop.warmup_iters or time.perf_counter() - start < warm_s:
            runner.run(self.x)
            calls += 1
        return {"ok": True, "load_s": load_s, "first_ms": first / 1e6, "warmup_calls": calls,
                "exec_precision": runner.exec_precision, "settings": dict(runner.settings),
                "notes": list(runner.notes), "versions": runner.library_versions(), "calling_thread_cpu": cpu}

    def block(self, calls: int) -> dict[str, Any]:
        run, x, clock = self.sess.runner.run, self.x, time.perf_counter_ns
        out = []
        t0 = clock()
        for _ in range(max(1, calls)):
            run(x)
            t1 = clock()
            out.append(t1 - t0)
            t0 = t1
        return {"ok": True, "ns": out}

    def parity(self, batch: int) -> dict[str, Any]:
        runner, _ = self.sess.runner_for(batch)
        return {"ok": True, "n": parity_outputs(runner, self.spec, batch)}


class _Pin:
    """The calling thread pinned to one CPU while blocks are timed, and let go before a runner is loaded.

    On a shared VM each virtual CPU runs at its own speed, which changes over tenths of a second (measured on
    the 2-core development VM: LeNet-5 calls at 0.19 ms on one CPU and 0.30-0.41 ms on the other at the same
    moment; two processes on one CPU saw the same level). A runtime that computes a small model on the calling
    thread (PyTorch, ONNX Runtime) then runs as fast as the CPU the scheduler left that thread on: two
    processes of the same code differed by 20-50 % for their whole life, which the pairing of adjacent blocks
    cannot cancel. Both sides pinned to the same CPU see the same level in adjacent blocks."""

    def __init__(self) -> None:
        self.cpu: int | None = None
        try:
            self.allowed: set[int] = set(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # not Linux
            self.allowed = set()

    def hold(self) -> int | None:
        if len(self.allowed) < 2:
            return None
        cpu = max(self.allowed)
        try:
            os.sched_setaffinity(0, {cpu})  # pid 0: the calling thread only (Linux)
        except OSError:
            return None
        self.cpu = cpu
        return cpu

    def release(self) -> None:
        if self.cpu is not None:
            try:
                os.sched_setaffinity(0, self.allowed)
            except OSError:
                pass
            self.cpu = None


def _answer(side: _Side, cmd: dict[str, Any]) -> dict[str, Any]:
    op = cmd.get("op")
    try:
        if op == "load":
            return side.load(int(cmd["batch"]), cmd.get("warmup_s"), bool(cmd.get("pin")))
        if op == "open":
            return side.open(int(cmd["batch"]))
        if op == "block":
            return side.block(int(cmd["calls"]))
        if op == "parity":
            return side.parity(int(cmd["batch"]))
        if op == "malloc":
            return {"ok": True, "malloc": malloc.fix()}
        return {"ok": False, "status": "run_failed", "error": f"unknown command {op!r}"}
    except Exception as e:
        if isinstance(e, BackendUnavailable):
            return {"ok": False, "status": "skipped", "error": e.reason, "hint": e.hint}
        side.sess.close()
        msg = str(e).strip().splitlines()
        return {"ok": False, "status": "run_failed",
                "error": f"{op}: {type(e).__name__}: {msg[0] if msg else ''}".rstrip(": "),
                "traceback": "\n".join(traceback.format_exc().strip().splitlines()[-20:])}


def _channel(argv: list[str]) -> tuple[Any, Any]:
    """(commands in, answers out): stdin and a private copy of stdout, or the two named pipes of ``--fifo IN
    OUT`` (a child forked by a fork server, measure/ab.py: its stdio is its log)."""
    if len(argv) >= 4 and argv[1] == "--fifo":
        return open(argv[2]), open(argv[3], "w", buffering=1)  # noqa: SIM115 - the child's whole life
    return sys.stdin, os.fdopen(os.dup(1), "w", buffering=1)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    commands, proto = _channel(argv)  # the protocol's own channel
    os.dup2(2, 1)  # whatever a runtime prints goes to stderr, never into the protocol

    def say(d: dict[str, Any]) -> None:
        proto.write(json.dumps(d) + "\n")
        proto.flush()

    say({"hello": PROTOCOL, "version": __version__, "python": sys.version.split()[0],
         "malloc": malloc.available()})
    with open(argv[0]) as f:
        side = _Side(CellSpec.from_dict(json.load(f)))
    for line in commands:
        cmd = json.loads(line)
        if cmd.get("op") == "quit":
            break
        say(_answer(side, cmd))
    side.sess.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
