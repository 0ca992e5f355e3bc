"""ONNX Runtime: the CPU execution provider, the CUDA EP and the TensorRT EP.

CPU: threads set through SessionOptions; numpy in, numpy out.

CUDA (``onnxruntime-gpu``; runner ``onnxruntime`` on ``cuda:N``):
  fp32  the fp32 ONNX with the CUDA EP option ``use_tf32=0`` (strict float32);
  tf32  the fp32 ONNX with ``use_tf32=1`` (the CUDA EP's own default);
  fp16  the fp16 ONNX (exported from ``model.half()``): float16 in and out.
  IO binding (option ``io_binding``, default True): the input is copied to a GPU
  OrtValue before timing and the output is bound to GPU memory, so the timed call is
  ``run_with_iobinding`` alone (device-resident, like the PyTorch CUDA rows). With
  ``io_binding=False`` each timed call takes a numpy array and returns one, so it
  includes the host->device and device->host copies. The row's settings say which.
  ``cudnn_conv_algo_search`` (option, default EXHAUSTIVE) is recorded.

TensorRT EP (runner ``onnxruntime-trt``): the TensorRT EP with the CUDA EP as
fallback, fp32 (TF32 off) or fp16 (``trt_fp16_enable``) on the fp32 ONNX; engines
are cached under the artifact cache. It needs TensorRT's libraries (libnvinfer);
where they do not load, the row is skipped with the reason.

A session whose first provider is not the requested one (ONNX Runtime silently falls
back to the CPU when the CUDA libraries fail to load) is an error, never a CPU row
labelled CUDA.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import deps
from ...errors import BackendUnavailable, RunnerError
from ...records import Availability
from ..runner import Runner
from .common import CUDA_PRECISIONS, GPU_HINT
from .common import providers as _providers
from .options import OrtOptions


class OnnxRuntimeRunner(Runner):
    name = "onnxruntime"
    provider = "CPUExecutionProvider"

    @classmethod
    def probe(cls, device: str = "cpu") -> Availability:
        if not deps.has("onnxruntime"):
            return Availability(False, "ONNX Runtime is not installed", deps.hint("onnxruntime"))
        v = deps.version("onnxruntime")
        try:
            providers = _providers()
        except Exception as e:
            return Availability(False, f"onnxruntime fails to import: {e}", deps.hint("onnxruntime"), version=v)
        if device.startswith("cuda"):
            if "CUDAExecutionProvider" not in providers:
                return Availability(False, f"this onnxruntime build has no CUDA execution provider "
                                           f"(providers: {', '.join(providers)})", GPU_HINT, version=v)
            return Availability(True, version=v, devices=(device,), details={"providers": list(providers)})
        return Availability(True, version=v, devices=("cpu",), details={"providers": list(providers)})

    @classmethod
    def supports(cls, fmt: str, precision: str, device: str) -> Availability:
        if not device.startswith("cuda"):
            if precision != "fp32":
                return Availability(False, f"ONNX Runtime's CPU provider runs fp32 here; {precision} ONNX is "
                                           "measured on CUDA")
            return Availability(True)
        if precision not in CUDA_PRECISIONS:
            return Availability(False, f"ONNX Runtime CUDA runs {', '.join(CUDA_PRECISIONS)}, not {precision}")
        return Availability(True)

    # ------------------------------------------------------------------ lifecycle
    def load(self) -> None:
        import onnxruntime as ort

        self._ort = ort
        self._ort_version = ort.__version__
        self._cuda = self.device.startswith("cuda")
        so = ort.SessionOptions()
        if self.options.threads:
            so.intra_op_num_threads = int(self.options.threads)
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if not self._cuda:
            self.session = ort.InferenceSession(self.artifact, so, providers=[self.provider])
            self._io = False
            self._after_session()
            self.settings = {"provider": self.session.get_providers()[0], "intra_op_threads": so.intra_op_num_threads,
                             "inter_op_threads": 1, "graph_optimization": "ORT_ENABLE_ALL"}
            return
        from ...gpu import CallMeter, device_index

        self.meter = CallMeter(self.device, self.options.batch_size)
        self.meter.start()
        self._dev_id = device_index(self.device)
        providers = self._gpu_providers()
        self._libs = self._load_cuda_libs()
        self.session = self._create(so, providers)
        self._after_session()
        self._io = bool(self.options.runner_as(OrtOptions).io_binding)
        self.settings = {"providers": self.session.get_providers(), "provider_options": self._provider_options(),
                         "graph_optimization": "ORT_ENABLE_ALL", "cuda_libraries": self._libs,
                         "io": ("IO binding: device-resident input and output (copied to the GPU before timing; "
                                "no host copies in the timed call)") if self._io else
                               "numpy in, numpy out: host->device and device->host copies inside each timed call"}

    def _gpu_providers(self) -> list:
        prec = self.options.precision
        cuda_opts: dict[str, Any] = {
            "device_id": self._dev_id,
            "cudnn_conv_algo_search": self.options.runner_as(OrtOptions).cudnn_conv_algo_search,
            "use_tf32": 1 if prec == "tf32" else 0,
            "do_copy_in_default_stream": 1,
        }
        self._cuda_opts = cuda_opts
        return [("CUDAExecutionProvider", cuda_opts)]

    def _provider_options(self) -> dict[str, Any]:
        try:
            got = self.session.get_provider_options()
        except Exception:
            return {}
        keep = ("use_tf32", "cudnn_conv_algo_search", "device_id", "trt_fp16_enable", "trt_int8_enable",
                "trt_engine_cache_enable", "trt_max_workspace_size", "trt_builder_optimization_level")
        return {p: {k: v for k, v in o.items() if k in keep} for p, o in got.items()}

    def _load_cuda_libs(self) -> str:
        """Make the CUDA/cuDNN libraries findable. ONNX Runtime documents two ways:
        ``onnxruntime.preload_dlls()`` (from the nvidia-* pip packages) or importing a
        torch built for the same CUDA major first."""
        ort = self._ort
        how = []
        if hasattr(ort, "preload_dlls"):
            try:
                ort.preload_dlls()
                how.append("onnxruntime.preload_dlls()")
            except Exception as e:
                how.append(f"preload_dlls failed ({type(e).__name__})")
        return "; ".join(how) or "default library search path"

    def _create(self, so, providers):
        ort = self._ort
        want = providers[0][0] if isinstance(providers[0], tuple) else providers[0]
        try:
            sess = ort.InferenceSession(self.artifact, so, providers=providers)
        except Exception as e:
            raise RunnerError(f"{want} session failed: {str(e).strip().splitlines()[0][:300]}") from e
        if sess.get_providers()[0] != want and deps.has("torch") and "torch" not in __import__("sys").modules:
            # the documented fallback: torch loads the CUDA/cuDNN libraries it was built with
            import torch  # noqa: F401

            self._libs = (self._libs + "; " if getattr(self, "_libs", "") else "") + "import torch first"
            sess = ort.InferenceSession(self.artifact, so, providers=providers)
        if sess.get_providers()[0] != want:
            raise BackendUnavailable(
                f"{want} did not load (ONNX Runtime fell back to {', '.join(sess.get_providers())}; "
                "its CUDA/cuDNN or TensorRT libraries are missing or of another CUDA major)", GPU_HINT)
        return sess

    def _after_session(self) -> None:
        inp = self.session.get_inputs()[0]
        self.input_name = inp.name
        self.output_names = [self.session.get_outputs()[0].name]
        self._dtype = np.float16 if "float16" in inp.type else np.float32
        if self._cuda and self.options.precision == "tf32":
            self.exec_precision = "tf32"
        else:
            self.exec_precision = "fp16" if self._dtype == np.float16 else "fp32"

    def close(self) -> None:
        meter = getattr(self, "meter", None)
        if meter is not None:
            meter.close()

    # ------------------------------------------------------------------ inference
    def prepare(self, batch: np.ndarray) -> Any:
        x = np.ascontiguousarray(batch, dtype=self._dtype)
        if not self._io:
            return x
        ort = self._ort
        xv = ort.OrtValue.ortvalue_from_numpy(x, "cuda", self._dev_id)
        b = self.session.io_binding()
        b.bind_ortvalue_input(self.input_name, xv)
        b.bind_output(self.output_names[0], "cuda", self._dev_id)
        self.session.run_with_iobinding(b)  # allocate the output once, outside timing
        b.synchronize_outputs()
        return (b, xv)

    def run(self, prepared: Any) -> Any:
        if self._io:
            b = prepared[0]
            self.session.run_with_iobinding(b)
            b.synchronize_outputs()
            if self._cuda:
                self.meter.after_call()
            return b
        out = self.session.run(self.output_names, {self.input_name: prepared})[0]
        if self._cuda:
            self.meter.after_call()
        return out

    def to_numpy(self, outputs: Any) -> np.ndarray:
        if self._io:
            return np.asarray(outputs.copy_outputs_to_cpu()[0], dtype=np.float32)
        return np.asarray(outputs, dtype=np.float32)

    def extra_metrics(self) -> dict[str, Any]:
        if not getattr(self, "_cuda", False):
            return {}
        m = self.meter.metrics()
        m["device_time"] = ("not measured for ONNX Runtime: its CUDA stream is internal; latency is the host "
                            "clock around run_with_iobinding + synchronize" if self._io else
                            "not measured for ONNX Runtime; latency is the host clock around session.run "
                            "(host copies included)")
        note = None
        if "energy_mj_per_image" in m:
            note = f"energy {m['energy_mj_per_image']:.2f} mJ/image (NVML, {m.get('gpu_avg_power_w', '?')} W)"
        if note:
            self.notes.append(note)
        return m

    def library_versions(self) -> dict[str, str]:
        return {"onnxruntime": self._ort_version}
