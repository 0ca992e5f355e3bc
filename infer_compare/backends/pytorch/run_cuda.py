"""The CUDA side of the PyTorch runners (eager and ``torch.compile``), under the GPU timing
policy every CUDA runner follows:

* ``--io device`` (default): the input is copied to the GPU before timing and the timed
  call leaves its output there; ``--io host``: the timed call starts from a pinned host
  tensor and ends with the output on the host (H2D and D2H copies inside it).
* Device time: a start and an end CUDA event per call, created (and recorded once, so
  that CUDA creates them) at load into a preallocated ring (events.py);
  the timed call only records them and waits for the end event; their elapsed times are
  read after the loop (``extra_metrics``).
* The first timed call is cold: eager rows run nothing before it. A CUDA-graph row
  (``--cuda-graphs``) captures its graph in ``load()`` (3 warm-up calls and the capture
  on a zero batch of the measured shape), so its first timed call is the first replay;
  torch.compile rows compile in ``load()`` (3 calls). The row's ``before_first_call``
  says which.
* Throughput scenario: one host thread keeps N requests in flight on N CUDA streams, each
  with its own input (and, for CUDA-graph rows, its own captured graph); see
  backends/throughput.py. torch.compile with CUDA graphs (reduce-overhead,
  max-autotune) does not take part: its graphs replay one set of static buffers.

None of this has run on the machine it was written on (no GPU there); it follows
PyTorch's documented CUDA API (torch.cuda.Event, Stream, CUDAGraph) and is checked with
fakes in tests/test_gpu.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from infer_compare.backends.pytorch import compile_caches
from infer_compare.backends.pytorch.events import RING_CALLS, TorchEventRing
from infer_compare.backends.pytorch.options import COMPILE_MODES, EagerOptions
from infer_compare.backends.pytorch.run_multi import host_tensors, on_device, to_host
from infer_compare.backends.throughput import (
    CUDA_STREAMS,
    ThroughputResult,
    ThroughputSettings,
    result,
    run_pipelined,
)
from infer_compare.base.batches import count
from infer_compare.base.errors import BackendUnavailable, RunnerError
from infer_compare.catalog import deps
from infer_compare.host import gpu_turn
from infer_compare.host.gpu import CallMeter, cuda_facts_torch

CUDA_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
WARM_CALLS = 3  # calls before a CUDA graph's capture, and torch.compile's calls in load()
DEVICES_USED: set[int] = set()  # CUDA devices this process has measured on (a resident process: several rows)


@contextmanager
def compiling_beside(torch: Any, turn: gpu_turn.Turn | None) -> Iterator[None]:
    """Where this process takes turns with another on its GPU (host/gpu_turn.py) and does not hold it (a load
    that traces first: measure/child.py defers the turn): the GPU left to the other while torch.compile traces
    and compiles (CPU work) in the block, taken when Dynamo's compilation ends, before the compiled code runs
    on the GPU (its compile-end callback), and held after the block. A turn already held stays held: the
    block's calls may run compiled code at once (a shape the dynamic graph serves). A torch without that
    callback takes it before."""
    handler = getattr(getattr(getattr(torch, "_dynamo", None), "callback", None), "callback_handler", None)
    if turn is None or turn.held:
        yield
        return
    if handler is None or not hasattr(handler, "remove_end_callback"):
        turn.acquire()
        yield
        return

    def take_back(*_: Any) -> None:
        turn.acquire()

    handler.register_end_callback(take_back)
    try:
        with turn.released():
            yield
    finally:
        if take_back in getattr(handler, "end_callbacks", [take_back]):  # torch._dynamo.reset() clears them
            handler.remove_end_callback(take_back)
        turn.acquire()


class CudaRows:
    """Mixin of PyTorchRunner: everything its CUDA rows do."""

    compiled = False
    options: Any
    device: str
    settings: dict[str, Any]
    notes: list[str]
    exec_precision: str

    def _cuda_setup(self, opts: EagerOptions):
        """Device, per-call meter and math settings of a CUDA row; the torch device."""
        import torch

        if not torch.cuda.is_available():
            raise BackendUnavailable("PyTorch sees no CUDA device", "install a CUDA build of PyTorch")
        prec = self.options.precision
        if prec not in CUDA_PRECISIONS:
            raise RunnerError(f"PyTorch on CUDA runs {', '.join(CUDA_PRECISIONS)}, not {prec}")
        dev = torch.device(self.device if ":" in self.device else "cuda:0")
        torch.cuda.set_device(dev)
        self._dev = dev
        DEVICES_USED.add(dev.index if dev.index is not None else torch.cuda.current_device())
        self.meter = CallMeter(self.device, self.options.batch_size)
        self.meter.start()
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = prec == "tf32"
        torch.backends.cudnn.benchmark = bool(opts.cudnn_benchmark)
        self._dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(prec, torch.float32)
        self._mf = torch.channels_last if opts.channels_last else torch.contiguous_format
        return dev

    def _compile(self, model, opts: EagerOptions):
        """torch.compile in the chosen mode, its caches under the tool's cache directory; (model, mode)."""
        import torch

        graphs = bool(opts.cuda_graphs)
        mode = str(getattr(opts, "compile_mode", "") or ("reduce-overhead" if graphs else "default"))
        if mode not in COMPILE_MODES:
            raise RunnerError(f"unknown torch.compile mode {mode!r} (known: {', '.join(COMPILE_MODES)})")
        if not hasattr(torch, "compile"):
            raise BackendUnavailable(f"torch.compile needs PyTorch >= 2.0 (this is {torch.__version__})",
                                     deps.hint("torch"))
        # Inductor's and Triton's on-disk caches, reused across cells and runs: the comparison sets them for
        # every process (backends/pytorch/compile_caches.py); this covers a runner used on its own
        os.environ.update(compile_caches.env_for(self.options.cache_dir))
        model = torch.compile(model, mode=None if mode == "default" else mode)
        if mode in ("reduce-overhead", "max-autotune"):
            self._mark_step = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
        return model, mode

    def _zeros(self, shape: tuple[int, ...]):
        import torch

        return torch.zeros(shape, device=self._dev, dtype=self._dtype).contiguous(memory_format=self._mf)

    def _warm_compile(self, shape: tuple[int, ...]) -> float:
        """Compile (and, for reduce-overhead, record the CUDA graph) now, on the measured shape; seconds."""
        import time

        import torch

        t0, w0 = time.perf_counter(), gpu_turn.waited()
        dummy = self._zeros(shape)
        with compiling_beside(torch, gpu_turn.current()), torch.inference_mode():
            for _ in range(WARM_CALLS):
                if self._mark_step is not None:
                    self._mark_step()
                self.model(dummy)
        torch.cuda.synchronize(self._dev)
        return round(time.perf_counter() - t0 - (gpu_turn.waited() - w0), 2)  # less any wait for the GPU

    def _capture(self, static_in) -> tuple[Any, Any]:
        """Warm up on ``static_in`` (cuDNN autotuning) and capture one call into a CUDA graph: (graph,
        output)."""
        import torch

        s = torch.cuda.Stream(self._dev)
        s.wait_stream(torch.cuda.current_stream(self._dev))
        with torch.cuda.stream(s), torch.inference_mode():
            for _ in range(WARM_CALLS):
                self.model(static_in)
        torch.cuda.current_stream(self._dev).wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g), torch.inference_mode():
            static_out = self.model(static_in)
        torch.cuda.synchronize(self._dev)
        return g, static_out

    def _measured_shape(self) -> tuple[int, ...] | None:
        dims = [int(v) for v in self.options.model.get("input_shape", ())]
        return (int(self.options.batch_size), *dims) if dims else None

    def _load_cuda(self, model) -> None:
        import torch

        opts = self.options.runner_as(EagerOptions)
        dev = self._cuda_setup(opts)
        model = model.to(dev, dtype=self._dtype)
        if opts.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self._graph = None
        self._graphs = bool(opts.cuda_graphs) and not self.compiled
        self._mark_step = None
        self._host_io = self.options.io == "host"
        mode = None
        if self.compiled:
            model, mode = self._compile(model, opts)
        self.model = model
        self.events = TorchEventRing(torch, torch.cuda.current_stream(dev))
        self._opts, self._mode, self._load_notes = opts, mode, list(self.notes)
        before = self._before_first_call(opts, mode)
        self.exec_precision = self.options.precision
        self.settings = {
            "mode": (f"torch.compile mode={mode}" if self.compiled else "eager") + ", inference_mode",
            "device": str(dev), "channels_last": bool(opts.channels_last),
            "cudnn_benchmark": bool(opts.cudnn_benchmark),
            "tf32_cudnn": torch.backends.cudnn.allow_tf32,
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "dtype": str(self._dtype).replace("torch.", ""), "cuda_graphs": bool(opts.cuda_graphs),
            "io": "host" if self._host_io else "device",
            "io_detail": ("pinned host input and output: H2D copy, model, D2H copy inside each timed call"
                          if self._host_io
                          else "device-resident input and output (copied to the GPU before timing; "
                               "no host copies in the timed call)"),
            "before_first_call": before,
            "device_events": f"torch.cuda.Event ring of {RING_CALLS} calls, created at load, "
                             "read after the loop",
            **cuda_facts_torch(self.device),
        }
        self._compile_notes(mode)

    def _before_first_call(self, opts: EagerOptions, mode: str | None,
                           reshaped_from: int | None = None) -> str:
        """Compile or capture now (load time), and say what ran before the first timed call."""
        shape = self._measured_shape()
        self._compile_s = None
        if self.compiled and shape is not None and len(shape) == 4:
            self._compile_s = self._warm_compile(shape)
            what = "compiled and recorded its CUDA graphs" if self._mark_step is not None else "compiled"
            return (f"torch.compile ({mode}) {what} in load() on {WARM_CALLS} calls "
                    "on a zero batch of the measured shape")
        if reshaped_from is not None:
            return (f"nothing at this shape: the model, loaded for batch {reshaped_from} in this process, "
                    "has not run at this batch size before the first timed call")
        if self._graphs:
            if shape is None:
                raise RunnerError("CUDA graphs are captured at load on the measured shape, and this model "
                                  "does not declare its input shape")
            self._static_in = self._zeros(shape)
            self._graph, self._static_out = self._capture(self._static_in)
            self.notes.append(f"eager model captured into a CUDA graph in load() ({WARM_CALLS} warm-up calls "
                              "and the capture on a zero batch, inside the load time); each timed call is "
                              "one replay, the first timed call the first replay")
            return (f"CUDA graph captured in load(): {WARM_CALLS} warm-up calls "
                    "and the capture on a zero batch")
        return "nothing: the model has not run before the first timed call"

    def _cuda_rebatch(self, batch_size: int) -> bool:
        """The next batch size on the loaded model, its weights left on the GPU: a fresh meter and event
        ring; torch.compile compiles for the new shape now (its load time). False (reload) for rows with
        CUDA graphs, which are captured per shape."""
        import torch

        if self._graphs or self._mark_step is not None:
            return False
        before = int(self.options.batch_size)
        self.options.batch_size = int(batch_size)
        self.meter.close()
        self.meter = CallMeter(self.device, self.options.batch_size)
        self.meter.start()
        self.events = TorchEventRing(torch, torch.cuda.current_stream(self._dev))
        self.notes = list(self._load_notes)
        self.settings["before_first_call"] = self._before_first_call(self._opts, self._mode,
                                                                     reshaped_from=before)
        self._compile_notes(self._mode)
        return True

    def _compile_notes(self, mode: str | None) -> None:
        if self._compile_s is None:
            return
        self.settings["compile_s"] = self._compile_s
        self.settings["compile_cache"] = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "torch's default")
        self.notes.append(f"torch.compile ({mode}) took {self._compile_s} s on the measured batch shape "
                          "(Inductor cache reused where it had this graph); it is part of load time, before "
                          "the first call")

    # ------------------------------------------------------------------ inference
    def _place(self, x, pinned: bool = False):
        """A CPU tensor (a tuple of them: several inputs) on the GPU, or pinned on the host: floating inputs
        in the row's dtype, 4-D ones in its memory format; integer inputs (ids) keep their dtype."""
        if isinstance(x, tuple):
            return tuple(self._place(t, pinned) for t in x)
        dtype = self._dtype if x.is_floating_point() else x.dtype
        mf = self._mf if x.dim() == 4 else self._torch.contiguous_format
        if pinned:
            return x.to(dtype).contiguous(memory_format=mf).pin_memory()
        return x.to(self._dev, dtype=dtype).contiguous(memory_format=mf)

    def _cuda_prepare(self, x):
        """``x`` (a CPU tensor, or a tuple of them) as the timed call takes it: pinned on the host (--io
        host), else on the GPU."""
        torch = self._torch
        if self._host_io:
            return self._place(x, pinned=True)
        x = self._place(x)
        if self._graph is not None and isinstance(x, tuple):
            raise RunnerError("CUDA graphs are captured for a model with one input")
        if self._graph is not None:
            if tuple(x.shape) != tuple(self._static_in.shape):
                raise RunnerError(f"CUDA graph captured for shape {tuple(self._static_in.shape)}, "
                                  f"got {tuple(x.shape)}")
            self._static_in.copy_(x)
            x = self._static_in
        torch.cuda.synchronize(self._dev)
        return x

    def _cuda_run(self, prepared: Any) -> Any:
        start, end = self.events.begin()
        start.record()
        out = self._forward(prepared)
        end.record()
        end.synchronize()
        self.meter.after_call()  # counts the call (energy window); event times are read after the loop
        return out

    def _forward(self, prepared: Any, graph: Any = None, static: tuple[Any, Any] | None = None) -> Any:
        """One call on the current stream: (H2D), the model or the graph's replay, (D2H)."""
        graph = graph if graph is not None else self._graph
        if graph is not None:
            static_in, static_out = static or (self._static_in, self._static_out)
            if self._host_io:
                static_in.copy_(prepared, non_blocking=True)
            graph.replay()
            out = static_out
        else:
            x = on_device(prepared, self._dev) if self._host_io else prepared
            if self._mark_step is not None:
                self._mark_step()
            with self._torch.inference_mode():
                out = self.model(*x) if isinstance(x, tuple) else self.model(x)  # several inputs: a tuple
        return to_host(out) if self._host_io else out

    def _cuda_metrics(self) -> dict[str, Any]:
        torch = self._torch
        rows = self.events.times()[1:]  # the first call is cold: left out, as CallMeter does
        self.meter.stages = {"device": rows} if rows else {}
        m = self.meter.metrics(peak_allocated_mib=torch.cuda.max_memory_allocated(self._dev) / 2**20)
        m["event_reads_in_loop"] = self.events.reads_in_loop
        note = self.meter.note(m)
        if note:
            self.notes.append(note)
        return m

    # ------------------------------------------------------------------ throughput scenario
    def _cuda_throughput(self, batch: np.ndarray, s: ThroughputSettings) -> ThroughputResult:
        """N CUDA streams, one request in flight on each, from one host thread."""
        torch = self._torch
        if self.compiled and self._mark_step is not None:
            raise BackendUnavailable("the throughput scenario is not measured for torch.compile with CUDA "
                                     "graphs: its graphs replay one set of static buffers, which concurrent "
                                     "streams would share, and torch.compile is not thread-safe; the latency "
                                     "row's img/s is its throughput")
        n = max(1, int(s.concurrency or CUDA_STREAMS))
        x = host_tensors(torch, batch)
        slots = [self._slot(x) for _ in range(n)]
        done = [torch.cuda.Event() for _ in range(n)]
        torch.cuda.synchronize(self._dev)

        def start(i: int) -> Any:
            stream, inp, graph, static = slots[i]
            with torch.cuda.stream(stream):
                out = self._forward(inp, graph, static)
                done[i].record(stream)
            return out

        def wait(i: int) -> None:
            done[i].synchronize()

        w = run_pipelined(n, start, wait, count(batch), s)
        out = self.to_numpy(w.last)
        how = (f"PyTorch: {n} CUDA streams, one request in flight on each, from one host thread"
               + ("; a CUDA graph captured per stream" if self._graph is not None else "")
               + f"; io {'host' if self._host_io else 'device'}")
        return result(w, n, "streams", how, {"cuda_streams": n}, outputs=out)

    def _slot(self, x) -> tuple[Any, Any, Any, Any]:
        """(stream, its own input, its own graph or None, (static in, static out) or None)."""
        torch = self._torch
        stream = torch.cuda.Stream(self._dev)
        dev_in = self._place(x)
        inp = self._place(x, pinned=True) if self._host_io else dev_in
        if self._graph is None:
            return stream, inp, None, None
        graph, static_out = self._capture(dev_in)
        return stream, inp, graph, (dev_in, static_out)
