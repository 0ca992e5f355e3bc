"""GPU memory, the stream and timing events of the TensorRT runner, from cuda-python's
low-level runtime bindings (``cuda.bindings.runtime``; ``cuda.cudart`` in cuda-python
< 12.6) -- no PyTorch, so TensorRT rows run in a torch-free bundle, e.g. on a Jetson
with JetPack's TensorRT and ``pip install cuda-python`` of its CUDA major.

Every call returns ``(cudaError_t, results...)``; :func:`check` turns an error into a
one-line RunnerError naming the call and the CUDA error.

Timing events: :class:`EventRing` creates the events of ``RING_CALLS`` calls at load,
so the timed call only records them; their elapsed times are read after the measured
loop. When a run makes more calls than the ring holds, the slot about to be reused is
read first (a few microseconds inside that call; counted in ``event_reads_in_loop``).

TensorRT itself has never run on the machines this was written on; ``cuda.bindings``
was imported there, and without a GPU driver its calls answer
``cudaErrorInsufficientDriver`` (tests/test_tensorrt_static.py).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from infer_compare.base.errors import RunnerError

RING_CALLS = 4096
HINT = ("pip install cuda-python  (cuda.bindings; its CUDA major must match the driver's: cuda-python 12.x "
        "for CUDA 12 / JetPack 6, 13.x for CUDA 13)")


def import_cudart() -> Any:
    try:
        from cuda.bindings import runtime as cudart  # cuda-python >= 12.6
    except ImportError:
        from cuda import cudart  # type: ignore[no-redef]  # older cuda-python
    return cudart


def cudart_status() -> tuple[Any, str]:
    """(the runtime bindings module or None, reason when None). Imports only; never raises."""
    try:
        return import_cudart(), ""
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return None, f"cuda-python (cuda.bindings) is not importable: {first}"


def check(rt: Any, result: Any, what: str) -> Any:
    """The value(s) after the error code of a cuda.bindings call; RunnerError on an error."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        try:
            name = rt.cudaGetErrorName(err)[1].decode()
        except Exception:
            name = str(err)
        raise RunnerError(f"CUDA {what} failed: {name}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def device_facts(rt: Any, index: int) -> dict[str, Any]:
    """Name, compute capability, SMs, CUDA runtime and driver versions, as CUDA reports them."""
    p = check(rt, rt.cudaGetDeviceProperties(index), "cudaGetDeviceProperties")
    name = p.name.decode(errors="replace").rstrip("\x00") if isinstance(p.name, bytes) else str(p.name)
    run_v = check(rt, rt.cudaRuntimeGetVersion(), "cudaRuntimeGetVersion")
    drv_v = check(rt, rt.cudaDriverGetVersion(), "cudaDriverGetVersion")
    return {"gpu": name, "compute_capability": f"{p.major}.{p.minor}", "sm_count": int(p.multiProcessorCount),
            "cuda_runtime": f"{run_v // 1000}.{(run_v % 1000) // 10}",
            "cuda_driver": f"{drv_v // 1000}.{(drv_v % 1000) // 10}"}


class CudaBuffers:
    """Device buffers, pinned host arrays and one stream on one GPU; :meth:`close` frees them."""

    def __init__(self, rt: Any, index: int):
        self.rt = rt
        check(rt, rt.cudaSetDevice(index), "cudaSetDevice")
        self._dev: list[int] = []
        self._host: list[int] = []
        self.stream = check(rt, rt.cudaStreamCreate(), "cudaStreamCreate")
        self.handle = int(self.stream)  # what TensorRT's execute_async_v3 takes

    def device(self, nbytes: int) -> int:
        ptr = int(check(self.rt, self.rt.cudaMalloc(max(1, int(nbytes))), "cudaMalloc"))
        self._dev.append(ptr)
        return ptr

    def pinned(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A numpy array over page-locked host memory (cudaMallocHost)."""
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        ptr = int(check(self.rt, self.rt.cudaMallocHost(max(1, nbytes)), "cudaMallocHost"))
        self._host.append(ptr)
        raw = (ctypes.c_uint8 * max(1, nbytes)).from_address(ptr)
        return np.frombuffer(raw, dtype=dt, count=nbytes // dt.itemsize).reshape(shape)

    def h2d(self, dst: int, src: int, nbytes: int, sync: bool = False) -> None:
        """Copy ``nbytes`` from host address ``src`` to device address ``dst`` (on the stream,
        or blocking with ``sync``)."""
        self._copy(dst, src, nbytes, self.rt.cudaMemcpyKind.cudaMemcpyHostToDevice, sync, "host to device")

    def d2h(self, dst: int, src: int, nbytes: int, sync: bool = False) -> None:
        self._copy(dst, src, nbytes, self.rt.cudaMemcpyKind.cudaMemcpyDeviceToHost, sync, "device to host")

    def _copy(self, dst: int, src: int, nbytes: int, kind: Any, sync: bool, what: str) -> None:
        if sync:
            check(self.rt, self.rt.cudaMemcpy(dst, src, nbytes, kind), f"cudaMemcpy ({what})")
        else:
            check(self.rt, self.rt.cudaMemcpyAsync(dst, src, nbytes, kind, self.stream),
                  f"cudaMemcpyAsync ({what})")

    def synchronize(self) -> None:
        check(self.rt, self.rt.cudaStreamSynchronize(self.stream), "cudaStreamSynchronize")

    def close(self) -> None:
        """Free everything; errors while freeing are ignored (the process is ending)."""
        rt = self.rt
        for ptr in self._dev:
            rt.cudaFree(ptr)
        for ptr in self._host:
            rt.cudaFreeHost(ptr)
        self._dev, self._host = [], []
        if self.stream is not None:
            rt.cudaStreamDestroy(self.stream)
            self.stream = None


class EventRing:
    """Four CUDA events per call (start, after the input copy, after execute, after the
    output copy), created at load for ``calls`` calls and recorded into by each call."""

    def __init__(self, rt: Any, stream: Any, calls: int = RING_CALLS):
        self.rt = rt
        self.stream = stream
        self.slots = [[check(rt, rt.cudaEventCreate(), "cudaEventCreate") for _ in range(4)]
                      for _ in range(max(1, int(calls)))]
        self.calls = 0  # calls recorded so far
        self.read: list[tuple[float, float, float]] = []  # per call: h2d, compute, d2h (ms), in call order
        self.reads_in_loop = 0

    def begin(self) -> list[Any]:
        """The events of the next call. When the ring has wrapped and the slot still holds
        an unread call, that call's times are read first (in call order)."""
        n = len(self.slots)
        i = self.calls % n
        if self.calls - n >= len(self.read):  # the slot holds call (calls - n), not read yet
            self.read.append(self._elapsed(self.slots[i]))
            self.reads_in_loop += 1
        self.calls += 1
        return self.slots[i]

    def record(self, event: Any) -> None:
        check(self.rt, self.rt.cudaEventRecord(event, self.stream), "cudaEventRecord")

    def _elapsed(self, ev: list[Any]) -> tuple[float, float, float]:
        rt = self.rt
        return tuple(float(check(rt, rt.cudaEventElapsedTime(ev[k], ev[k + 1]), "cudaEventElapsedTime"))
                     for k in range(3))  # type: ignore[return-value]

    def times(self) -> list[tuple[float, float, float]]:
        """(h2d, compute, d2h) ms of every call so far, in call order. Reads the slots not
        read yet; every recorded call has completed (each call waits for its stream)."""
        n = len(self.slots)
        for c in range(len(self.read), self.calls):  # invariant: len(read) >= calls - n
            self.read.append(self._elapsed(self.slots[c % n]))
        return list(self.read)

    def close(self) -> None:
        for slot in self.slots:
            for ev in slot:
                self.rt.cudaEventDestroy(ev)
        self.slots = []
