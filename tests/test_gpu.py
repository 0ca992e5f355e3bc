"""GPU backends: on a CPU-only machine every GPU row skips with its reason; the pure
parts (NVML fallbacks, per-call accounting, CLI flags, format rows) are checked here.
With a CUDA device (marker ``gpu``) LeNet-5 round-trips through the CUDA runners."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from infer_compare.catalog.formats import FORMATS, RUNNERS, build_chain
from infer_compare.host import gpu


def _has_cuda() -> bool:
    from infer_compare.backends.pytorch.run import PyTorchRunner

    return PyTorchRunner.probe("cuda:0").available


def test_device_index():
    assert gpu.device_index("cuda") == 0
    assert gpu.device_index("cuda:3") == 3


def test_nvml_index_follows_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    assert gpu._nvml_index(0) == 2 and gpu._nvml_index(1) == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc")
    assert gpu._nvml_index(0) == "GPU-abc"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpu._nvml_index(1) == 1


class _FakeNvml:
    ok = True
    reason = ""

    def __init__(self):
        self.energy = 1000
        self.mem = 100.0

    def energy_mj(self):
        return self.energy

    def memory_used_mib(self):
        return self.mem

    def facts(self):
        return {"gpu_name": "fake"}

    def close(self):
        pass


def test_call_meter_skips_the_cold_call_and_divides_energy_by_images():
    m = gpu.CallMeter("cuda:0", images_per_call=4)
    fake = _FakeNvml()
    m.nvml = fake
    m.start()
    m.after_call(device=100.0)  # cold: left out
    for v in (1.0, 2.0, 3.0):
        fake.energy += 40
        m.after_call(device=v)
    fake.mem = 164.0
    out = m.metrics(peak_allocated_mib=50.0)
    assert out["timing"] == "cuda events"
    assert out["device_calls"] == 3
    assert out["device_ms_p50"] == 2.0 and out["device_ms_max"] == 3.0
    assert out["energy_images"] == 12
    assert out["energy_mj_per_image"] == pytest.approx(120 / 12)
    assert out["gpu_mem_used_delta_mib"] == 64.0
    assert out["gpu_peak_allocated_mib"] == 50.0
    assert "device p50 2.000 ms" in m.note(out)


def test_call_meter_without_nvml_says_why():
    m = gpu.CallMeter("cuda:0", images_per_call=1)
    m.nvml.ok = False
    m.nvml.reason = "no NVML here"
    m.after_call(device=1.0)
    m.after_call(device=1.0)
    out = m.metrics()
    assert "energy_mj_per_image" not in out
    assert "no NVML here" in out["energy"]


def test_format_rows_for_gpu_precisions():
    assert "pytorch-compile" in FORMATS["pytorch"].runners and "pytorch-compile" in RUNNERS
    assert RUNNERS["pytorch-compile"].device_kinds == ("cuda",)
    assert "tf32" in FORMATS["pytorch"].precisions and "tf32" in FORMATS["onnx"].precisions
    # tf32 runs the fp32 artifact with TF32 math: no separate export
    assert build_chain("onnx", "tf32") == [("pytorch", "fp32"), ("onnx", "fp32")]
    # TensorRT: strongly typed engines from the precision's ONNX; tf32 is its own engine from the fp32 ONNX
    assert build_chain("tensorrt", "fp16")[-2:] == [("onnx", "fp16"), ("tensorrt", "fp16")]
    # symmetric int8
    assert build_chain("tensorrt", "int8")[-2:] == [("onnx", "int8-s8s8"), ("tensorrt", "int8")]
    assert build_chain("tensorrt", "tf32")[-2:] == [("onnx", "fp32"), ("tensorrt", "tf32")]
    assert build_chain("tensorrt", "fp32")[-2:] == [("onnx", "fp32"), ("tensorrt", "fp32")]


def test_cli_gpu_flags_become_runner_options():
    from infer_compare.cli import build_parser, runner_options_from_args

    a = build_parser().parse_args(["--model", "lenet5", "--cuda-graphs", "--compile-mode", "max-autotune",
                                   "--ort-no-io-binding", "--tensorrt-workspace", "2048", "--tensorrt-io",
                                   "device"])
    o = runner_options_from_args(a)
    assert o["pytorch"] == {"cuda_graphs": True}
    assert o["pytorch-compile"] == {"cuda_graphs": True, "compile_mode": "max-autotune"}
    assert o["onnxruntime"] == {"io_binding": False}
    assert o["onnxruntime-trt"] == {"io_binding": False, "workspace_mib": 2048}
    assert o["tensorrt"] == {"workspace_mib": 2048, "io": "device"}
    assert runner_options_from_args(build_parser().parse_args(["--model", "lenet5"])) == {}


def test_cpu_runners_refuse_gpu_precisions_with_a_reason():
    from infer_compare.backends.onnxruntime.run import OnnxRuntimeRunner
    from infer_compare.backends.pytorch.run import PyTorchRunner

    for cls in (PyTorchRunner, OnnxRuntimeRunner):
        av = cls.supports("x", "tf32", "cpu")
        assert not av.available and "CUDA" in av.reason


@pytest.mark.skipif(_has_cuda(), reason="this machine has a CUDA device")
def test_gpu_runners_skip_with_reasons_without_a_gpu():
    from infer_compare.backends.onnxruntime.run_trt import OnnxRuntimeTensorRTRunner
    from infer_compare.backends.pytorch.run import PyTorchCompileRunner, PyTorchRunner
    from infer_compare.backends.tensorrt.run import TensorRTRunner

    for cls in (PyTorchRunner, PyTorchCompileRunner, OnnxRuntimeTensorRTRunner, TensorRTRunner):
        av = cls.probe("cuda:0")
        assert not av.available and av.reason, cls
    assert not PyTorchCompileRunner.probe("cpu").available


@pytest.mark.slow
def test_compare_lists_gpu_rows_as_skipped_on_cpu(cache_dir):
    if _has_cuda():
        pytest.skip("this machine has a CUDA device")
    from infer_compare import compare
    from infer_compare.base.errors import UsageError

    backends = ["pytorch", "pytorch-compile", "onnxruntime", "tensorrt"]
    # only absent devices: at once
    with pytest.raises(UsageError, match="--device cuda: no CUDA device found"):
        compare("lenet5", backends=backends, devices=["cuda"], cache_dir=cache_dir, batch_sizes=[1])
    rep = compare("lenet5", backends=backends, devices=["cpu", "cuda"],
                  formats=["pytorch", "onnx", "tensorrt"],
                  precisions=["fp32"], cache_dir=cache_dir, batch_sizes=[1], min_time_s=0.0, min_iters=1,
                  warmup_iters=1)
    gpu = [r for r in rep.rows if r.device.startswith("cuda")]
    assert gpu and all(r.status == "skipped" and r.reason for r in gpu)
    assert {r.backend for r in gpu} == {"pytorch", "pytorch-compile", "onnxruntime", "tensorrt"}


@pytest.mark.gpu
@pytest.mark.slow
def test_lenet_on_cuda_round_trip(cache_dir):
    if not _has_cuda():
        pytest.skip("no CUDA device: " + __import__("infer_compare.backends.pytorch.run", fromlist=["x"])
                    .PyTorchRunner.probe("cuda:0").reason)
    from infer_compare import compare

    rep = compare("lenet5", backends=["pytorch", "onnxruntime"], devices=["cuda"],
                  precisions=["fp32", "fp16"], cache_dir=cache_dir, batch_sizes=[8], min_time_s=0.1,
                  min_iters=3)
    ran = [r for r in rep.rows if r.status != "skipped"]
    assert ran and all(r.status == "ok" for r in ran), [(r.label, r.reason) for r in ran]
    torch_rows = [r for r in ran if r.backend == "pytorch"]
    assert all(r.extra.get("timing") == "cuda events" and r.extra["device_ms_p50"] > 0 for r in torch_rows)
    assert all(np.isfinite(r.throughput) for r in ran)


# ------------------------------------------------------------------------------ TensorRT
# TensorRT cannot be installed on the machines these tests run on: what is checked here is
# our own logic (profiles, layer summaries, event bookkeeping, what the builder is asked
# for, the ONNX Runtime TensorRT EP's settings), never that TensorRT accepts it.

def test_tensorrt_profiles_one_per_measured_batch():
    from infer_compare.backends.tensorrt.export import plan_profiles
    from infer_compare.backends.tensorrt.run import pick_profile

    mode, prof = plan_profiles((256, 1, 32), 256, 0)
    assert prof == [(1, 1, 1), (32, 32, 32), (256, 256, 256)] and "per measured batch" in mode
    assert plan_profiles((1, 32), 256, 8)[1] == [(1, 8, 256)]  # option opt_batch: one profile tuned for 8
    assert plan_profiles((), 64, 0)[1] == [(1, 64, 64)]
    assert pick_profile(prof, 32) == (1, "")
    idx, note = pick_profile([(1, 256, 256)], 1)
    assert idx == 0 and "tuned for 256" in note  # the old single-profile engine answers, and says so
    idx, note = pick_profile(prof, 8)
    assert idx == -1 and "not 8" in note


def _layer(kind: str, param: str, fmt: str, tactic: str = "") -> dict:
    return {"Name": kind, "LayerType": kind, "ParameterType": param, "TacticName": tactic,
            "Inputs": [{"Name": "x", "Format/Datatype": fmt}],
            "Outputs": [{"Name": "y", "Format/Datatype": fmt}]}


def test_tensorrt_layer_summary_from_the_inspector_json():
    import json

    from infer_compare.backends.tensorrt.layers import exec_precision, summarize, tensor_type

    assert tensor_type("Thirty-two wide channel vectorized row major Int8 format.") == "int8"
    assert tensor_type("Channel major FP16 format where channel % 8 == 0") == "fp16"
    assert tensor_type("Row major linear FP32") == "fp32" and tensor_type("Float") == "fp32"
    assert tensor_type("N/A due to dynamic shapes") is None
    layers = [_layer("Reformat", "Reformat", "Row major linear FP32"),
              _layer("CaskConvolution", "Convolution", "Thirty-two wide channel vectorized row "
                                                       "major Int8 format."),
              _layer("CaskConvolution", "Convolution", "Row major Int8 format"),
              _layer("CaskGemmMatrixMultiply", "MatrixMultiply", "Row major linear FP32", "sm90_gemm_f32"),
              _layer("NoOp", "", "N/A due to dynamic shapes")]
    s = summarize(json.dumps({"Layers": layers, "Bindings": ["input", "logits"]}))
    assert s["layers"] == 5 and s["reformat_layers"] == 1 and s["layers_without_type"] == 1
    assert s["heavy_layer_precisions"] == {"int8": 2, "fp32": 1}
    assert exec_precision(s, "int8") == "int8+fp32"
    tf32 = summarize(json.dumps({"Layers": [_layer("CaskConvolution", "Convolution", "Row major linear FP32",
                                                   "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32")]}))
    assert exec_precision(tf32, "fp32") == "tf32"  # an fp32 row that runs TF32 kernels says so
    names_only = summarize(json.dumps({"Layers": ["conv1 + relu", "fc"]}))
    assert "DETAILED" in names_only["layer_info"] and exec_precision(names_only, "fp16") == "fp16"


class _FakeRuntime:
    """Stand-in for cuda.bindings.runtime in the event bookkeeping test: every elapsed
    time is the index of the call that recorded the events."""

    def __init__(self):
        self.recorded: dict[int, int] = {}
        self.call = -1
        self._next = 0

    def cudaEventCreate(self):
        self._next += 1
        return 0, self._next

    def cudaEventRecord(self, ev, stream):
        self.recorded[ev] = self.call
        return (0,)

    def cudaEventElapsedTime(self, a, b):
        return 0, float(self.recorded[a])

    def cudaEventDestroy(self, ev):
        return (0,)

    def cudaSetDevice(self, i):
        return (0,)

    def cudaStreamCreate(self):
        return 0, 0

    def cudaMallocHost(self, n):
        import ctypes

        self.host = ctypes.create_string_buffer(n)  # kept alive by the stand-in
        return 0, ctypes.addressof(self.host)

    def cudaFreeHost(self, ptr):
        self.freed = ptr
        return (0,)

    def cudaStreamDestroy(self, s):
        return (0,)


def test_tensorrt_event_ring_reads_every_call_in_order():
    from infer_compare.backends.tensorrt.device import EventRing

    rt = _FakeRuntime()
    ring = EventRing(rt, stream=None, calls=3)
    for c in range(8):  # more calls than the ring holds: wrapped slots are read before reuse
        rt.call = c
        for ev in ring.begin():
            ring.record(ev)
    assert ring.reads_in_loop == 5
    assert [t[0] for t in ring.times()] == list(range(8))
    rt.call = 8
    for ev in ring.begin():  # a parity call after the metrics were read
        ring.record(ev)
    assert [t[1] for t in ring.times()] == list(range(9))


def test_tensorrt_pinned_arrays_are_numpy_views_of_the_host_allocation():
    import ctypes

    from infer_compare.backends.tensorrt.device import CudaBuffers

    rt = _FakeRuntime()
    bufs = CudaBuffers(rt, 0)
    a = bufs.pinned((2, 3), np.float16)
    assert a.shape == (2, 3) and a.dtype == np.float16 and a.flags.writeable
    assert a.ctypes.data == ctypes.addressof(rt.host) and len(rt.host) == a.nbytes
    a[:] = 1.5
    assert np.frombuffer(rt.host.raw, np.float16).tolist() == [1.5] * 6
    bufs.close()
    assert rt.freed == ctypes.addressof(rt.host)


def _stand_in_tensorrt(qdq: bool = False):
    """A recording stand-in for the tensorrt module with TensorRT 11's surface for what the
    builder code touches (no BuilderFlag.FP16/INT8, no EXPLICIT_BATCH)."""
    import types
    from types import SimpleNamespace as NS

    rec: dict = {"flags": [], "set": [], "cleared": [], "profiles": []}
    m = types.ModuleType("tensorrt")
    m.__version__ = "11.4.0.106"
    m.NetworkDefinitionCreationFlag = NS(STRONGLY_TYPED=1)
    m.BuilderFlag = NS(TF32=6)
    m.MemoryPoolType = NS(WORKSPACE=0)
    m.ProfilingVerbosity = NS(DETAILED=2)
    m.LayerType = NS(QUANTIZE=32, DEQUANTIZE=33, CONVOLUTION=0)
    m.ILogger = type("ILogger", (), {"Severity": NS(INTERNAL_ERROR=0, ERROR=1, WARNING=2),
                                     "__init__": lambda self: None})
    m.Dims = tuple
    layers = [NS(type=m.LayerType.CONVOLUTION)] + ([NS(type=32), NS(type=33)] if qdq else [])
    network = NS(num_inputs=1, num_outputs=1, num_layers=len(layers), get_layer=lambda i: layers[i],
                 get_input=lambda i: NS(name="input", dtype="DataType.FLOAT", shape=(-1, 3, 8, 8)),
                 get_output=lambda i: NS(name="logits", dtype="DataType.FLOAT"))
    m.OnnxParser = lambda net, log: NS(parse_from_file=lambda path: rec.update(onnx=path) or True,
                                       num_errors=0)
    config = NS(set_memory_pool_limit=lambda pool, size: rec.update(workspace=size),
                set_flag=rec["set"].append, clear_flag=rec["cleared"].append,
                add_optimization_profile=lambda p: None,
                create_timing_cache=lambda data: rec.update(timing_in=data) or "tc",
                set_timing_cache=lambda tc, ignore: True,
                get_timing_cache=lambda: NS(serialize=lambda: b"tactics"))
    rec["config"] = config
    m.Builder = lambda log: NS(
        create_network=lambda flags: rec["flags"].append(flags) or network,
        create_builder_config=lambda: config,
        create_optimization_profile=lambda: NS(
            set_shape=lambda name, a, b, c: rec["profiles"].append((a, b, c))),
        build_serialized_network=lambda net, cfg: b"engine")
    return m, rec


def _tensorrt_ctx(tmp_path, runner_options: dict):
    from infer_compare.backends.exporter import ExportContext
    from infer_compare.catalog.formats import get_format
    from infer_compare.measure.plan import check_runner_options

    ctx = ExportContext(model=None, model_name="m", input_shape=(3, 8, 8), num_classes=2, calibration=None,
                        max_batch=256, batch_sizes={"cpu": (1, 8), "cuda": (1, 32, 256)},
                        cache_root=str(tmp_path), option_sets=check_runner_options(runner_options))
    return ctx.for_format(get_format("tensorrt"))  # as api._ensure hands it to the exporter


def test_tensorrt_builder_gets_the_options_profiles_and_caches(tmp_path, monkeypatch):
    import sys

    from infer_compare.backends.tensorrt import export as trt_exp

    fake, rec = _stand_in_tensorrt()
    monkeypatch.setitem(sys.modules, "tensorrt", fake)
    monkeypatch.setattr(trt_exp, "trt_status", lambda: (fake, "", fake.__version__))
    monkeypatch.setattr(trt_exp, "first_gpu", lambda: {"name": "NVIDIA H100", "compute_capability": "9.0"})
    ctx = _tensorrt_ctx(tmp_path, {"tensorrt": {"workspace_mib": 1024, "builder_optimization_level": 5}})
    (tmp_path / "fp32").mkdir()
    res = trt_exp.TensorRTExporter().export(ctx, str(tmp_path / "m.onnx"), tmp_path / "fp32", "fp32")
    assert rec["flags"] == [1 << 1] and rec["workspace"] == 1024 * 2**20 and \
        rec["onnx"] == str(tmp_path / "m.onnx")
    assert rec["config"].builder_optimization_level == 5 and rec["config"].profiling_verbosity == 2
    assert rec["cleared"] == [6] and rec["set"] == []  # fp32: TF32 cleared
    assert rec["profiles"] == [((b, 3, 8, 8),) * 3 for b in (1, 32, 256)]
    assert Path(res.path).read_bytes() == b"engine" and res.options["network_flags"] == "STRONGLY_TYPED"
    tc = Path(res.options["timing_cache"]["path"])
    assert tc.parent == tmp_path / "tensorrt-timing" and tc.read_bytes() == b"tactics" and "H100" in tc.name
    (tmp_path / "tf32").mkdir()
    trt_exp.TensorRTExporter().export(ctx, str(tmp_path / "m.onnx"), tmp_path / "tf32", "tf32")
    assert rec["set"] == [6] and rec["timing_in"] == b"tactics"  # tf32: TF32 set; the timing cache reused
    with pytest.raises(Exception, match="no QuantizeLinear/DequantizeLinear"):
        trt_exp.TensorRTExporter().export(ctx, str(tmp_path / "m.onnx"), tmp_path, "int8")
    e = trt_exp.TensorRTExporter.cache_extras(ctx, "fp32")
    assert e["workspace_mib"] == 1024 and e["builder_optimization_level"] == 5 and \
        e["tensorrt"] == "11.4.0.106"
    assert e["gpu"] == "NVIDIA H100" and e["compute_capability"] == "9.0"
    assert e["profiles"] == [[1, 1, 1], [32, 32, 32], [256, 256, 256]]
    assert trt_exp.TensorRTExporter.cache_extras(ctx, "tf32") != e
    assert trt_exp.TensorRTExporter.cache_extras(_tensorrt_ctx(tmp_path, {}), "fp32")["workspace_mib"] == 4096


def test_tensorrt_runner_and_exporter_refuse_other_precisions():
    from infer_compare.backends.onnxruntime.run_trt import OnnxRuntimeTensorRTRunner
    from infer_compare.backends.tensorrt.run import TensorRTRunner

    for cls in (TensorRTRunner, OnnxRuntimeTensorRTRunner):
        assert all(cls.supports("x", p, "cuda:0").available for p in ("fp32", "tf32", "fp16", "int8"))
        assert not cls.supports("x", "bf16", "cuda:0").available
    assert FORMATS["tensorrt"].precisions == ("fp32", "tf32", "fp16", "int8")


def test_ort_tensorrt_ep_settings(tmp_path, monkeypatch):
    from infer_compare.backends.onnxruntime.run_trt import TF32_ENV, OnnxRuntimeTensorRTRunner
    from infer_compare.backends.runner import RunOptions

    def runner(prec: str) -> OnnxRuntimeTensorRTRunner:
        r = OnnxRuntimeTensorRTRunner("m.onnx", "cuda:0", RunOptions(precision=prec, batch_size=8,
                                                                      model={"input_shape": [3, 8, 8]},
                                                                      cache_dir=str(tmp_path)))
        r._dev_id = 0
        return r

    monkeypatch.setenv(TF32_ENV, "1")  # restored after the test
    assert "set in this cell's process" in runner("fp32")._set_tf32_env() and os.environ[TF32_ENV] == "0"
    assert "was removed" in runner("tf32")._set_tf32_env() and TF32_ENV not in os.environ
    trt_opts = dict(runner("int8")._gpu_providers()[0][1])
    assert trt_opts["trt_int8_enable"] == 1 and trt_opts["trt_fp16_enable"] == 0
    assert trt_opts["trt_engine_cache_path"].startswith(str(tmp_path / "ort-trt-engines"))
    assert trt_opts["trt_timing_cache_path"] == trt_opts["trt_engine_cache_path"]
    assert trt_opts["trt_profile_opt_shapes"] == "input:8x3x8x8"
    fp32 = dict(runner("fp32")._gpu_providers()[0][1])
    assert fp32["trt_engine_cache_path"] != trt_opts["trt_engine_cache_path"] and fp32["trt_int8_enable"] == 0
