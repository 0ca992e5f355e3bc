"""The processes of an A/B gate's two sides (measure/ab.py): each side's child and its JSON-lines channel,
its failure as an exception that names the side, and what else used the CPUs while the blocks were timed."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from infer_compare.host.launch import ChildNotStarted, describe_exit, kill_group, popen, read_tail
from infer_compare.measure.calibration import cpu_ticks, process_ticks

STOP_WAIT_S = 0.05  # the longest a block waits for the other side's threads to stop
STOPPED = ("T", "t", "Z", "X")  # /proc/PID/task/TID/stat states of a thread that takes no CPU


def _thread_states(pid: int) -> list[str] | None:
    """The state letter of each thread of ``pid`` (/proc), None where /proc cannot say."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    out = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                out.append(f.read().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue  # a thread that ended meanwhile
    return out


class SideFailed(Exception):
    """Side ``side`` ('a' or 'b', '' when unknown) cannot go on; its rows get ``status`` and the message."""

    def __init__(self, msg: str, side: str = "", status: str = "run_failed", hint: str = "", tb: str = ""):
        super().__init__(msg)
        self.side, self.status, self.hint, self.tb = side, status, hint, tb

    @classmethod
    def answered(cls, side: str, r: dict[str, Any]) -> SideFailed:
        return cls(f"side {side.upper()}: {r.get('error', 'failed')}", side, r.get("status", "run_failed"),
                   r.get("hint", ""), r.get("traceback", ""))


class Child:
    """One side's child process and its JSON-lines channel: a fresh interpreter speaking on its stdin and
    stdout, or, given its side's fork server (the runtime already imported), a forked child speaking on two
    named pipes (the server's children have their log as stdio)."""

    def __init__(self, name: str, spec_path: Path, python: str | None, env: dict[str, str], log: Path,
                 server: Any = None):
        self.name, self.log_path = name, log
        self.fifos: list[Path] = []
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
        self.quitting = False

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
            return server.spawn("infer_compare.measure.ab_child",
                                [str(spec_path), "--fifo", str(to), str(frm)], env, str(self.log_path))
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

    def stopped(self, limit_s: float = STOP_WAIT_S) -> bool:
        """Wait until every thread of the child has stopped after a SIGSTOP (at most ``limit_s``): a stop is
        acted on only when the thread next runs, and a thread that waits for its CPU (both sides' calling
        threads are pinned to the same one) would otherwise run on into the other side's block to stop
        there, a few milliseconds of it (ONNX Runtime and PyTorch LeNet-5 rows on the 2-core VM read their
        waiting side at 0.1-0.35 cores that way). False where it did not happen in time or /proc is absent."""
        end = time.perf_counter() + limit_s
        while True:
            states = _thread_states(self.proc.pid)
            if states is None:
                return False
            if all(st in STOPPED for st in states):
                return True
            if time.perf_counter() > end:
                return False
            os.sched_yield()

    def quit(self) -> None:
        """Ask the child to end, without waiting for it (``close`` waits): the two sides end at once."""
        self.signal(signal.SIGCONT)
        try:
            if self.proc.poll() is None and not self.quitting:
                self.send({"op": "quit"})
        except SideFailed:
            pass
        self.quitting = True

    def close(self) -> None:
        self.quit()
        try:
            if self.proc.poll() is None:
                self.proc.wait(timeout=10)
        except (SideFailed, subprocess.TimeoutExpired):
            pass
        kill_group(self.proc)
        self.sel.close()
        self._close_fifos()
        self.log.close()



class Load:
    """What else used the CPUs while one process pair's blocks ran: other processes (the machine's busy time
    minus both sides' own), other guests (steal), and the waiting side itself while the other side was timed
    (a runtime's threads that keep spinning after their call: the two sides then disturb each other).
    ``part()`` gives the raw figures of this pair, ``summary()`` sums the parts of several pairs, in cores."""

    def __init__(self, kids: dict[str, Child]):
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

    def part(self) -> dict[str, float] | None:
        """Ticks (other processes, steal, the waiting side) and the wall time of this pair's blocks."""
        t1, own1, wall = cpu_ticks(), self._own(), time.perf_counter() - self.start
        if self.t0 is None or t1 is None or self.own0 is None or own1 is None or wall <= 0:
            return None
        other = max(0, (t1[0] - self.t0[0]) - (t1[1] - self.t0[1]) - (own1 - self.own0)
                    - (t1[2] - self.t0[2]))
        return {"other": other, "steal": t1[1] - self.t0[1], "waiting": self.waiting, "wall": wall}

    @staticmethod
    def summary(parts: list[dict[str, float] | None]) -> dict[str, float]:
        got = [p for p in parts if p is not None]
        if not got or len(got) < len(parts):
            return {}
        hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        wall = sum(p["wall"] for p in got)
        cores = {k: sum(p[k] for p in got) / hz / wall for k in ("other", "steal", "waiting")}
        return {"other_cores": round(cores["other"], 3), "steal_cores": round(cores["steal"], 3),
                "waiting_side_cores": round(cores["waiting"], 3)}
