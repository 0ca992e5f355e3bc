"""One side of an A/B gate (``python -m infer_compare.measure.ab_child SPEC``): load the configuration
once, then time blocks of calls when the parent asks, so that the parent can alternate the two sides'
blocks (measure/ab.py).

The child speaks JSON lines: it writes a greeting (the protocol and its own infer-compare version), then
answers each command the parent writes on its stdin, on a private copy of its stdout (the runtimes' own
prints go to stderr):

* ``{"op": "load", "batch": B, "warmup_s": S}``: load (or re-shape) the runner for batch B, make the cold
  call and warm up as the spec's loop says (its calls; at least S seconds where given, else its time); answers the load time, the first call, the precision executed, settings,
  notes and library versions;
* ``{"op": "block", "calls": N}``: N timed calls; answers their times in ns, in order;
* ``{"op": "parity", "batch": B}``: the parity inputs at batch B, outputs saved where the spec says;
* ``{"op": "quit"}``.

``--fifo IN OUT`` after SPEC: commands from the named pipe IN, answers to OUT (a child forked by its side's
fork server, whose stdin and stdout are its log). Each side runs under its own interpreter (``--python-a/--python-b``): its own runtimes and its own
infer-compare. A child of another protocol version is refused by the parent at the greeting.
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
from infer_compare.measure.cells import CellSpec
from infer_compare.measure.child import Session, parity_outputs, tile

PROTOCOL = 1


class _Side:
    def __init__(self, spec: Any):
        self.spec, self.sess = spec, Session(spec)
        self.images = batches.load(spec.inputs)
        self.x: Any = None

    def load(self, batch: int, warmup_s: float | None = None) -> dict[str, Any]:
        runner, load_s = self.sess.runner_for(batch)
        if runner.fixed_batch is not None and runner.fixed_batch != batch:
            return {"ok": False, "status": "skipped",
                    "error": f"the artifact has a static batch of {runner.fixed_batch}; batch {batch} cannot run"}
        self.x = runner.prepare(tile(self.images, batch))
        t0 = time.perf_counter_ns()
        runner.run(self.x)
        first = time.perf_counter_ns() - t0
        loop, calls, start = self.spec.loop, 1, time.perf_counter()
        warm_s = loop.warmup_time_s if warmup_s is None else warmup_s
        while calls < loop.warmup_iters or time.perf_counter() - start < warm_s:
            runner.run(self.x)
            calls += 1
        return {"ok": True, "load_s": load_s, "first_ms": first / 1e6, "warmup_calls": calls,
                "exec_precision": runner.exec_precision, "settings": dict(runner.settings),
                "notes": list(runner.notes), "versions": runner.library_versions()}

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


def _answer(side: _Side, cmd: dict[str, Any]) -> dict[str, Any]:
    op = cmd.get("op")
    try:
        if op == "load":
            return side.load(int(cmd["batch"]), cmd.get("warmup_s"))
        if op == "block":
            return side.block(int(cmd["calls"]))
        if op == "parity":
            return side.parity(int(cmd["batch"]))
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

    say({"hello": PROTOCOL, "version": __version__, "python": sys.version.split()[0]})
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
