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

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import deps
from ...batches import Batch
from ...errors import BackendUnavailable, RunnerError
from ...gpu import device_index
from ...records import Availability
from ..runner import Runner
from ..throughput import CUDA_STREAMS, ThroughputResult, ThroughputSettings, result, run_pipelined
from .common import TrtLog, trt_status
from .device import HINT as CUDA_HINT
from .device import CudaBuffers, EventRing, cudart_status, device_facts
from .layers import exec_precision, summarize

if TYPE_CHECKING:  # the annotations below are checked against tensorrt-stubs
    import tensorrt as trt

PRECISIONS = ("fp32", "tf32", "fp16", "int8")


@dataclass
class Slot:
    """One execution context with its own stream and buffers."""

    context: Any
    cuda: CudaBuffers
    h_in: np.ndarray
    h_out: np.ndarray
    d_in: int
    d_out: int

    def load(self, x: np.ndarray, device: bool) -> None:
        """``x`` into the pinned input (and, for device-resident I/O, on to the GPU)."""
        np.copyto(self.h_in, x)
        if device:
            self.cuda.h2d(self.d_in, int(self.h_in.ctypes.data), self.h_in.nbytes, sync=True)

    def enqueue(self, host_io: bool, log: Any) -> None:
        """(H2D,) execute, (D2H) on this slot's stream; returns at once."""
        if host_io:
            self.cuda.h2d(self.d_in, int(self.h_in.ctypes.data), self.h_in.nbytes)
        if not self.context.execute_async_v3(self.cuda.handle):
            raise RunnerError(f"execute_async_v3 failed: {log.tail()}")
        if host_io:
            self.cuda.d2h(int(self.h_out.ctypes.data), self.d_out, self.h_out.nbytes)

    def close(self) -> None:
        self.cuda.synchronize()
        del self.context  # before the memory it uses
        self.cuda.close()


def _dims(d: Any) -> tuple[int, ...]:
    """TensorRT Dims -> tuple of ints (Dims has __len__/__getitem__)."""
    return tuple(int(d[i]) for i in range(len(d)))


def numpy_dtype(dt: trt.DataType) -> Any:
    import tensorrt as trt

    table = {trt.DataType.FLOAT: np.float32, trt.DataType.HALF: np.float16, trt.DataType.INT8: np.int8,
             trt.DataType.INT32: np.int32, trt.DataType.INT64: np.int64, trt.DataType.BOOL: np.bool_,
             trt.DataType.UINT8: np.uint8}
    if dt not in table:
        raise RunnerError(f"engine input/output of type {dt}: this runner feeds and reads numpy types only "
                          "(float32, float16, integers)")
    return table[dt]


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
        from ...gpu import CallMeter

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
            "io_detail": ("pinned host input and output: H2D copy + execute + D2H copy inside each timed call "
                          "(as trtexec's end-to-end time)") if self._host_io else
                         "device-resident input and output (copied to the GPU before timing; no host copies in the "
                         "timed call)",
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
            raise RunnerError(f"TensorRT could not deserialize {self.artifact} (built by another TensorRT version "
                              f"or for another GPU?): {self._log.tail()}")
        self.engine = engine
        # allocate the context's memory for the profile it selects, not for the largest one
        context = engine.create_execution_context(trt.ExecutionContextAllocationStrategy.ON_PROFILE_CHANGE)
        if context is None:
            raise RunnerError(f"TensorRT could not create an execution context: {self._log.tail()}")
        self.context = context

    def _bind_io(self) -> None:
        import tensorrt as trt

        engine = self.engine
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        outputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]
        if len(inputs) != 1 or len(outputs) != 1:
            raise BackendUnavailable(f"TensorRT rows measure one input and one output so far; the engine has "
                                     f"inputs {', '.join(inputs)} and outputs {', '.join(outputs)}",
                                     "ONNX Runtime (its TensorRT EP too), OpenVINO and PyTorch rows measure every "
                                     "input and output")
        inp, out = inputs[0], outputs[0]
        b = int(self.options.batch_size)
        shapes = [[_dims(d) for d in engine.get_tensor_profile_shape(inp, i)]
                  for i in range(engine.num_optimization_profiles)]
        idx, note = pick_profile([(s[0][0], s[1][0], s[2][0]) for s in shapes], b)
        if idx < 0:
            raise BackendUnavailable(f"{note} (the engine is built for the batch sizes of the run that built it)")
        if note:
            self.notes.append(note)
        self._io_names, self._profile_index, self._shape = (inp, out), idx, (b, *shapes[idx][1][1:])
        self.slot = self._bind(self.context, self.cuda)
        self.h_in, self.h_out, self.d_in, self.d_out = self.slot.h_in, self.slot.h_out, self.slot.d_in, self.slot.d_out
        self._h_in_ptr, self._h_out_ptr = int(self.h_in.ctypes.data), int(self.h_out.ctypes.data)
        mn, opt, mx = shapes[idx][0][0], shapes[idx][1][0], shapes[idx][2][0]
        self.profile: dict[str, Any] = {"index": idx, "of": len(shapes), "min": mn, "opt": opt, "max": mx,
                        "tuned_for_this_batch": opt == b, "input": inp, "output": out,
                        "input_dtype": str(self.h_in.dtype), "output_dtype": str(self.h_out.dtype)}

    def _bind(self, context: trt.IExecutionContext, cuda: CudaBuffers) -> Slot:
        """``context`` on the selected profile and shape, with its own pinned and device buffers on ``cuda``."""
        (inp, out), idx, shape = self._io_names, self._profile_index, self._shape
        if not context.set_optimization_profile_async(idx, cuda.handle):
            raise RunnerError(f"set_optimization_profile_async({idx}) failed: {self._log.tail()}")
        cuda.synchronize()
        if not context.set_input_shape(inp, list(shape)):
            raise RunnerError(f"set_input_shape({shape}) failed: {self._log.tail()}")
        out_shape = _dims(context.get_tensor_shape(out))
        h_in = cuda.pinned(shape, numpy_dtype(self.engine.get_tensor_dtype(inp)))
        h_out = cuda.pinned(out_shape, numpy_dtype(self.engine.get_tensor_dtype(out)))
        d_in, d_out = cuda.device(h_in.nbytes), cuda.device(h_out.nbytes)
        if not (context.set_tensor_address(inp, d_in) and context.set_tensor_address(out, d_out)):
            raise RunnerError(f"set_tensor_address failed: {self._log.tail()}")
        return Slot(context, cuda, h_in, h_out, d_in, d_out)

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
        if isinstance(batch, dict):  # a model with several inputs, and an engine with one
            raise BackendUnavailable(f"TensorRT rows measure one input and one output so far; the model has "
                                     f"{len(batch)} inputs ({', '.join(batch)})")
        x = np.ascontiguousarray(batch, dtype=self.h_in.dtype)
        if tuple(x.shape) != tuple(self.h_in.shape):
            raise RunnerError(f"the runner was loaded for input {tuple(self.h_in.shape)}, got {tuple(x.shape)}")
        np.copyto(self.h_in, x)
        if not self._host_io:
            self.cuda.h2d(self.d_in, self._h_in_ptr, self.h_in.nbytes, sync=True)
        return self.h_in

    def run(self, prepared: Any) -> Any:
        cuda, ev, record = self.cuda, self.events.begin(), self.events.record
        record(ev[0])
        if self._host_io:
            cuda.h2d(self.d_in, self._h_in_ptr, self.h_in.nbytes)
        record(ev[1])
        if not self.context.execute_async_v3(cuda.handle):
            raise RunnerError(f"execute_async_v3 failed: {self._log.tail()}")
        record(ev[2])
        if self._host_io:
            cuda.d2h(self._h_out_ptr, self.d_out, self.h_out.nbytes)
        record(ev[3])
        cuda.synchronize()
        self.meter.after_call()  # counts the call (energy window); event times are read after the loop
        return self.h_out if self._host_io else "device"

    def to_numpy(self, outputs: Any) -> np.ndarray:
        if not self._host_io:
            self.cuda.d2h(self._h_out_ptr, self.d_out, self.h_out.nbytes, sync=True)
        return np.array(self.h_out, dtype=np.float32)

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
                ctx = self.engine.create_execution_context(trt.ExecutionContextAllocationStrategy.ON_PROFILE_CHANGE)
                if ctx is None:
                    raise RunnerError(f"TensorRT could not create execution context #{len(extra) + 2}: "
                                      f"{self._log.tail()}")
                extra.append(self._bind(ctx, CudaBuffers(self._rt, device_index(self.device))))
            slots = [self.slot, *extra]
            x = np.ascontiguousarray(batch, dtype=self.h_in.dtype)
            for sl in slots:
                sl.load(x, device=not self._host_io)
            w = run_pipelined(n, lambda i: slots[i].enqueue(self._host_io, self._log),
                              lambda i: slots[i].cuda.synchronize(), len(batch), settings)
            out = self.to_numpy(self.h_out)
        finally:
            for sl in extra:
                sl.close()
        how = (f"TensorRT: {n} execution contexts of one engine, each with its own CUDA stream and buffers, from one "
               f"host thread (trtexec --infStreams); io {'host' if self._host_io else 'device'}")
        return result(w, n, "streams", how, {"execution_contexts": n}, outputs=out)
