"""A fork server for the measuring children of runtimes whose import is slow (PyTorch).

Each configuration still gets its own process (measure/isolate.py): its own address space,
its own CUDA context, its own crash. What the fork server saves is the interpreter
start and the runtime's import in each of them: ``import torch, torchvision`` takes
4-10 s (measured on the H100 machine, whose site-packages hold no bytecode cache),
paid once per configuration, nine times in a default GPU run.

The server is a fresh interpreter (``python -m infer_compare.measure.forkserver MODULE...``)
that imports the runtime's modules and nothing else: it never initialises CUDA, never
runs an operator, so no thread pool or device context is inherited. For each request
it forks; the child starts its own session (a process group the parent can kill),
points stdin at /dev/null and stdout/stderr at the request's log file, takes the
request's environment, and runs the measuring child's ``main`` exactly as ``python
-m infer_compare.measure.isolate SPEC RESULT`` would. The server waits for that child and
reports its exit status; several children may be alive at once (an A/B gate's
sides).

Protocol (JSON lines): parent -> server ``{"module": M, "args": [...], "env": {...}, "log": PATH}``
(the child calls ``M.main(args)``);
server -> parent ``{"pid": N}`` when the child exists, then ``{"pid": N, "rc": R}``
(R as ``subprocess.Popen.returncode``: negative for a signal). ``{"ready": [...]}`` first,
when the modules are imported (or ``{"error": ...}``).

Where fork is unavailable, the server fails to start, or ``INFER_COMPARE_FORKSERVER=0``,
the children are started as fresh interpreters as before (measure/isolate.py).
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import subprocess
import sys
import threading
from queue import Empty, Queue
from typing import Any

from infer_compare.host import launch

START_TIMEOUT_S = 600.0  # importing torch on a slow disk, or an ARM board, can take minutes


def enabled() -> bool:
    return hasattr(os, "fork") and os.environ.get("INFER_COMPARE_FORKSERVER", "1") not in ("0", "false", "no")


class Forked:
    """A child started by the server: the parts of ``subprocess.Popen`` that measure/isolate.py uses."""

    def __init__(self, server: ForkServer, pid: int):
        self.server, self.pid, self.returncode = server, pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.status(self.pid, block=False)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.status(self.pid, block=True, timeout=timeout)
        return self.returncode


class ForkServer:
    def __init__(self, modules: tuple[str, ...], python: str | None = None):
        self.modules, self.python = tuple(modules), python  # python: another interpreter (an A/B side's)
        self.proc: subprocess.Popen | None = None
        self.ready = False
        self.failed = ""  # why the server is not used
        self._events: Queue = Queue()
        self._status: dict[int, int] = {}

    def launch(self, env: dict[str, str] | None = None) -> None:
        """Start the server's interpreter (its imports run in the background); ``start`` waits for them."""
        if self.proc is not None or self.failed:
            return
        # NVML answers torch.cuda.is_available() in the server without touching the CUDA runtime
        # (a runtime query would make every forked child unable to use CUDA)
        server_env = {**os.environ, "PYTORCH_NVML_BASED_CUDA_CHECK": "1", **(env or {})}
        try:
            self.proc = launch.popen("infer_compare.measure.forkserver", list(self.modules), server_env,
                                     python=self.python, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)
        except launch.ChildNotStarted as e:  # the measuring children start as fresh interpreters instead
            self.failed = str(e)
            return
        threading.Thread(target=self._read, daemon=True).start()

    def start(self, env: dict[str, str] | None = None) -> bool:
        """Start the server (if ``launch`` did not) and wait until its modules are imported; False
        (``failed`` says why) if not."""
        self.launch(env)
        if self.proc is None or self.ready:
            return self.proc is not None
        try:
            first = self._events.get(timeout=START_TIMEOUT_S)
        except Empty:
            first = {"error": f"no answer in {START_TIMEOUT_S:.0f} s"}
        if "ready" not in first:
            self.failed = str(first.get("error", "the fork server exited"))
            self.close()
            return False
        self.ready = True
        return True

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self._events.put(json.loads(line))
            except json.JSONDecodeError:
                continue
        self._events.put({"error": "the fork server exited"})

    def spawn(self, module: str, args: list[str], env: dict[str, str], log: str) -> Forked:
        """Fork a child that calls ``module.main(args)``;
        its handle. Raises OSError when the server is gone."""
        if self.proc is None or self.proc.stdin is None or self.proc.poll() is not None:
            raise OSError("the fork server is not running")
        self.proc.stdin.write(json.dumps({"module": module, "args": args, "env": env, "log": log}) + "\n")
        self.proc.stdin.flush()
        while True:
            ev = self._next()
            if "error" in ev:
                raise OSError(str(ev["error"]))
            if "pid" in ev and "rc" not in ev:
                return Forked(self, int(ev["pid"]))

    def _next(self, timeout: float | None = None) -> dict[str, Any]:
        ev = self._events.get(timeout=timeout)
        if "rc" in ev:
            self._status[int(ev["pid"])] = int(ev["rc"])
        return ev

    def status(self, pid: int, block: bool, timeout: float | None = None) -> int | None:
        """The child's exit status (Popen's convention), or None while it runs."""
        while pid not in self._status:
            try:
                ev = self._next(timeout=timeout) if block else self._events.get_nowait()
            except Empty:
                if block:
                    raise subprocess.TimeoutExpired("forked child", timeout or 0) from None
                return None
            if "rc" in ev:
                self._status[int(ev["pid"])] = int(ev["rc"])
            elif "error" in ev:  # the server died: the child (its own session) may still be running
                self._status.setdefault(pid, _reap_orphan(pid))
        return self._status[pid]

    def close(self, wait: bool = True) -> subprocess.Popen | None:
        """End the server. Its children are done (or killed) by now and it holds nothing to save, so it is
        killed rather than left to finalise its imports (1.2 s of interpreter teardown with torch loaded).
        With ``wait``, waited for here; else its process is returned for the caller to wait for."""
        if self.proc is None:
            return None
        proc, self.proc, self.ready = self.proc, None, False
        try:
            if proc.stdin:
                proc.stdin.close()
        except OSError:
            pass
        proc.kill()
        if not wait:
            return proc
        proc.wait()
        return None


def _reap_orphan(pid: int) -> int:
    """Exit status of a child whose server is gone: unknown, reported as killed."""
    try:
        os.killpg(pid, 9)
    except (ProcessLookupError, PermissionError):
        pass
    return -9


# ---------------------------------------------------------------------------- the server process
def _child(req: dict[str, Any]) -> None:
    """In the forked child: call ``module.main(args)`` with the request's environment and log."""
    import signal

    code = 1
    try:
        os.setsid()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        sys.stdin = open(os.devnull)  # noqa: SIM115 - the child's whole life
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv = [req["module"], *req["args"]]
        rc = importlib.import_module(req["module"]).main(list(req["args"]))
        code = rc if isinstance(rc, int) else 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _driver_initialised() -> bool:
    """True when the CUDA driver was initialised in this process (``cuInit``, by any library, not only
    torch): ``cuDeviceGetCount`` answers CUDA_ERROR_NOT_INITIALIZED (3) before it; False without a driver."""
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    n = ctypes.c_int(0)
    return lib.cuDeviceGetCount(ctypes.byref(n)) == 0


def _fork_poisoned() -> str:
    """Why a forked child could not use CUDA through torch ("" when it can): an import initialised
    CUDA, or asked the CUDA runtime for its devices (torch then marks every fork as bad)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return ""
    if torch.cuda.is_initialized() or _driver_initialised():
        return "an imported module initialised CUDA: a forked child could not use it"
    check = getattr(torch._C, "_cuda_isInBadFork", None)
    if check is None:
        return ""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, b"1" if check() else b"0")
        os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    return "torch marks forked children as unable to use CUDA (CUDA was queried while importing)" \
        if got == b"1" else ""


def freeze_imports() -> None:
    """After the imports, before any fork: what they made (about 400,000 objects with torch and torchvision)
    moves to the garbage collector's permanent generation (``gc.freeze``, as Python's documentation advises
    for a process that forks without exec), so that a child's collections walk only its own objects: a
    resident process collects once between configurations, 0.2 s a time with torch's objects walked on the
    2-core machine; and the children's pages of those objects stay shared. The modules' objects live as long
    as the process does anyway; a measured loop's own garbage is collected as before."""
    gc.collect()
    gc.freeze()


def _rc(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _serve_requests(out: Any) -> None:
    """Fork a child for each request line on stdin, several alive at once (an A/B gate's two sides come from
    one server); each exit reported as it happens. The main thread blocks on stdin and forks; one more thread
    blocks in waitpid, once per child, and reports its exit: neither wakes while the children measure (a
    process polling every few ms on a 2-core machine would fall on their timings; a stopped or continued
    child, as the gate's waiting side is, wakes nothing: waitpid without WUNTRACED). A fork copies only the
    forking thread, and the child replaces the stdio objects the waiter writes through."""
    lock, todo = threading.Lock(), threading.Semaphore(0)

    def say(d: dict[str, Any]) -> None:
        with lock:
            out.write(json.dumps(d) + "\n")
            out.flush()

    def reap() -> None:
        while True:
            todo.acquire()
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                continue
            say({"pid": pid, "rc": _rc(status)})

    threading.Thread(target=reap, daemon=True).start()
    for line in sys.stdin:
        if not line.strip():
            continue
        pid = os.fork()
        if pid == 0:
            _child(json.loads(line))
        say({"pid": pid})
        todo.release()


def serve(modules: list[str]) -> int:
    out = sys.stdout
    try:
        for m in modules:
            try:
                importlib.import_module(m.lstrip("?"))
            except ImportError:
                if not m.startswith("?"):
                    raise
    except BaseException as e:
        out.write(json.dumps({"error": f"importing {m}: {type(e).__name__}: {e}"}) + "\n")
        out.flush()
        return 1
    freeze_imports()
    poisoned = _fork_poisoned()
    if poisoned:
        out.write(json.dumps({"error": poisoned}) + "\n")
        out.flush()
        return 1
    out.write(json.dumps({"ready": modules, "threads": threading.active_count()}) + "\n")
    out.flush()
    _serve_requests(out)
    return 0


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when the server ends
    sys.exit(serve(sys.argv[1:]))
