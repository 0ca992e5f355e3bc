"""ONNX Runtime: the CPU execution provider (threads set through SessionOptions)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import deps
from ..records import Availability
from .base import Runner


class OnnxRuntimeRunner(Runner):
    name = "onnxruntime"
    provider = "CPUExecutionProvider"

    @classmethod
    def probe(cls, device: str = "cpu") -> Availability:
        if not deps.has("onnxruntime"):
            return Availability(False, "ONNX Runtime is not installed", deps.hint("onnxruntime"))
        v = deps.version("onnxruntime")
        if device.startswith("cuda"):
            return Availability(False, "the ONNX Runtime CUDA runner is not part of this version",
                                "pip install onnxruntime-gpu", version=v)
        try:
            import onnxruntime as ort

            providers = tuple(ort.get_available_providers())
        except Exception as e:
            return Availability(False, f"onnxruntime fails to import: {e}", deps.hint("onnxruntime"), version=v)
        return Availability(True, version=v, devices=("cpu",), details={"providers": list(providers)})

    @classmethod
    def supports(cls, fmt: str, precision: str, device: str) -> Availability:
        if device == "cpu" and precision != "fp32":
            return Availability(False, f"ONNX Runtime's CPU provider has few {precision} kernels (it would insert "
                                       "casts around most ops); fp16 ONNX is measured on CUDA")
        return Availability(True)

    def load(self) -> None:
        import onnxruntime as ort

        so = ort.SessionOptions()
        if self.options.threads:
            so.intra_op_num_threads = int(self.options.threads)
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(self.artifact, so, providers=[self.provider])
        self.input_name = self.session.get_inputs()[0].name
        self.output_names = [self.session.get_outputs()[0].name]
        itype = self.session.get_inputs()[0].type
        self._dtype = np.float16 if "float16" in itype else np.float32
        self.exec_precision = "fp16" if self._dtype == np.float16 else "fp32"
        self.settings = {"provider": self.session.get_providers()[0], "intra_op_threads": so.intra_op_num_threads,
                         "inter_op_threads": 1, "graph_optimization": "ORT_ENABLE_ALL"}
        self._ort_version = ort.__version__

    def prepare(self, batch: np.ndarray) -> Any:
        return np.ascontiguousarray(batch, dtype=self._dtype)

    def run(self, prepared: Any) -> Any:
        return self.session.run(self.output_names, {self.input_name: prepared})[0]

    def library_versions(self) -> dict[str, str]:
        return {"onnxruntime": self._ort_version}


class OnnxRuntimeTensorRTRunner(OnnxRuntimeRunner):
    name = "onnxruntime-trt"
    provider = "TensorrtExecutionProvider"

    @classmethod
    def probe(cls, device: str = "cpu") -> Availability:
        return Availability(False, "the ONNX Runtime TensorRT EP runner is not part of this version",
                            "pip install onnxruntime-gpu tensorrt")
