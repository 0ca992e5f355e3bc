"""TensorRT with several inputs and outputs (issue 25 b), which cannot run here (no TensorRT, no GPU).

tests/test_tensorrt_static.py checks every TensorRT name against TensorRT 11's bindings and the code
with mypy against tensorrt-stubs (backends/tensorrt/bindings.py included). This file drives the
binding logic itself with a stand-in engine that follows the documented TensorRT 10 tensor API
(``num_io_tensors``, ``get_tensor_name``, ``get_tensor_mode``, ``get_tensor_shape``,
``get_tensor_profile_shape``, ``set_input_shape``, ``get_tensor_shape`` on the context,
``set_tensor_address``) and a stand-in for the CUDA buffers: every input is bound by name with its own
shape (a scalar input keeps its shape; batched ones take the cell's batch), every output gets its own
buffer, inputs are fed by name (by position where the names differ), and the export's profile sets every
input. It proves the plumbing, not TensorRT: no TensorRT ran.
"""

from __future__ import annotations

import sys
import types
from enum import Enum

import numpy as np
import pytest

from infer_compare.base.errors import RunnerError


class DataType(Enum):
    FLOAT = 0
    HALF = 1
    INT8 = 2
    INT32 = 3
    INT64 = 4
    BOOL = 5
    UINT8 = 6


class TensorIOMode(Enum):
    INPUT = 1
    OUTPUT = 2


@pytest.fixture
def fake_trt(monkeypatch):
    mod = types.SimpleNamespace(DataType=DataType, TensorIOMode=TensorIOMode, Dims=lambda d: tuple(d))
    monkeypatch.setitem(sys.modules, "tensorrt", mod)
    return mod


# image [-1, 3, 8, 8] float, sr [] int64 (no batch axis), ids [-1, 5] int64 -> logits [-1, 10], state [-1, 4]
TENSORS = {"image": ((-1, 3, 8, 8), DataType.FLOAT, TensorIOMode.INPUT),
           "sr": ((), DataType.INT64, TensorIOMode.INPUT),
           "ids": ((-1, 5), DataType.INT64, TensorIOMode.INPUT),
           "logits": ((-1, 10), DataType.FLOAT, TensorIOMode.OUTPUT),
           "state": ((-1, 4), DataType.HALF, TensorIOMode.OUTPUT)}
PROFILES = [(1, 1, 1), (1, 4, 8)]  # (min, opt, max) batch of each profile


class Engine:
    num_io_tensors = len(TENSORS)
    num_optimization_profiles = len(PROFILES)

    def get_tensor_name(self, i):
        return list(TENSORS)[i]

    def get_tensor_mode(self, name):
        return TENSORS[name][2]

    def get_tensor_dtype(self, name):
        return TENSORS[name][1]

    def get_tensor_shape(self, name):
        return TENSORS[name][0]

    def get_tensor_profile_shape(self, name, profile):
        shape = TENSORS[name][0]
        return [tuple(b if d == -1 else d for d in shape)
                for b in PROFILES[profile]] if shape else [(), (), ()]


class Context:
    def __init__(self):
        self.shapes, self.addresses, self.profile = {}, {}, None

    def set_optimization_profile_async(self, i, stream):
        self.profile = i
        return True

    def set_input_shape(self, name, shape):
        assert TENSORS[name][2] == TensorIOMode.INPUT
        self.shapes[name] = tuple(shape)
        return True

    def get_tensor_shape(self, name):
        b = self.shapes["image"][0]
        return tuple(b if d == -1 else d for d in TENSORS[name][0])

    def set_tensor_address(self, name, ptr):
        self.addresses[name] = ptr
        return True


class Cuda:
    handle = 0

    def __init__(self):
        self.ptrs = 0
        self.copies = []

    def synchronize(self):
        pass

    def pinned(self, shape, dtype):
        return np.zeros(shape, dtype=dtype)

    def device(self, nbytes):
        self.ptrs += 1
        return 1000 * self.ptrs

    def h2d(self, dst, src, nbytes, sync=False):
        self.copies.append(("h2d", dst, nbytes))

    def d2h(self, dst, src, nbytes, sync=False):
        self.copies.append(("d2h", src, nbytes))


class Log:
    def tail(self):
        return ""


def _bound(batch: int):
    from infer_compare.backends.tensorrt import bindings as b
    from infer_compare.backends.tensorrt.run import pick_profile

    eng = Engine()
    inputs, outputs = b.io_names(eng)
    first, ranges = b.profile_ranges(eng, inputs)
    idx, _ = pick_profile(ranges, batch)
    ctx, cuda = Context(), Cuda()
    slot = b.bind(eng, ctx, cuda, idx, b.input_shapes(eng, inputs, idx, batch), outputs, Log())
    return inputs, outputs, first, idx, ctx, cuda, slot


def test_every_input_and_output_is_bound_by_name(fake_trt):
    inputs, outputs, first, idx, ctx, cuda, slot = _bound(4)
    assert inputs == ["image", "sr", "ids"] and outputs == ["logits", "state"] and first == "image"
    assert idx == 1 and ctx.profile == 1  # the profile tuned for batch 4
    assert ctx.shapes == {"image": (4, 3, 8, 8), "sr": (), "ids": (4, 5)}  # the scalar keeps its shape
    assert set(ctx.addresses) == set(TENSORS) and len(set(ctx.addresses.values())) == len(TENSORS)
    assert [(x.name, x.host.shape, x.host.dtype) for x in slot.outs] == [
        ("logits", (4, 10), np.float32), ("state", (4, 4), np.float16)]
    assert [x.host.dtype for x in slot.ins] == [np.float32, np.int64, np.int64]


def test_inputs_fed_by_name_and_outputs_read_by_name(fake_trt):
    from infer_compare.backends.tensorrt.run import TensorRTRunner

    inputs, outputs, _, idx, ctx, cuda, slot = _bound(4)
    r = TensorRTRunner.__new__(TensorRTRunner)
    r._inputs, r.slot, r._host_io, r.cuda = inputs, slot, False, cuda
    feed = {"ids": np.arange(20).reshape(4, 5), "sr": np.array(16000), "image": np.ones((4, 3, 8, 8))}
    r.prepare(feed)
    assert slot.ins[0].host.sum() == 4 * 3 * 8 * 8 and int(slot.ins[1].host) == 16000
    assert slot.ins[2].host[3, 4] == 19 and slot.ins[2].host.dtype == np.int64
    # device-resident: each input copied once, before timing
    assert [c[0] for c in cuda.copies] == ["h2d"] * 3
    slot.outs[1].host[:] = 2.5
    got = r.to_numpy(None)
    assert list(got) == ["logits", "state"] and got["state"].dtype == np.float32 and got["state"][0, 0] == 2.5
    with pytest.raises(RunnerError, match="loaded for input 'image'"):
        r.prepare({**feed, "image": np.ones((2, 3, 8, 8))})
    r.prepare({"a": feed["image"] * 2, "b": feed["sr"], "c": feed["ids"]})  # other names: fed by position
    assert slot.ins[0].host.sum() == 2 * 4 * 3 * 8 * 8


def test_export_profile_sets_every_input(fake_trt):
    from infer_compare.backends.exporter import ExportContext
    from infer_compare.backends.tensorrt.export import input_dims

    calib = {"image": np.zeros((2, 3, 8, 8), np.float32), "sr": np.zeros((2,), np.int64),
             "ids": np.zeros((2, 7), np.int64)}
    ctx = ExportContext(model=None, model_name="m", input_shape=(3, 8, 8), num_classes=0, calibration=calib)
    net = [{"name": "image", "shape": [-1, 3, 8, 8]}, {"name": "sr", "shape": []},
           {"name": "ids", "shape": [-1, -1]}]
    assert input_dims(ctx, net) == [("image", [3, 8, 8], True), ("sr", [], False), ("ids", [7], True)]
    from infer_compare.base.errors import ExportError

    with pytest.raises(ExportError, match="'ids'"):
        input_dims(ExportContext(model=None, model_name="m", input_shape=(3, 8, 8), num_classes=0,
                                 calibration=np.zeros((2, 3, 8, 8), np.float32)), net)
