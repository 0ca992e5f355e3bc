"""ONNX Runtime's TensorRT execution provider (runner ``onnxruntime-trt``): the
TensorRT EP with the CUDA EP as fallback, fp32 (TF32 off) or fp16
(``trt_fp16_enable``) on the fp32 ONNX; engines are cached under the artifact cache.
It needs TensorRT's libraries (libnvinfer); where they do not load, the row is skipped
with the reason."""

from __future__ import annotations

import os
from typing import Any

from ... import deps
from ...records import Availability
from .common import GPU_HINT, nvinfer_missing
from .common import providers as ort_providers
from .options import OrtTensorRTOptions
from .run import OnnxRuntimeRunner


class OnnxRuntimeTensorRTRunner(OnnxRuntimeRunner):
    name = "onnxruntime-trt"
    provider = "TensorrtExecutionProvider"

    @classmethod
    def probe(cls, device: str = "cpu") -> Availability:
        if not device.startswith("cuda"):
            return Availability(False, "the TensorRT EP runs on CUDA devices only")
        if not deps.has("onnxruntime"):
            return Availability(False, "ONNX Runtime is not installed", GPU_HINT)
        v = deps.version("onnxruntime")
        try:
            providers = ort_providers()
        except Exception as e:
            return Availability(False, f"onnxruntime fails to import: {e}", GPU_HINT, version=v)
        if "TensorrtExecutionProvider" not in providers:
            return Availability(False, f"this onnxruntime build has no TensorRT execution provider "
                                       f"(providers: {', '.join(providers)})", GPU_HINT, version=v)
        why = nvinfer_missing()
        if why:
            return Availability(False, f"the TensorRT EP cannot load TensorRT: {why}",
                                "pip install tensorrt (the same major as onnxruntime-gpu was built with), "
                                "or put libnvinfer on LD_LIBRARY_PATH", version=v)
        return Availability(True, version=v, devices=(device,), details={"providers": list(providers)})

    @classmethod
    def supports(cls, fmt: str, precision: str, device: str) -> Availability:
        if precision not in ("fp32", "fp16"):
            return Availability(False, f"the TensorRT EP rows are fp32 and fp16 (built from the fp32 ONNX), "
                                       f"not {precision}")
        return Availability(True)

    def _gpu_providers(self) -> list:
        from ...cache import default_root

        prec = self.options.precision
        cache_dir = os.path.join(self.options.cache_dir or str(default_root()), "ort-trt-engines")
        os.makedirs(cache_dir, exist_ok=True)
        b = int(self.options.batch_size)
        shape = "x".join(str(int(v)) for v in self.options.model.get("input_shape", ()))
        trt_opts: dict[str, Any] = {
            "device_id": self._dev_id,
            "trt_fp16_enable": 1 if prec == "fp16" else 0,
            "trt_engine_cache_enable": 1,
            "trt_engine_cache_path": cache_dir,
            "trt_timing_cache_enable": 1,
            "trt_max_workspace_size": int(self.options.runner_as(OrtTensorRTOptions).workspace_mib) * 2**20,
        }
        if shape:
            from ...formats import ONNX_INPUT_NAME as INPUT_NAME

            dims = f"{INPUT_NAME}:{b}x{shape}"
            trt_opts.update(trt_profile_min_shapes=dims, trt_profile_opt_shapes=dims, trt_profile_max_shapes=dims)
        self._cuda_opts = {"device_id": self._dev_id, "use_tf32": 0}
        return [("TensorrtExecutionProvider", trt_opts), ("CUDAExecutionProvider", self._cuda_opts)]

    def _after_session(self) -> None:
        super()._after_session()
        self.exec_precision = "fp16" if self.options.precision == "fp16" else "fp32"
        self.notes.append("TensorRT EP: nodes TensorRT cannot take run on the CUDA EP; the engine is built in "
                          "load() (first session run) and cached")
