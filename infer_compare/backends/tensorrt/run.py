"""TensorRT: a serialized engine run with the TensorRT >= 8.5 tensor API
(``set_input_shape``, ``set_tensor_address``, ``execute_async_v3``) on a CUDA stream.

Each timed call does what ``trtexec`` times end to end: copy the input from pinned host
memory to the GPU, execute, copy the output back, and wait. CUDA events on the stream
split it into host-to-device, compute and device-to-host times, reported in the row's
``extra`` as ``h2d_ms_*``, ``compute_ms_*``, ``d2h_ms_*`` and ``device_ms_*`` (their sum)
with ``"timing": "cuda events"``; the row's latency is the host clock around the whole
call. Set the runner option ``io`` to ``device`` to leave the copies out of the timed
call (device-resident input and output, like the PyTorch and ONNX Runtime CUDA rows).

GPU memory and the stream come from PyTorch's CUDA API (a dependency of every GPU host
this tool supports; documented in docs/gpu.md); TensorRT itself needs no other CUDA
binding.

Nothing here ran on a machine with TensorRT while it was written (none was
available); it is written against TensorRT's documented Python API and type-checked
with ``tensorrt-stubs`` (tests/test_tensorrt_static.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ... import deps
from ...errors import BackendUnavailable, RunnerError
from ...records import Availability
from ..runner import Runner
from .options import TensorRTOptions


def _dims(d: Any) -> tuple[int, ...]:
    """TensorRT Dims -> tuple of ints (Dims has __len__/__getitem__)."""
    return tuple(int(d[i]) for i in range(len(d)))


def _torch_dtype(trt_dtype: Any) -> Any:
    import tensorrt as trt
    import torch

    table = {trt.DataType.FLOAT: torch.float32, trt.DataType.HALF: torch.float16, trt.DataType.INT8: torch.int8,
             trt.DataType.INT32: torch.int32, trt.DataType.BOOL: torch.bool}
    if hasattr(trt.DataType, "BF16"):
        table[trt.DataType.BF16] = torch.bfloat16
    if hasattr(trt.DataType, "INT64"):
        table[trt.DataType.INT64] = torch.int64
    if trt_dtype not in table:
        raise RunnerError(f"unsupported TensorRT tensor type {trt_dtype}")
    return table[trt_dtype]


class TensorRTRunner(Runner):
    name = "tensorrt"

    @classmethod
    def probe(cls, device: str = "cpu") -> Availability:
        from .common import trt_status

        if not device.startswith("cuda"):
            return Availability(False, "TensorRT runs on NVIDIA GPUs only")
        trt, why, v = trt_status()
        if trt is None:
            return Availability(False, why, deps.hint("tensorrt"), version=v)
        if not deps.has("torch"):
            return Availability(False, "the TensorRT runner allocates GPU memory and streams through PyTorch",
                                deps.hint("torch"), version=v)
        return Availability(True, version=v, devices=(device,))

    @classmethod
    def supports(cls, fmt: str, precision: str, device: str) -> Availability:
        if precision not in ("fp32", "tf32", "fp16", "int8"):
            return Availability(False, f"TensorRT engines here are fp32, tf32, fp16 or int8, not {precision}")
        return Availability(True)

    def load(self) -> None:
        import tensorrt as trt
        import torch

        from ...gpu import CallMeter, cuda_facts_torch, device_index
        from .common import _Log, trt_status

        mod, why, _ = trt_status()
        if mod is None:
            raise BackendUnavailable(why, deps.hint("tensorrt"))
        if not torch.cuda.is_available():
            raise BackendUnavailable("PyTorch sees no CUDA device (the TensorRT runner uses it for memory)")
        self._torch = torch
        self._dev = torch.device(f"cuda:{device_index(self.device)}")
        torch.cuda.set_device(self._dev)
        self.meter = CallMeter(self.device, self.options.batch_size)
        self.meter.start()
        self._log = _Log()
        self.runtime = trt.Runtime(self._log.logger)
        engine = self.runtime.deserialize_cuda_engine(Path(self.artifact).read_bytes())
        if engine is None:
            raise RunnerError(f"TensorRT could not deserialize {self.artifact} (built by another TensorRT version "
                              f"or for another GPU?): {self._log.tail()}")
        self.engine = engine
        context = engine.create_execution_context()
        if context is None:
            raise RunnerError(f"TensorRT could not create an execution context: {self._log.tail()}")
        self.context = context
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        outputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]
        if len(inputs) != 1 or len(outputs) != 1:
            raise RunnerError(f"expected one input and one output, the engine has {inputs} -> {outputs}")
        self.input_name, self.output_name = inputs[0], outputs[0]
        b = int(self.options.batch_size)
        chw = tuple(int(v) for v in self.options.model.get("input_shape", ()))
        if not chw:
            chw = _dims(engine.get_tensor_shape(self.input_name))[1:]
        shape = (b, *chw)
        mn, _opt, mx = engine.get_tensor_profile_shape(self.input_name, 0)
        if not (int(mn[0]) <= b <= int(mx[0])):
            raise BackendUnavailable(f"the engine's profile covers batch {int(mn[0])}..{int(mx[0])}, not {b} "
                                     "(rebuild with a larger --batch-sizes maximum)")
        if not context.set_input_shape(self.input_name, list(shape)):
            raise RunnerError(f"set_input_shape({shape}) failed: {self._log.tail()}")
        out_shape = _dims(context.get_tensor_shape(self.output_name))
        in_dt = _torch_dtype(engine.get_tensor_dtype(self.input_name))
        out_dt = _torch_dtype(engine.get_tensor_dtype(self.output_name))
        self.d_in = torch.empty(shape, dtype=in_dt, device=self._dev)
        self.d_out = torch.empty(out_shape, dtype=out_dt, device=self._dev)
        self.h_in = torch.empty(shape, dtype=in_dt, pin_memory=True)
        self.h_out = torch.empty(out_shape, dtype=out_dt, pin_memory=True)
        context.set_tensor_address(self.input_name, int(self.d_in.data_ptr()))
        context.set_tensor_address(self.output_name, int(self.d_out.data_ptr()))
        self.stream = torch.cuda.Stream(self._dev)
        self._ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        self._np_in = np.float16 if in_dt == torch.float16 else np.float32
        self._host_io = self.options.runner_as(TensorRTOptions).io == "host"
        prec = self.options.precision
        self.exec_precision = {"int8": "int8+fp16"}.get(prec, prec)
        self.settings = {
            "api": "tensor API: set_input_shape + set_tensor_address + execute_async_v3 on a CUDA stream",
            "io": ("pinned host input and output: H2D copy + execute + D2H copy inside each timed call "
                   "(as trtexec's end-to-end time)") if self._host_io else
                  "device-resident input and output (no host copies in the timed call)",
            "profile_batch": [int(mn[0]), int(mx[0])],
            "device_memory_mib": round(int(engine.device_memory_size) / 2**20, 1),
            **cuda_facts_torch(self.device),
        }
        self._version = str(trt.__version__)

    def close(self) -> None:
        meter = getattr(self, "meter", None)
        if meter is not None:
            meter.close()
        for attr in ("context", "engine", "runtime"):
            if hasattr(self, attr):
                delattr(self, attr)

    def prepare(self, batch: np.ndarray) -> Any:
        torch = self._torch
        x = np.ascontiguousarray(batch, dtype=self._np_in)
        if tuple(x.shape) != tuple(self.h_in.shape):
            raise RunnerError(f"the runner was loaded for input {tuple(self.h_in.shape)}, got {tuple(x.shape)}")
        self.h_in.copy_(torch.from_numpy(x))
        if not self._host_io:
            self.d_in.copy_(self.h_in)
            torch.cuda.synchronize(self._dev)
        return self.h_in

    def run(self, prepared: Any) -> Any:
        torch = self._torch
        e0, e1, e2, e3 = self._ev
        s = self.stream
        with torch.cuda.stream(s):
            e0.record(s)
            if self._host_io:
                self.d_in.copy_(prepared, non_blocking=True)
            e1.record(s)
            if not self.context.execute_async_v3(s.cuda_stream):
                raise RunnerError(f"execute_async_v3 failed: {self._log.tail()}")
            e2.record(s)
            if self._host_io:
                self.h_out.copy_(self.d_out, non_blocking=True)
            e3.record(s)
        e3.synchronize()
        if self._host_io:
            self.meter.after_call(h2d=e0.elapsed_time(e1), compute=e1.elapsed_time(e2), d2h=e2.elapsed_time(e3),
                                  device=e0.elapsed_time(e3))
            return self.h_out
        self.meter.after_call(compute=e1.elapsed_time(e2), device=e0.elapsed_time(e3))
        return self.d_out

    def to_numpy(self, outputs: Any) -> np.ndarray:
        return outputs.float().cpu().numpy().copy()

    def extra_metrics(self) -> dict[str, Any]:
        m = self.meter.metrics(peak_allocated_mib=self._torch.cuda.max_memory_allocated(self._dev) / 2**20)
        note = self.meter.note(m)
        if note:
            self.notes.append(note)
        return m

    def library_versions(self) -> dict[str, str]:
        return {"tensorrt": self._version, "torch": self._torch.__version__}
