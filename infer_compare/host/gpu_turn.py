"""Two measuring processes on one GPU, taking turns: the GPU's work of one at a time, and torch.compile's
tracing (Python on the CPU, nothing on the GPU) in one while the other uses the GPU.

Where a GPU's plan has configurations whose loads trace (``RunnerInfo.traced_loads``: torch.compile) and the
GPU has room for two processes (``room``), its slot is measured by two processes (``PARTS``), each on its own
half of the slot's cores, sharing a lock file (``ENV`` names it; ``fcntl.flock``). A measuring process holds
the lock for each batch size it measures: the load or re-shape, the cold first call, the warm-up, the timed
loop, the parity outputs and the throughput scenario, as one configuration's process alone on its GPU did. The
one exception: a runner's traced loads (torch.compile's first two batch sizes: its first shape, and the
recompile that makes the batch dynamic; a later one runs the dynamic graph at once) run without it while
Dynamo traces the model and Inductor builds (or loads from its cache) the code (backends/pytorch/run_cuda.py);
the lock is taken when that compilation ends, before the compiled code first runs (``torch._dynamo``'s
compile-end callback), or at the end of the load. Meanwhile the other process measures its own configuration
on the GPU: two GPU rows are never timed at the same time, and a timed row shares the host with a tracing
process on other cores and, on the GPU, with what such a load does before it traces: the weights' copy to the
GPU, the creation of its CUDA events and a zero batch (milliseconds, once per load or new shape), and the CUDA
context of a process whose first configuration it is. Each row says how long its process waited for the GPU
and how long its compilation ran beside the other's work (``extra.gpu_turn``).

A process that dies holding the lock frees it (the kernel drops an flock with its last descriptor).
``INFER_COMPARE_GPU_TURNS=0``: one process per GPU, as before.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

ENV = "INFER_COMPARE_GPU_TURN"  # the lock file shared by the measuring processes of one GPU
SWITCH = "INFER_COMPARE_GPU_TURNS"  # "0": one measuring process per GPU
PARTS = 2  # measuring processes per GPU where its plan has torch.compile configurations
# a smaller GPU (a Jetson's shared memory, a desktop card) keeps one measuring process
MIN_GPU_MIB = 32 * 1024
WEIGHTS_SHARE = 0.02  # ... and so does one whose memory is under 50 times the model's weights


def enabled() -> bool:
    return hasattr(os, "fork") and os.environ.get(SWITCH, "1") not in ("0", "false", "no")


def traced_loads(runner: str) -> int:
    """How many of a configuration's first batch sizes ``runner`` loads by tracing first
    (``RunnerInfo.traced_loads``)."""
    from infer_compare.catalog.runtimes import runners  # deferred: loaded by then wherever this is asked

    info = runners().get(runner)
    return int(info.traced_loads) if info is not None else 0


def compiles_on_gpu(cells: list[Any]) -> bool:
    """Turns on, and some CUDA configuration of the plan traces in its loads (the others have no CPU-only part
    long enough to overlap)."""
    return enabled() and any(c.kind == "cuda" and c.device and traced_loads(c.runner) for c in cells)


def room(gpus: list[dict[str, Any]] | None, weights_bytes: int = 0) -> str:
    """"" where every GPU of ``gpus`` (device facts with ``memory_mib``) has room for two processes' GPU
    memory (at least MIN_GPU_MIB, and 50 times the model's ``weights_bytes``: the idle process keeps its
    weights and the memory its last batch size cached while the other measures); else why not, for the
    report."""
    mems = [int(g.get("memory_mib") or 0) for g in (gpus or [])]
    least = min(mems) if mems else 0
    if least >= MIN_GPU_MIB and weights_bytes <= WEIGHTS_SHARE * least * 2**20:
        return ""
    known = f"{least} MiB" if least else "unknown"
    return (f"one measuring process per GPU: the GPU's memory ({known}) leaves no room for a second process "
            f"taking turns (host/gpu_turn.py: at least {MIN_GPU_MIB} MiB and 50 times the model's weights, "
            f"{weights_bytes / 2**20:.0f} MiB)")


class Turn:
    """This process's hold on its GPU's lock file, with the seconds it waited for it, the seconds it let it go
    inside a configuration (``released``) and when it held it (``holds``: wall-clock seconds since the epoch,
    so that the holds of a GPU's processes line up: benchmarks/gpu_busy.py tells from them how long each GPU
    was idle)."""

    def __init__(self, path: str):
        import fcntl

        self._fcntl = fcntl
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self.held = False
        self.waited_s = 0.0
        self.beside_s = 0.0
        self._let_go: float | None = None  # when ``released`` let the lock go, until it is taken again
        self.holds: list[tuple[float, float]] = []  # (taken, let go), time.time()
        self._since = 0.0

    def acquire(self) -> None:
        if self.held:
            return
        t0 = time.perf_counter()
        if self._let_go is not None:
            self.beside_s += t0 - self._let_go
            self._let_go = None
        self._fcntl.flock(self.fd, self._fcntl.LOCK_EX)
        self.waited_s += time.perf_counter() - t0
        self.held = True
        self._since = time.time()

    def release(self) -> None:
        if self.held:
            self.holds.append((self._since, time.time()))
            self._fcntl.flock(self.fd, self._fcntl.LOCK_UN)
            self.held = False

    @contextmanager
    def holding(self) -> Iterator[None]:
        """The GPU is this process's while the block runs (and was before, if it was)."""
        was = self.held
        self.acquire()
        try:
            yield
        finally:
            if not was:
                self.release()

    @contextmanager
    def released(self) -> Iterator[None]:
        """The GPU is let go while the block runs (CPU-only work), and held again when it ends, if it was;
        whatever inside the block calls ``acquire`` takes it back earlier."""
        was = self.held
        self.release()
        self._let_go = time.perf_counter()
        try:
            yield
        finally:
            if was:
                self.acquire()
            self._let_go = None

    def take_stats(self) -> dict[str, Any]:
        """The seconds waited and let go since the last call (a batch size's row), and the holds since
        (``held``: [taken, let go or now], epoch seconds to the millisecond; a hold still on goes on in the
        next call's); then start again."""
        now = time.time()
        holds = self.holds + ([(self._since, now)] if self.held else [])
        out = {"waited_s": round(self.waited_s, 3), "compiled_beside_s": round(self.beside_s, 3),
               "held": [[round(a, 3), round(b, 3)] for a, b in holds]}
        self.waited_s = self.beside_s = 0.0
        self.holds = []
        if self.held:
            self._since = now
        return out


_TURN: Turn | None = None


def current() -> Turn | None:
    """This process's Turn, where its parent gave it a lock file (``ENV``); else None (the GPU is its own)."""
    global _TURN
    path = os.environ.get(ENV, "")
    if not path:
        return None
    if _TURN is None or _TURN.path != path:
        _TURN = Turn(path)
    return _TURN


@contextmanager
def holding(defer: bool = False) -> Iterator[Turn | None]:
    """The process's turn held while the block runs, and let go at its end; nothing where it has none.
    ``defer``: not taken at the start: by ``take`` (or torch.compile's compile end) before the block's first
    GPU work that matters (a runner whose load traces on the CPU first: ``traced_loads``)."""
    turn = current()
    if turn is None:
        yield None
        return
    if not defer:
        with turn.holding():
            yield turn
        return
    try:
        yield turn
    finally:
        turn.release()


def waited() -> float:
    """The seconds this process has waited for its turn since its last row (0 without a turn): a load that
    waited inside (torch.compile's compile end) says its time without the wait."""
    turn = current()
    return turn.waited_s if turn is not None else 0.0


def take() -> None:
    """Take this process's turn now, where it has one and does not hold it (a deferred ``holding``)."""
    turn = current()
    if turn is not None:
        turn.acquire()
