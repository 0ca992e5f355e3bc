"""The parent's side of the resident measuring processes (measure/resident.py): one per runtime and
GPU (its fork server's modules and the child's environment: which GPU it sees, which cores it runs
on), started at the first configuration that needs it, kept while it measures well.

What stays as with one process per configuration: each configuration's results come from its own
result file, written as each batch size finishes; a configuration whose process crashes or hangs
is a failed row for the batch size in flight (with the process's last lines), and the process is
killed and forgotten: the configuration's remaining batch sizes, and the configurations after it,
run in a fresh resident process (measure/isolate.py decides, as before). Each row says where in its
process it was measured (``extra.resident_process.position``; the rows after the first did not
pay for the interpreter, the runtime's import, the CUDA context or the libraries' start-up).

A configuration with a failed row ends its resident process (its ``done`` file says ``exit``; a CUDA error
stays with its context): the next configuration gets a fresh one, and loses nothing.

A fork server serves one child at a time (measure/forkserver.py): before it forks any other child,
the resident it forked is ended (``release``).

Off with ``INFER_COMPARE_RESIDENT=0``, and where the platform has no named pipes (each
configuration then gets its own process, as before).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from infer_compare.host.launch import kill_group, popen

MODULE = "infer_compare.measure.resident"
NOTE = (
    "GPU configurations: one resident process per runtime and GPU measures that runtime's configurations on "
    "that GPU in turn (measure/residents.py): the interpreter, the runtime's import, the CUDA context and "
    "the libraries' start-up are paid by its first configuration only, so the load time and cold first call "
    "of the rows after it do not include them (extra.resident_process.position: 1 for the first); the fork "
    "server's import-time objects are frozen out of the garbage collector (gc.freeze), so no row's load "
    "walks them in a collection. After each configuration it forgets what that one left (torch.compile's "
    "graphs, cached GPU memory, peak-memory counters, peak RSS); cuDNN's algorithm choices (cudnn.benchmark) "
    "stay, so a torch.compile row after the eager rows of the same precision and shape does not autotune "
    "again in its load. A configuration with a failed row ends the process (the next gets a fresh one); a "
    "crash or hang kills it: that batch size is a failed row, the rest run in a fresh one. "
    "INFER_COMPARE_RESIDENT=0: one process per configuration")
STOP_WAIT_S = 5.0  # a resident told to stop exits at once; one that does not is killed after this


def enabled() -> bool:
    return hasattr(os, "mkfifo") and os.environ.get("INFER_COMPARE_RESIDENT", "1") not in ("0", "false", "no")


class Resident:
    """One resident process, its request pipe and its log."""

    def __init__(self, proc: Any, fd: int, fifo: Path, log: Path, log_file: Any, server: Any):
        self.proc, self.fd, self.fifo, self.log, self._log_file, self.server = (
            proc, fd, fifo, log, log_file, server)
        self.measured: list[str] = []  # the configurations asked of it so far

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ask(self, spec_path: Path, result_path: Path, done_path: Path, what: str) -> int:
        """Ask for one configuration; its position in this process (1: the first)."""
        line = json.dumps({"spec": str(spec_path), "result": str(result_path), "done": str(done_path)}) + "\n"
        os.write(self.fd, line.encode())
        self.measured.append(what)
        return len(self.measured)

    def kill(self) -> None:
        kill_group(self.proc)
        self._close_pipe()

    def stop(self) -> None:
        """End of its pipe: it exits; killed if it does not within STOP_WAIT_S."""
        self._close_pipe()
        try:
            self.proc.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            kill_group(self.proc)

    def _close_pipe(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        self.fifo.unlink(missing_ok=True)


class Residents:
    """The live resident processes of a comparison, by (fork server modules, environment)."""

    def __init__(self, workdir: str | os.PathLike | None = None):
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="infer-compare-resident-"))
        self.live: dict[tuple, Resident] = {}
        self.started = 0
        self.lock = threading.Lock()  # GPU slots ask from their own threads

    @staticmethod
    def key(server: Any, env: dict[str, str]) -> tuple:
        return (tuple(getattr(server, "modules", ()) or ()), tuple(sorted(env.items())))

    def get(self, server: Any, env: dict[str, str]) -> Resident:
        """The live resident of ``server`` and ``env``, or a new one (ChildNotStarted when none can start).
        One resident per environment (per GPU) at a time: another runtime's resident there is ended first,
        so that it holds no GPU memory while this one measures, as a configuration's own process did not."""
        k = self.key(server, env)
        with self.lock:
            res = self.live.get(k)
            if res is not None and res.alive():
                return res
            for other, r in list(self.live.items()):
                if other == k or other[1] == k[1] or (server is not None and r.server is server):
                    self._end(other, r, kill=other == k)
            res = self._start(server, env)
            self.live[k] = res
            return res

    def _end(self, k: tuple, r: Resident, kill: bool) -> None:
        del self.live[k]
        if kill:
            r.kill()
        else:
            r.stop()

    def _start(self, server: Any, env: dict[str, str]) -> Resident:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.started += 1
        fifo, log = (self.workdir / f"resident{self.started}.requests",
                     self.workdir / f"resident{self.started}.log")
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo, 0o600)
        # read-write: never blocks, and the pipe lives until the parent closes it
        fd = os.open(fifo, os.O_RDWR)
        log_file = None
        try:
            proc = None
            if server is not None:
                try:
                    log.touch()
                    proc = server.spawn(MODULE, [str(fifo)], env, str(log))
                except OSError:
                    proc = None  # the server is gone: a fresh interpreter
            if proc is None:
                log_file = open(log, "w+", errors="replace")  # noqa: SIM115 - kept for the process's life
                proc = popen(MODULE, [str(fifo)], env, stdout=log_file, stderr=subprocess.STDOUT)
        except BaseException:
            os.close(fd)
            if log_file is not None:
                log_file.close()
            fifo.unlink(missing_ok=True)
            raise
        return Resident(proc, fd, fifo, log, log_file, server)

    def forget(self, res: Resident) -> None:
        """A resident that crashed, hung or was cancelled: killed (its group) and forgotten."""
        with self.lock:
            self.live = {k: r for k, r in self.live.items() if r is not res}
        res.kill()

    def retire(self, res: Resident) -> None:
        """A resident that said it leaves (after a failed row): waited for and forgotten."""
        with self.lock:
            self.live = {k: r for k, r in self.live.items() if r is not res}
        res.stop()

    def release(self, server: Any) -> None:
        """End the resident that ``server`` forked, so that the server can fork another child."""
        if server is None:
            return
        with self.lock:
            for k, r in list(self.live.items()):
                if r.server is server:
                    self._end(k, r, kill=False)

    def close(self, wait: bool = True) -> list[Any]:
        """End every resident: each sees the end of its pipe at once and exits. With ``wait``, waited for here
        (one still running after STOP_WAIT_S is killed); else their processes are returned for the caller to
        ``reap``."""
        with self.lock:
            live, self.live = list(self.live.values()), {}
        for r in live:
            r._close_pipe()
        procs = [r.proc for r in live]
        if not wait:
            return procs
        reap(procs)
        return []


def reap(procs: list[Any], limit_s: float = STOP_WAIT_S) -> None:
    """Wait for ``procs`` (told to end), killing the process
    group of any still running after ``limit_s`` in all."""
    t0 = time.perf_counter()
    for p in procs:
        try:
            p.wait(timeout=max(0.1, limit_s - (time.perf_counter() - t0)))
        except subprocess.TimeoutExpired:
            kill_group(p)
