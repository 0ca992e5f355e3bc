"""ONNX Runtime's TensorRT execution provider (runner ``onnxruntime-trt``), with the
CUDA EP as fallback for nodes TensorRT does not take. Precision lives in the ONNX
artifact, as for the TensorRT runner:

fp32  the fp32 ONNX with ``NVIDIA_TF32_OVERRIDE=0`` set in this cell's process before
      the session is created: TensorRT turns TF32 on by default and the EP has no
      switch for it (the variable also holds for the CUDA EP fallback);
tf32  the fp32 ONNX with TensorRT's default (TF32 allowed; the variable is removed
      from this cell's process if it was inherited);
fp16  the fp16 ONNX, ``trt_fp16_enable`` (the EP builds weakly typed networks, so
      TensorRT may also run the nodes the fp16 file keeps in fp32 in fp16);
int8  the QDQ ONNX, ``trt_int8_enable`` without a calibration table: TensorRT's
      explicit quantization follows the QuantizeLinear/DequantizeLinear nodes.

Engines and the EP's timing cache are kept under the artifact cache root
(``--cache-dir``)/ort-trt-engines/<precision>/; fp32 engines have their own folder
because the EP's cache key does not hold the TF32 setting. The EP needs TensorRT's
library (libnvinfer.so.10, or .so.11 where the onnxruntime-gpu build links it); where
none loads, the row is skipped with the reason. The EP does not report the precision
each layer ran: the row's ``exec_precision`` repeats the request and says so.

The TensorRT EP has never run on the machines this was written on (no libnvinfer
there; docs/gpu.md)."""

from __future__ import annotations

import os
from typing import Any

from infer_compare.backends.onnxruntime.common import GPU_HINT, nvinfer_found
from infer_compare.backends.onnxruntime.common import providers as ort_providers
from infer_compare.backends.onnxruntime.options import OrtTensorRTOptions
from infer_compare.backends.onnxruntime.run import OnnxRuntimeRunner
from infer_compare.base.cache import default_root
from infer_compare.base.records import Availability
from infer_compare.catalog import deps
from infer_compare.catalog.formats import ONNX_INPUT_NAME as INPUT_NAME

PRECISIONS = ("fp32", "tf32", "fp16", "int8")
TF32_ENV = "NVIDIA_TF32_OVERRIDE"
_CACHE_SUB = {"fp32": "fp32-tf32-off", "tf32": "tf32", "fp16": "fp16", "int8": "int8-qdq"}


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
        lib, why = nvinfer_found()
        if not lib:
            return Availability(False, f"the TensorRT EP cannot load TensorRT: {why}",
                                "pip install tensorrt (the major onnxruntime-gpu was built with), "
                                "or put libnvinfer on LD_LIBRARY_PATH", version=v)
        return Availability(True, version=v, devices=(device,), details={"providers": list(providers),
                                                                          "libnvinfer": lib})

    @classmethod
    def supports(cls, fmt: str, precision: str, device: str) -> Availability:
        if precision not in PRECISIONS:
            return Availability(False, f"the TensorRT EP rows are {', '.join(PRECISIONS)} "
                                       "(fp32/tf32 from the fp32 ONNX, fp16 from the fp16 ONNX, "
                                       f"int8 from the QDQ ONNX), not {precision}")
        return Availability(True)

    def load(self) -> None:
        tf32 = self._set_tf32_env()  # before the session (and TensorRT) exist
        super().load()
        self.settings["tf32"] = tf32
        self.settings["libnvinfer"] = nvinfer_found()[0]

    def _set_tf32_env(self) -> str:
        if self.options.precision == "fp32":
            os.environ[TF32_ENV] = "0"
            return (f"off: {TF32_ENV}=0 set in this cell's process before the session was created "
                    "(TensorRT's default is on; the EP has no option for it)")
        if self.options.precision == "tf32":
            inherited = os.environ.pop(TF32_ENV, None)
            return "on (TensorRT's default)" + (f"; the inherited {TF32_ENV}={inherited} was removed in this "
                                                "cell's process" if inherited is not None else "")
        return f"TensorRT's default ({TF32_ENV} {os.environ.get(TF32_ENV, 'unset')}) for the fp32 parts"

    def _gpu_providers(self) -> list:
        prec = self.options.precision
        root = self.options.cache_dir or str(default_root())
        cache_dir = os.path.join(root, "ort-trt-engines", _CACHE_SUB.get(prec, prec))
        os.makedirs(cache_dir, exist_ok=True)
        b = int(self.options.batch_size)
        shape = "x".join(str(int(v)) for v in self.options.model.get("input_shape", ()))
        trt_opts: dict[str, Any] = {
            "device_id": self._dev_id,
            "trt_fp16_enable": 1 if prec == "fp16" else 0,
            "trt_int8_enable": 1 if prec == "int8" else 0,  # QDQ: explicit quantization, no calibration table
            "trt_engine_cache_enable": 1,
            "trt_engine_cache_path": cache_dir,
            "trt_timing_cache_enable": 1,
            "trt_timing_cache_path": cache_dir,
            "trt_max_workspace_size": int(self.options.runner_as(OrtTensorRTOptions).workspace_mib) * 2**20,
        }
        if shape:
            dims = f"{INPUT_NAME}:{b}x{shape}"
            trt_opts.update(trt_profile_min_shapes=dims, trt_profile_opt_shapes=dims,
                            trt_profile_max_shapes=dims)
        self._cuda_opts = {"device_id": self._dev_id, "use_tf32": 1 if prec == "tf32" else 0}
        return [("TensorrtExecutionProvider", trt_opts), ("CUDAExecutionProvider", self._cuda_opts)]

    def _after_session(self) -> None:
        super()._after_session()
        self.exec_precision = self.options.precision
        self.notes.append("TensorRT EP: nodes TensorRT cannot take run on the CUDA EP; the EP builds (or "
                          "loads from its cache) the engine while the session is created where it can "
                          "(profile shapes given), else in the first call, the cold one: the session does "
                          "not run before it; the EP does not report each layer's precision, so the row's "
                          "precision is the one requested")
