"""Stand-ins for the GPU libraries, so that the CUDA code paths of the runners run here
(no GPU, no TensorRT): a ``torch`` whose tensors are numpy arrays with a device name,
and a ``tensorrt`` + ``cuda.bindings.runtime`` pair whose device memory is host memory.

They check our own logic (what runs when, which buffers a call touches, the GPU timing
policy, the throughput scenario's bookkeeping), never that the real libraries accept it.
Every model call, capture, replay and engine execution is counted in ``calls`` so that a
test can see what ran before the first timed call.
"""

from __future__ import annotations

import contextlib
import ctypes
import types
from collections import Counter
from types import SimpleNamespace as NS

import numpy as np

WIDTH = 10  # every fake model's output: the first 10 values of each flattened input


def expected(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32).reshape(len(x), -1)[:, :WIDTH])


# ------------------------------------------------------------------------------ torch
class FakeDtype:
    def __init__(self, name: str, np_type):
        self.name, self.np = name, np_type

    def __str__(self):
        return f"torch.{self.name}"


class FakeTensor:
    def __init__(self, a, device: str = "cpu", pinned: bool = False):
        self.a, self.device, self.pinned = np.asarray(a), str(device), pinned

    @property
    def shape(self):
        return self.a.shape

    @property
    def dtype(self):
        return FakeDtype(self.a.dtype.name, self.a.dtype.type)

    def is_floating_point(self) -> bool:
        return self.a.dtype.kind == "f"

    def dim(self) -> int:
        return self.a.ndim

    def to(self, *args, dtype=None, non_blocking=False, **_kw):
        device = self.device
        for v in args:
            if isinstance(v, FakeDtype):
                dtype = v
            elif isinstance(v, str):
                device = v
        return FakeTensor(self.a.astype(dtype.np) if dtype is not None else self.a.copy(), device)

    def contiguous(self, memory_format=None):
        return self

    def pin_memory(self):
        assert self.device == "cpu", "pin_memory of a device tensor"
        return FakeTensor(self.a.copy(), "cpu", pinned=True)

    def copy_(self, other, non_blocking=False):
        self.a[...] = other.a
        return self

    def clone(self):
        return FakeTensor(self.a.copy(), self.device)

    def float(self):
        return FakeTensor(self.a.astype(np.float32), self.device)

    def cpu(self):
        return FakeTensor(self.a, "cpu")

    def numpy(self):
        assert self.device == "cpu", "numpy() of a device tensor"
        return self.a


class FakeModel:
    """out = the first 10 values of each input row; counts eager calls and calls under capture."""

    def __init__(self, torch_ns):
        self.torch = torch_ns
        self.devices: list[str] = []

    def to(self, *args, **kwargs):
        return self

    def __call__(self, x: FakeTensor) -> FakeTensor:
        self.devices.append(x.device)
        g = self.torch._capturing
        out = FakeTensor(expected(x.a), x.device)
        if g is not None:
            self.torch.calls["captured"] += 1
            g.work.append((x, out))
        else:
            self.torch.calls["model"] += 1
        return out


class FakeGraph:
    def __init__(self, torch_ns):
        self.torch, self.work = torch_ns, []

    def replay(self):
        self.torch.calls["replay"] += 1
        for x, out in self.work:
            out.a[...] = expected(x.a)


class FakeEvent:
    def __init__(self, enable_timing=False):
        self.recorded = 0

    def record(self, stream=None):
        self.recorded += 1

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return 1.0


class FakeStream:
    def synchronize(self):
        pass

    def wait_stream(self, other):
        pass


def fake_torch() -> types.ModuleType:
    t = types.ModuleType("torch")
    t.__version__ = "2.fake"
    t.calls = Counter()
    t._capturing = None
    t.float32, t.float16, t.bfloat16 = (FakeDtype("float32", np.float32), FakeDtype("float16", np.float16),
                                        FakeDtype("bfloat16", np.float32))
    t.channels_last, t.contiguous_format = "channels_last", "contiguous_format"
    t.device = str
    t.from_numpy = FakeTensor
    t.Tensor = FakeTensor
    t.zeros = lambda shape, device="cpu", dtype=None: FakeTensor(np.zeros(shape, (dtype or t.float32).np),
                                                                 device)
    t.set_num_threads = lambda n: None
    t.get_num_threads = lambda: 1
    t.set_grad_enabled = lambda v: None
    t.inference_mode = contextlib.nullcontext
    t.compile = lambda model, mode=None: model
    t.compiler = NS(cudagraph_mark_step_begin=lambda: None)
    t.version = NS(cuda="13.0")
    t.backends = NS(cuda=NS(matmul=NS(allow_tf32=True)), cudnn=NS(allow_tf32=True, benchmark=False,
                                                                  version=lambda: 91900),
                    mkldnn=NS(is_available=lambda: True))

    @contextlib.contextmanager
    def graph(g):
        t._capturing = g
        try:
            yield
        finally:
            t._capturing = None

    t.cuda = NS(is_available=lambda: True, set_device=lambda d: None, synchronize=lambda d=None: None,
                Event=FakeEvent, current_stream=lambda d=None: FakeStream(),
                Stream=lambda d=None: FakeStream(), stream=lambda s: contextlib.nullcontext(),
                CUDAGraph=lambda: FakeGraph(t), graph=graph,
                get_device_properties=lambda i: NS(name="Fake GPU", major=9, minor=0,
                                                   multi_processor_count=132),
                max_memory_allocated=lambda d=None: 0, device_count=lambda: 1)
    return t


# ------------------------------------------------------------------------------ TensorRT
class FakeCudart:
    """cuda.bindings.runtime with host memory for device memory; every call answers (0, ...)."""

    cudaMemcpyKind = NS(cudaMemcpyHostToDevice=1, cudaMemcpyDeviceToHost=2)

    def __init__(self):
        self.buffers: dict[int, ctypes.Array] = {}
        self.streams = 0
        self.copies = Counter()

    def _alloc(self, n):
        buf = ctypes.create_string_buffer(max(1, int(n)))
        self.buffers[ctypes.addressof(buf)] = buf
        return 0, ctypes.addressof(buf)

    cudaMalloc = cudaMallocHost = _alloc

    def cudaFree(self, p):
        return (0,)

    cudaFreeHost = cudaFree

    def cudaSetDevice(self, i):
        return (0,)

    def cudaStreamCreate(self):
        self.streams += 1
        return 0, self.streams

    def cudaStreamSynchronize(self, s):
        return (0,)

    def cudaStreamDestroy(self, s):
        return (0,)

    def cudaMemcpy(self, dst, src, n, kind):
        self.copies[kind] += 1
        ctypes.memmove(dst, src, n)
        return (0,)

    def cudaMemcpyAsync(self, dst, src, n, kind, stream):
        return self.cudaMemcpy(dst, src, n, kind)

    def cudaEventCreate(self):
        return 0, object()

    def cudaEventRecord(self, ev, stream):
        return (0,)

    def cudaEventElapsedTime(self, a, b):
        return 0, 0.5

    def cudaEventDestroy(self, ev):
        return (0,)

    def cudaGetDeviceProperties(self, i):
        return 0, NS(name=b"Fake GPU", major=9, minor=0, multiProcessorCount=132)

    def cudaRuntimeGetVersion(self):
        return 0, 13000

    cudaDriverGetVersion = cudaRuntimeGetVersion

    def cudaGetErrorName(self, err):
        return 0, b"cudaErrorFake"


class FakeContext:
    def __init__(self, trt_ns, shape):
        self.trt, self.shape, self.addr = trt_ns, shape, {}

    def set_optimization_profile_async(self, idx, stream):
        return True

    def set_input_shape(self, name, shape):
        self.shape = tuple(shape)
        return True

    def get_tensor_shape(self, name):
        return (self.shape[0], WIDTH)

    def set_tensor_address(self, name, ptr):
        self.addr[name] = ptr
        return True

    def execute_async_v3(self, stream):
        self.trt.calls["execute"] += 1
        n = int(np.prod(self.shape))
        x = np.frombuffer((ctypes.c_float * n).from_address(self.addr["input"]),
                          np.float32).reshape(self.shape)
        out = expected(x)
        ctypes.memmove(self.addr["logits"], out.ctypes.data, out.nbytes)
        return True


class FakeEngine:
    num_io_tensors = 2
    num_optimization_profiles = 1

    def __init__(self, trt_ns, shape):
        self.trt, self.shape = trt_ns, shape

    def get_tensor_name(self, i):
        return ("input", "logits")[i]

    def get_tensor_mode(self, name):
        return self.trt.TensorIOMode.INPUT if name == "input" else self.trt.TensorIOMode.OUTPUT

    def get_tensor_profile_shape(self, name, i):
        return [self.shape] * 3

    def get_tensor_shape(self, name):  # the engine's own shapes: the batch axis dynamic
        return (-1, *self.shape[1:]) if name == "input" else (-1, WIDTH)

    def get_tensor_dtype(self, name):
        return self.trt.DataType.FLOAT

    def create_execution_context(self, strategy):
        self.trt.calls["contexts"] += 1
        return FakeContext(self.trt, self.shape)

    def create_engine_inspector(self):
        raise RuntimeError("no inspector in the stand-in")


def fake_tensorrt(shape: tuple[int, ...]) -> types.ModuleType:
    """A ``tensorrt`` with one engine of one profile (min = opt = max = ``shape``)."""
    m = types.ModuleType("tensorrt")
    m.__version__ = "10.13.0"
    m.Builder = object
    m.calls = Counter()
    m.ILogger = type("ILogger", (), {"Severity": NS(INTERNAL_ERROR=0, ERROR=1, WARNING=2),
                                     "__init__": lambda self: None})
    m.DataType = NS(**{k: k for k in ("FLOAT", "HALF", "INT8", "INT32", "INT64", "BOOL", "UINT8")})
    m.TensorIOMode = NS(INPUT="in", OUTPUT="out")
    m.ExecutionContextAllocationStrategy = NS(ON_PROFILE_CHANGE=1)
    m.LayerInformationFormat = NS(JSON=1)
    m.Runtime = lambda logger: NS(deserialize_cuda_engine=lambda data: FakeEngine(m, shape))
    return m
