"""GPU backends: on a CPU-only machine every GPU row skips with its reason; the pure
parts (NVML fallbacks, per-call accounting, CLI flags, format rows) are checked here.
With a CUDA device (marker ``gpu``) LeNet-5 round-trips through the CUDA runners."""

from __future__ import annotations

import numpy as np
import pytest

from infer_compare import gpu
from infer_compare.formats import FORMATS, RUNNERS, build_chain


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
    assert build_chain("tensorrt", "fp16") == [("pytorch", "fp32"), ("onnx", "fp32"), ("tensorrt", "fp16")]


def test_cli_gpu_flags_become_runner_options():
    from infer_compare.cli import build_parser, runner_options_from_args

    a = build_parser().parse_args(["--model", "lenet5", "--cuda-graphs", "--compile-mode", "max-autotune",
                                   "--ort-no-io-binding", "--tensorrt-workspace", "2048", "--tensorrt-io", "device"])
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

    rep = compare("lenet5", backends=["pytorch", "pytorch-compile", "onnxruntime", "tensorrt"], devices=["cuda"],
                  cache_dir=cache_dir, batch_sizes=[1], min_time_s=0.0, min_iters=1, warmup_iters=1)
    assert rep.rows and all(r.status == "skipped" and r.reason for r in rep.rows)
    assert {r.backend for r in rep.rows} == {"pytorch", "pytorch-compile", "onnxruntime", "tensorrt"}


@pytest.mark.gpu
@pytest.mark.slow
def test_lenet_on_cuda_round_trip(cache_dir):
    if not _has_cuda():
        pytest.skip("no CUDA device: " + __import__("infer_compare.backends.pytorch.run", fromlist=["x"])
                    .PyTorchRunner.probe("cuda:0").reason)
    from infer_compare import compare

    rep = compare("lenet5", backends=["pytorch", "onnxruntime"], devices=["cuda"], precisions=["fp32", "fp16"],
                  cache_dir=cache_dir, batch_sizes=[8], min_time_s=0.1, min_iters=3)
    ran = [r for r in rep.rows if r.status != "skipped"]
    assert ran and all(r.status == "ok" for r in ran), [(r.label, r.reason) for r in ran]
    torch_rows = [r for r in ran if r.backend == "pytorch"]
    assert all(r.extra.get("timing") == "cuda events" and r.extra["device_ms_p50"] > 0 for r in torch_rows)
    assert all(np.isfinite(r.throughput) for r in ran)
