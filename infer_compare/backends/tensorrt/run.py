"""TensorRT: a serialized engine run with the tensor API (``set_optimization_profile_async``,
``set_input_shape``, ``set_tensor_address``, ``execute_async_v3``) on a CUDA stream.

GPU memory, the stream and the timing events come from cuda-python's low-level
runtime bindings (device.py), not PyTorch, so TensorRT rows also run in a torch-free
bundle (``infer-compare run`` on a Jetson).

Profiles: the exporter builds one optimization profile per measured batch; the runner
selects the profile whose opt batch is its own (``settings["profile"]`` says which,
and whether it was tuned for this batch). An engine with one profile for a range of
batches still runs, with a note that its kernels were tuned for another batch.

The GPU timing policy (``--io``, every CUDA runner alike): ``device`` (default) keeps
input and output device-resident (the input is copied to the GPU before timing), so a
timed call is execute + wait; ``host`` makes each timed call what ``trtexec`` times end
to end: copy the input from pinned host memory to the GPU, execute, copy the output
back, and wait. CUDA events recorded on the stream split it into ``h2d_ms_*``,
``compute_ms_*``, ``d2h_ms_*`` and ``device_ms_*`` (their sum) in the row's ``extra``
(``"timing": "cuda events"``); the events are created at load and read after the
measured loop (device.EventRing). The row's latency is the host clock around the whole
call. Nothing executes before the first timed call.

Throughput scenario: N execution contexts of the one engine (TensorRT 10 shares an
optimization profile across contexts: PreviewFeature.PROFILE_SHARING_0806 is on by
default), each with its own stream and buffers, kept busy from one host thread, as
``trtexec --infStreams=N`` does.

The precision each layer runs comes from IEngineInspector (layers.py): ``exec_precision``
names the precisions of the convolution and matmul layers (e.g. ``int8+fp32``) and
``extra["tensorrt_layers"]`` has the counts.

TensorRT itself has never run on the machines this was written on (no full TensorRT
wheel reaches them): the code follows TensorRT's documented Python API, is
type-checked against tensorrt-stubs 10.13, and every TensorRT name it uses is checked
against the names bound in TensorRT 11.4's bindings (tests/test_tensorrt_static.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from infer_compare.backends.runner import Runner
from infer_compare.backends.tensorrt.bindings import Slot, bind, input_shapes, io_names, profile_ranges
from infer_compare.backends.tensorrt.common import TrtLog, trt_status
from infer_compare.backends.tensorrt.device import HINT as CUDA_HINT
from infer_compare.backends.tensorrt.device import CudaBuffers, EventRing, cudart_status, device_facts
from infer_compare.backends.tensorrt.layers import exec_precision, summarize
from infer_compare.backends.throughput import (
    CUDA_STREAMS,
    ThroughputResult,
    ThroughputSettings,
    result,
    run_pipelined,
)
from infer_compare.base.batches import Batch, arrays_for, count
from infer_compare.base.errors import BackendUnavailable, RunnerError
from infer_compare.base.records import Availability
from infer_compare.catalog import deps
from infer_compare.host.gpu import CallMeter, device_index

if TYPE_CHECKING:  # the annotations below are checked against tensorrt-stubs
    import tensorrt as trt

PRECISIONS = ("fp32", "tf32", "fp16", "int8")


def pick_profile(profiles: list[tuple[int, int, int]], batch: int) -> tuple[int, str]:
    """(index of the profile whose opt batch is ``batch`` -- else the first whose range
    holds it, with a note -- or -1 with the reason)."""
    for i, (_, opt, _) in enumerate(profiles):
        if opt == batch:
            return i, ""
    for i, (mn, opt, mx) in enumerate(profiles):
        if mn <= batch <= mx:
            return i, (f"no optimization profile is tuned for batch {batch}: profile {i} (batch {mn}..{mx}, "
                       f"tuned for {opt}) runs it")
    ranges = ", ".join(f"{mn}..{mx}" for mn, _, mx in profiles)
    return -1, f"the engine's optimization profiles cover batch {ranges}, not {batch}"


class TensorRTRunner(Runner):
    name = "tensorrt"

    @classmethod
    def probe(cls, device: str = "cpu") -> Availability:
        if not device.startswith("cuda"):
            return Availability(False, "TensorRT runs on NVIDIA GPUs only")
        trt, why, v = trt_status()
        if trt is None:
            return Availability(False, why, deps.hint("tensorrt"), version=v)
        rt, why = cudart_status()
        if rt is None:
            return Availability(False, f"the TensorRT runner takes GPU memory, its stream and events from "
                                       f"cuda-python: {why}", CUDA_HINT, version=v)
        return Availability(True, version=v, devices=(device,))

    @classmethod
    def supports(cls, fmt: str, precision: str, device: str) -> Availability:
        if precision not in PRECISIONS:
            return Availability(False, f"TensorRT engines here are {', '.join(PRECISIONS)}, not {precision}")
        return Availability(True)

    # ------------------------------------------------------------------ lifecycle
    def load(self) -> None:
        trt, why, v = trt_status()
        if trt is None:
            raise BackendUnavailable(why, deps.hint("tensorrt"))
        rt, why = cudart_status()
        if rt is None:
            raise BackendUnavailable(why, CUDA_HINT)
        self._version = str(v)
        self.meter = CallMeter(self.device, self.options.batch_size)
        self.meter.start()
        self.cuda = CudaBuffers(rt, device_index(self.device))
        self._log = TrtLog()
        self._deserialize()
        self._bind_io()
        self.events = EventRing(rt, self.cuda.stream)
        self._inspect()
        self._rt, self._host_io = rt, self.options.io == "host"
        self.settings = {
            "api": "tensor API: set_optimization_profile_async + set_input_shape + set_tensor_address + "
                   "execute_async_v3 on a CUDA stream (memory, stream and events: cuda-python)",
            "io": "host" if self._host_io else "device",
            "io_detail": ("pinned host input and output: H2D copy + execute + D2H copy inside each "
                          "timed call (as trtexec's end-to-end time)") if self._host_io else
                         "device-resident input and output (copied to the GPU before timing; no host "
                         "copies in the timed call)",
            "before_first_call": "nothing: the engine has not executed before the first timed call",
            "profile": self.profile,
            "device_memory_mib": self._device_memory_mib(),
            **device_facts(rt, device_index(self.device)),
        }

    def _deserialize(self) -> None:
        import tensorrt as trt

        self.runtime = trt.Runtime(self._log.logger)
        engine = self.runtime.deserialize_cuda_engine(Path(self.artifact).read_bytes())
        if engine is None:
            raise RunnerError(f"TensorRT could not deserialize {self.artifact} (built by another TensorRT "
                              f"version or for another GPU?): {self._log.tail()}")
        self.engine = engine
        # allocate the context's memory for the profile it selects, not for the largest one
        context = engine.create_execution_context(trt.ExecutionContextAllocationStrategy.ON_PROFILE_CHANGE)
        if context is None:
            raise RunnerError(f"TensorRT could not create an execution context: {self._log.tail()}")
        self.context = context

    def _bind_io(self) -> None:
        """Every input and output by name (bindings.py), on the profile tuned for the cell's batch."""
        engine, b = self.engine, int(self.options.batch_size)
        inputs, outputs = io_names(engine)
        first, ranges = profile_ranges(engine, inputs)
        idx, note = pick_profile(ranges, b)
        if idx < 0:
            raise BackendUnavailable(f"{note} (the engine is built for the batch sizes of the run "
                                     "that built it)")
        if note:
            self.notes.append(note)
        self._inputs, self._outputs, self._profile_index = inputs, outputs, idx
        self._shapes = input_shapes(engine, inputs, idx, b)
        self.slot = self._bind(self.context, self.cuda)
        mn, opt, mx = ranges[idx]
        self.profile: dict[str, Any] = {
            "index": idx, "of": len(ranges), "min": mn, "opt": opt, "max": mx,
            "tuned_for_this_batch": opt == b,
            "input": first if len(inputs) == 1 else inputs,
            "output": outputs[0] if len(outputs) == 1 else outputs,
            "input_dtype": str(self.slot.ins[0].host.dtype),
            "output_dtype": str(self.slot.outs[0].host.dtype)}
        if len(inputs) > 1 or len(outputs) > 1:
            self.profile["shapes"] = {x.name: [*x.host.shape] for x in self.slot.ins + self.slot.outs}
            self.profile["matched"] = "inputs and outputs by name (the engine keeps the ONNX names)"

    def _bind(self, context: trt.IExecutionContext, cuda: CudaBuffers) -> Slot:
        """``context`` on the selected profile and shapes, with its own pinned and device buffers on
        ``cuda``."""
        return bind(self.engine, context, cuda, self._profile_index, self._shapes, self._outputs, self._log)

    def _device_memory_mib(self) -> float | None:
        e, idx = self.engine, int(self.profile["index"])
        if hasattr(e, "get_device_memory_size_for_profile_v2"):
            return round(int(e.get_device_memory_size_for_profile_v2(idx)) / 2**20, 1)
        if hasattr(e, "device_memory_size_v2"):
            return round(int(e.device_memory_size_v2) / 2**20, 1)
        return None

    def _inspect(self) -> None:
        """What each layer runs, for the selected profile (the inspector sees the context's shapes)."""
        import tensorrt as trt

        prec = self.options.precision
        try:
            inspector = self.engine.create_engine_inspector()
            inspector.execution_context = self.context
            summary = summarize(inspector.get_engine_information(trt.LayerInformationFormat.JSON))
        except Exception as e:  # the layer report must not fail the row
            summary = {"layer_info": f"IEngineInspector failed: {type(e).__name__}: {e}"}
        self.layer_summary = summary
        self.exec_precision = exec_precision(summary, prec)
        if not (summary.get("heavy_layer_precisions") or summary.get("layer_precisions")):
            self.notes.append(f"TensorRT's inspector named no layer precision ({summary.get('layer_info')}); "
                              "the row repeats the requested precision")
        elif prec == "tf32" and "tf32" not in self.exec_precision:
            self.notes.append("TF32 was allowed at build, but no tactic of a convolution/matmul names tf32")

    def close(self) -> None:
        for attr in ("slot", "context", "engine", "runtime"):  # TensorRT objects before the memory they use
            if hasattr(self, attr):
                delattr(self, attr)
        for attr in ("events", "cuda", "meter"):
            obj = getattr(self, attr, None)
            if obj is not None:
                obj.close()

    # ------------------------------------------------------------------ inference
    def prepare(self, batch: Batch) -> Any:
        """Each input by name (by position where the names differ) into its pinned buffer; on the GPU
        for device-resident I/O."""
        try:
            arrays = arrays_for(self._inputs, batch)
        except ValueError as e:
            raise RunnerError(str(e)) from None
        xs = []
        for buf, a in zip(self.slot.ins, arrays, strict=True):
            x = (np.ascontiguousarray(a, dtype=buf.host.dtype) if np.ndim(a)
                 else np.array(a, dtype=buf.host.dtype))
            if tuple(x.shape) != tuple(buf.host.shape):
                raise RunnerError(f"the runner was loaded for input '{buf.name}' {tuple(buf.host.shape)}, "
                                  f"got {tuple(x.shape)}")
            xs.append(x)
        self.slot.load(xs, device=not self._host_io)
        return self.slot

    def run(self, prepared: Any) -> Any:
        cuda, slot, ev, record = self.cuda, self.slot, self.events.begin(), self.events.record
        record(ev[0])
        if self._host_io:
            slot.h2d()
        record(ev[1])
        if not self.context.execute_async_v3(cuda.handle):
            raise RunnerError(f"execute_async_v3 failed: {self._log.tail()}")
        record(ev[2])
        if self._host_io:
            slot.d2h()
        record(ev[3])
        cuda.synchronize()
        self.meter.after_call()  # counts the call (energy window); event times are read after the loop
        return slot if self._host_io else "device"

    def to_numpy(self, outputs: Any) -> Any:
        """float32 copies of the outputs; several: {output name: array} (the ONNX names)."""
        if not self._host_io:
            self.slot.d2h(sync=True)
        outs = self.slot.outs
        if len(outs) == 1:
            return np.array(outs[0].host, dtype=np.float32)
        return {b.name: np.array(b.host, dtype=np.float32) for b in outs}

    def extra_metrics(self) -> dict[str, Any]:
        rows = self.events.times()[1:]  # the first call is cold: left out, as CallMeter does
        stages = ("h2d", "compute", "d2h") if self._host_io else ("compute",)
        self.meter.stages = {s: [r[("h2d", "compute", "d2h").index(s)] for r in rows] for s in stages}
        self.meter.stages["device"] = [sum(r) for r in rows]
        if not rows:
            self.meter.stages = {}
        m = self.meter.metrics()
        m.update(tensorrt_layers=self.layer_summary, event_reads_in_loop=self.events.reads_in_loop,
                 profile=self.profile)
        note = self.meter.note(m)
        if note:
            self.notes.append(note)
        return m

    def library_versions(self) -> dict[str, str]:
        return {"tensorrt": self._version, "cuda-bindings": deps.version("cuda.bindings") or "?"}

    # ------------------------------------------------------------------ throughput scenario
    def throughput(self, batch: Batch, settings: ThroughputSettings) -> ThroughputResult:
        """N contexts, each with its own stream and buffers, from one host thread (trtexec --infStreams)."""
        import tensorrt as trt

        n = max(1, int(settings.concurrency or CUDA_STREAMS))
        extra: list[Slot] = []
        try:
            for _ in range(n - 1):
                ctx = self.engine.create_execution_context(
                    trt.ExecutionContextAllocationStrategy.ON_PROFILE_CHANGE)
                if ctx is None:
                    raise RunnerError(f"TensorRT could not create execution context #{len(extra) + 2}: "
                                      f"{self._log.tail()}")
                extra.append(self._bind(ctx, CudaBuffers(self._rt, device_index(self.device))))
            slots = [self.slot, *extra]
            self.prepare(batch)  # every input by name into the first slot, then copied to the others
            xs = [np.array(b.host) for b in self.slot.ins]
            for sl in extra:
                sl.load(xs, device=not self._host_io)
            w = run_pipelined(n, lambda i: slots[i].enqueue(self._host_io, self._log),
                              lambda i: slots[i].cuda.synchronize(), count(batch), settings)
            out = self.to_numpy(None)
        finally:
            for sl in extra:
                sl.close()
        how = (f"TensorRT: {n} execution contexts of one engine, each with its own CUDA stream and buffers, "
               f"from one host thread (trtexec --infStreams); io {'host' if self._host_io else 'device'}")
        return result(w, n, "streams", how, {"execution_contexts": n}, outputs=out)
