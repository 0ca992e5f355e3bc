"""One GPU timing policy for every CUDA runner (PyTorch, torch.compile, ONNX Runtime CUDA and
TensorRT EP, TensorRT), checked here without a GPU: ``--io device|host`` (the old per-runner
switches as aliases) reaches each runner's settings; nothing runs before the first timed
call (CUDA graphs are captured in load()); CUDA events go into a ring read after the loop;
and the throughput scenario's CUDA paths (several streams, sessions or contexts) keep
their bookkeeping.

Every CUDA runner runs on stand-ins (tests/fake_gpu.py): a fake torch, a fake tensorrt +
cuda.bindings, and ONNX Runtime's CPU provider standing in for its CUDA one. What is
checked is our own code, never that the real libraries accept it.
"""

from __future__ import annotations

import numpy as np
import pytest


def test_io_policy_is_one_option_with_the_old_flags_as_aliases():
    from infer_compare.base.errors import UsageError
    from infer_compare.cli import build_parser
    from infer_compare.cli.flags import measure_options
    from infer_compare.measure.plan import make_selection

    def sel(*argv):
        a = build_parser().parse_args(["--model", "lenet5", *argv])
        return measure_options(a).selection()

    assert sel().io == "device"  # device-resident by default, for every GPU runner
    assert sel("--io", "host").io == "host"
    assert sel("--ort-no-io-binding").io == "host"  # the old ONNX Runtime switch
    assert sel("--tensorrt-io", "host").io == "host" and sel("--tensorrt-io", "device").io == "device"
    assert sel("--io", "host", "--tensorrt-io", "host").io == "host"
    with pytest.raises(UsageError, match="conflicting"):
        sel("--io", "device", "--ort-no-io-binding")
    assert make_selection(runner_options={"tensorrt": {"io": "host"}}).io == "host"


def test_io_reaches_the_runner_through_the_child(tmp_path):
    from infer_compare.measure.bench import LoopSettings
    from infer_compare.measure.cells import CellSpec
    from infer_compare.measure.isolate import run_cell
    from infer_compare.measure.plan import make_selection, settings_for
    from infer_compare.measure.run import _how_spec

    from .conftest import python_env

    s = settings_for(make_selection(io="host"), {"cpu": ["cpu"]}, 1, 1)
    np.save(tmp_path / "in.npy", np.zeros((2, 1, 4, 4), np.float32))
    spec = CellSpec(runner="tests.fake_runners:CountingRunner", artifact="none",
                    inputs=str(tmp_path / "in.npy"),
                    loop=LoopSettings(warmup_iters=1, min_iters=2, min_time_s=0.0), **_how_spec(s))
    [res] = run_cell(spec, 60, tmp_path, "io", env=python_env())
    assert res.ok and res.settings["io"] == "host"


@pytest.fixture
def torch_stand_in(monkeypatch):
    import sys

    from . import fake_gpu

    t = fake_gpu.fake_torch()
    monkeypatch.setitem(sys.modules, "torch", t)
    monkeypatch.setattr("infer_compare.models.rebuild", lambda spec, path: fake_gpu.FakeModel(t))
    return t


def _torch_runner(cls, io="device", batch=4, **opts):
    from infer_compare.backends.pytorch.options import CompileOptions, EagerOptions
    from infer_compare.backends.runner import RunOptions

    ocls = CompileOptions if cls.compiled else EagerOptions
    r = cls("w.pt", "cuda:0", RunOptions(precision="fp16", batch_size=batch, model={"input_shape": [1, 4, 4]},
                                         io=io, runner=ocls(**opts)))
    r.load()
    return r


@pytest.mark.parametrize("io", ["device", "host"])
def test_pytorch_cuda_rows_follow_the_policy(torch_stand_in, io):
    from infer_compare.backends.pytorch.run import PyTorchRunner

    from .fake_gpu import expected

    t = torch_stand_in
    r = _torch_runner(PyTorchRunner, io)
    x = np.random.default_rng(0).standard_normal((4, 1, 4, 4)).astype(np.float32)
    p = r.prepare(x)
    assert r.settings["io"] == io and "nothing" in r.settings["before_first_call"]
    assert t.calls["model"] == 0  # neither load() nor prepare() ran the model: the first timed call is cold
    assert p.device == ("cpu" if io == "host" else "cuda:0") and p.pinned == (io == "host")
    out = r.run(p)
    assert out.device == ("cpu" if io == "host" else "cuda:0") and r.model.devices == ["cuda:0"]
    assert np.allclose(r.to_numpy(out), expected(x), atol=1e-3)
    for _ in range(3):
        r.run(p)
    assert r.events.calls == 4 and r.events.reads_in_loop == 0  # recorded into the ring, read after the loop
    m = r.extra_metrics()
    assert m["timing"] == "cuda events" and m["device_calls"] == 3 and m["event_reads_in_loop"] == 0


def test_pytorch_cuda_graph_is_captured_in_load_and_per_stream(torch_stand_in):
    from infer_compare.backends.pytorch.run import PyTorchRunner
    from infer_compare.backends.throughput import ThroughputSettings

    from .fake_gpu import expected

    t = torch_stand_in
    r = _torch_runner(PyTorchRunner, "host", cuda_graphs=True)
    assert t.calls == {"model": 3, "captured": 1}  # warm-up and capture in load(), inside the load time
    assert "captured in load()" in r.settings["before_first_call"]
    x = np.arange(64, dtype=np.float32).reshape(4, 1, 4, 4)
    p = r.prepare(x)
    assert t.calls["model"] == 3 and t.calls["replay"] == 0  # prepare() runs nothing
    # the first call: one replay
    assert np.allclose(r.to_numpy(r.run(p)), expected(x)) and t.calls["replay"] == 1
    tp = r.throughput(x, ThroughputSettings(duration_s=0.05, warmup_s=0.0, concurrency=2))
    assert tp.concurrency == 2 and tp.unit == "streams" and tp.images > 0 and t.calls["captured"] == 3
    assert np.allclose(tp.outputs, expected(x)) and len(tp.latencies_ns) == tp.images // 4


def test_pytorch_compile_with_cuda_graphs_declines_the_throughput_scenario(torch_stand_in):
    from infer_compare.backends.pytorch.run import PyTorchCompileRunner
    from infer_compare.backends.throughput import ThroughputSettings
    from infer_compare.base.errors import BackendUnavailable

    r = _torch_runner(PyTorchCompileRunner, "host", cuda_graphs=True)
    assert r.settings["io"] == "host" and "compiled and recorded" in r.settings["before_first_call"]
    with pytest.raises(BackendUnavailable, match="static buffers"):
        r.throughput(np.zeros((4, 1, 4, 4), np.float32), ThroughputSettings(duration_s=0.01))
    plain = _torch_runner(PyTorchCompileRunner, "device")  # default mode: no CUDA graphs, streams are fine
    tp = plain.throughput(np.zeros((4, 1, 4, 4), np.float32),
                          ThroughputSettings(duration_s=0.02, warmup_s=0.0))
    assert tp.concurrency == 2 and tp.images > 0


def test_pytorch_cuda_rows_keep_the_model_across_batch_sizes(torch_stand_in, monkeypatch):
    """One load per configuration: the next batch size re-shapes (fresh meter and event ring, notes of
    that batch only; torch.compile compiles the new shape in the re-shape time); CUDA-graph rows reload."""
    from infer_compare.backends.pytorch.run import PyTorchCompileRunner, PyTorchRunner

    from . import fake_gpu

    t = torch_stand_in
    built = []
    monkeypatch.setattr("infer_compare.models.rebuild",
                        lambda spec, path: built.append(1) or fake_gpu.FakeModel(t))
    r = _torch_runner(PyTorchRunner, batch=1)
    x = np.zeros((1, 1, 4, 4), np.float32)
    for _ in range(3):
        r.run(r.prepare(x))
    r.extra_metrics()
    notes_b1, ring_b1 = list(r.notes), r.events
    assert r.rebatch(8) is True and len(built) == 1  # not rebuilt, not moved again
    assert r.events is not ring_b1 and r.events.calls == 0 and r.meter.images_per_call == 8
    # the batch-1 metrics note is not carried
    assert r.notes == r._load_notes and len(r.notes) <= len(notes_b1)
    assert "loaded for batch 1" in r.settings["before_first_call"] and t.calls["model"] == 3  # nothing ran
    assert r.to_numpy(r.run(r.prepare(np.zeros((8, 1, 4, 4), np.float32)))).shape == (8, 10)

    c = _torch_runner(PyTorchCompileRunner, batch=1)
    before = t.calls["model"]
    # compiled on the new shape, in re-shape time
    assert c.rebatch(32) is True and t.calls["model"] == before + 3
    assert "compiled" in c.settings["before_first_call"] and c.settings["compile_s"] is not None
    assert sum("torch.compile" in n for n in c.notes) == 1  # one compile note: this shape's
    g = _torch_runner(PyTorchRunner, cuda_graphs=True)
    assert g.rebatch(8) is False  # its graph was captured for batch 4: a reload captures batch 8


def _tiny_onnx(path):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 1, 4, 4])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 16])
    g = helper.make_graph([helper.make_node("Flatten", ["input"], ["logits"])], "g", [x], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return str(path)


class _CountingSession:
    """An ONNX Runtime session that counts its runs."""

    def __init__(self, sess):
        self.s, self.runs = sess, 0

    def __getattr__(self, name):
        return getattr(self.s, name)

    def run(self, *a, **k):
        self.runs += 1
        return self.s.run(*a, **k)

    def run_with_iobinding(self, *a, **k):
        self.runs += 1
        return self.s.run_with_iobinding(*a, **k)


def _ort_cuda_runner(cls, tmp_path, monkeypatch, io):
    import onnxruntime as ort

    from infer_compare.backends.runner import RunOptions

    made = []

    def create(self, so, providers):  # the CPU provider stands in for the CUDA one
        made.append(_CountingSession(ort.InferenceSession(self.artifact, so,
                                                          providers=["CPUExecutionProvider"])))
        return made[-1]

    monkeypatch.setattr(cls, "_create", create)
    monkeypatch.setattr(cls, "_load_cuda_libs", lambda self: "stand-in")
    r = cls(_tiny_onnx(tmp_path / "t.onnx"), "cuda:0", RunOptions(precision="fp32", batch_size=4, io=io,
                                                                    cache_dir=str(tmp_path),
                                                                    model={"input_shape": [1, 4, 4]}))
    r.load()
    r._dev_type = "cpu"  # where the bound OrtValues live, for the stand-in session
    return r, made


@pytest.mark.parametrize("io", ["device", "host"])
def test_onnxruntime_cuda_rows_follow_the_policy(tmp_path, monkeypatch, io):
    from infer_compare.backends.onnxruntime.run import OnnxRuntimeRunner
    from infer_compare.backends.onnxruntime.run_trt import OnnxRuntimeTensorRTRunner
    from infer_compare.backends.throughput import ThroughputSettings

    x = np.arange(64, dtype=np.float32).reshape(4, 1, 4, 4)
    for cls in (OnnxRuntimeRunner, OnnxRuntimeTensorRTRunner):
        r, made = _ort_cuda_runner(cls, tmp_path, monkeypatch, io)
        assert r.settings["io"] == io and "nothing" in r.settings["before_first_call"]
        p = r.prepare(x)
        # the output is bound without running the session: the first timed call is cold
        assert made[0].runs == 0
        assert np.array_equal(r.to_numpy(r.run(p)), x.reshape(4, 16)) and made[0].runs == 1
        tp = r.throughput(x, ThroughputSettings(duration_s=0.05, warmup_s=0.0))
        assert tp.concurrency == 2 and len(made) == 2 and tp.unit == "sessions" and tp.images > 0
        assert np.array_equal(tp.outputs, x.reshape(4, 16)) and made[1].runs > 0
        r.close()


@pytest.mark.parametrize("io", ["device", "host"])
def test_tensorrt_rows_follow_the_policy(tmp_path, monkeypatch, io):
    import sys

    from infer_compare.backends.runner import RunOptions
    from infer_compare.backends.tensorrt import run as trt_run
    from infer_compare.backends.throughput import ThroughputSettings

    from .fake_gpu import FakeCudart, expected, fake_tensorrt

    fake, rt = fake_tensorrt((4, 1, 4, 4)), FakeCudart()
    monkeypatch.setitem(sys.modules, "tensorrt", fake)
    monkeypatch.setattr(trt_run, "trt_status", lambda: (fake, "", fake.__version__))
    monkeypatch.setattr(trt_run, "cudart_status", lambda: (rt, ""))
    (tmp_path / "e.plan").write_bytes(b"engine")
    r = trt_run.TensorRTRunner(str(tmp_path / "e.plan"), "cuda:0",
                               RunOptions(precision="fp32", batch_size=4, io=io))
    r.load()
    x = np.arange(64, dtype=np.float32).reshape(4, 1, 4, 4)
    p = r.prepare(x)
    # nothing executed before the first timed call
    assert r.settings["io"] == io and fake.calls["execute"] == 0
    h2d = rt.copies[1]
    out = r.to_numpy(r.run(p))
    assert np.array_equal(out, expected(x)) and fake.calls["execute"] == 1
    # the H2D copy is inside the timed call only with host io
    assert rt.copies[1] - h2d == (1 if io == "host" else 0)
    for _ in range(3):
        r.run(p)
    tp = r.throughput(x, ThroughputSettings(duration_s=0.05, warmup_s=0.0))
    assert tp.concurrency == 2 and fake.calls["contexts"] == 2 and tp.images > 0 and tp.unit == "streams"
    assert np.array_equal(tp.outputs, expected(x))
    m = r.extra_metrics()
    assert m["timing"] == "cuda events" and ("h2d_ms_p50" in m) == (io == "host")
    r.close()
