"""Every input and output of a TensorRT engine bound by name (issue 25 b), with the documented
TensorRT 10/11 tensor API: ``engine.num_io_tensors`` / ``get_tensor_name(i)`` /
``get_tensor_mode(name)`` list them, ``get_tensor_profile_shape(name, profile)`` gives each input's
(min, opt, max), ``context.set_input_shape(name, shape)`` sets each input of the cell's batch,
``context.get_tensor_shape(name)`` then gives each output's, and ``context.set_tensor_address(name,
ptr)`` binds each to its own device buffer. An input whose engine shape has no dynamic first axis (a
scalar, a fixed state) keeps its one shape; the others take the cell's batch on axis 0.

Like the rest of this package, this has never run here (no TensorRT wheel, no GPU): it is checked by
tests/test_tensorrt_static.py (mypy against tensorrt-stubs, every name against TensorRT 11's bindings).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from infer_compare.backends.tensorrt.device import CudaBuffers
from infer_compare.base.errors import RunnerError

if TYPE_CHECKING:  # checked against tensorrt-stubs
    import tensorrt as trt


def dims(d: Any) -> tuple[int, ...]:
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


@dataclass
class Buffer:
    """One engine tensor: its name, pinned host array and device buffer."""

    name: str
    host: np.ndarray
    dev: int

    @property
    def ptr(self) -> int:
        return int(self.host.ctypes.data)


@dataclass
class Slot:
    """One execution context with its own stream and one buffer per input and output."""

    context: Any
    cuda: CudaBuffers
    ins: list[Buffer]
    outs: list[Buffer]

    def h2d(self, sync: bool = False) -> None:
        for b in self.ins:
            self.cuda.h2d(b.dev, b.ptr, b.host.nbytes, sync=sync)

    def d2h(self, sync: bool = False) -> None:
        for b in self.outs:
            self.cuda.d2h(b.ptr, b.dev, b.host.nbytes, sync=sync)

    def load(self, arrays: list[np.ndarray], device: bool) -> None:
        """Each input array into its pinned buffer (and, for device-resident I/O, on to the GPU)."""
        for b, x in zip(self.ins, arrays, strict=True):
            np.copyto(b.host, x)
        if device:
            self.h2d(sync=True)

    def enqueue(self, host_io: bool, log: Any) -> None:
        """(H2D,) execute, (D2H) on this slot's stream; returns at once."""
        if host_io:
            self.h2d()
        if not self.context.execute_async_v3(self.cuda.handle):
            raise RunnerError(f"execute_async_v3 failed: {log.tail()}")
        if host_io:
            self.d2h()

    def close(self) -> None:
        self.cuda.synchronize()
        del self.context  # before the memory it uses
        self.cuda.close()


def io_names(engine: trt.ICudaEngine) -> tuple[list[str], list[str]]:
    """(input names, output names) of the engine, in its I/O order."""
    import tensorrt as trt

    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    return ([n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT],
            [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT])


def batched(engine: trt.ICudaEngine, name: str) -> bool:
    """Whether the input's first axis is dynamic (the batch)."""
    shape = dims(engine.get_tensor_shape(name))
    return bool(shape) and shape[0] == -1


def profile_ranges(engine: trt.ICudaEngine, inputs: list[str]) -> tuple[str, list[tuple[int, int, int]]]:
    """(the input whose batch picks the profile, its (min, opt, max) batch in each profile)."""
    first = next((n for n in inputs if batched(engine, n)), inputs[0])
    out = []
    for i in range(engine.num_optimization_profiles):
        mn, opt, mx = (dims(d) for d in engine.get_tensor_profile_shape(first, i))
        out.append((mn[0], opt[0], mx[0]) if mn else (1, 1, 1))
    return first, out


def input_shapes(engine: trt.ICudaEngine, inputs: list[str],
                 profile: int, batch: int) -> dict[str, tuple[int, ...]]:
    """Each input's shape for ``batch`` in ``profile``: its opt shape with the batch on axis 0 where that
    axis is dynamic; as the profile has it otherwise."""
    out = {}
    for n in inputs:
        opt = dims(engine.get_tensor_profile_shape(n, profile)[1])
        out[n] = (batch, *opt[1:]) if batched(engine, n) and opt else opt
    return out


def bind(engine: trt.ICudaEngine, context: trt.IExecutionContext, cuda: CudaBuffers, profile: int,
         shapes: dict[str, tuple[int, ...]], outputs: list[str], log: Any) -> Slot:
    """``context`` on ``profile`` with every input's shape set, each input and output on its own pinned
    host and device buffer, every address set by name."""
    if not context.set_optimization_profile_async(profile, cuda.handle):
        raise RunnerError(f"set_optimization_profile_async({profile}) failed: {log.tail()}")
    cuda.synchronize()
    ins = []
    for name, shape in shapes.items():
        if not context.set_input_shape(name, list(shape)):
            raise RunnerError(f"set_input_shape({name}, {list(shape)}) failed: {log.tail()}")
        host = cuda.pinned(shape, numpy_dtype(engine.get_tensor_dtype(name)))
        ins.append(Buffer(name, host, cuda.device(host.nbytes)))
    outs = []
    for name in outputs:
        shape = dims(context.get_tensor_shape(name))
        if any(d < 0 for d in shape):
            raise RunnerError(f"output '{name}' has no shape for these inputs ({list(shape)}): a "
                              "data-dependent output size is not measured by this runner")
        host = cuda.pinned(shape, numpy_dtype(engine.get_tensor_dtype(name)))
        outs.append(Buffer(name, host, cuda.device(host.nbytes)))
    for b in ins + outs:
        if not context.set_tensor_address(b.name, b.dev):
            raise RunnerError(f"set_tensor_address({b.name}) failed: {log.tail()}")
    return Slot(context, cuda, ins, outs)
