"""Options of the ONNX Runtime runners."""

from __future__ import annotations

from dataclasses import dataclass

from ...options import Options, option

CONV_SEARCH = ("EXHAUSTIVE", "HEURISTIC", "DEFAULT")


@dataclass(frozen=True)
class OrtOptions(Options):
    io_binding: bool = option(True, "ONNX Runtime CUDA rows pass numpy arrays (host copies inside each timed call)",
                              flag="--ort-no-io-binding")
    cudnn_conv_algo_search: str = option("EXHAUSTIVE", "cuDNN convolution algorithm search of the CUDA EP",
                                         choices=CONV_SEARCH)


@dataclass(frozen=True)
class OrtTensorRTOptions(OrtOptions):
    workspace_mib: int = option(4096, "TensorRT builder workspace in MiB (TensorRT engines and the ORT TensorRT EP)",
                                flag="--tensorrt-workspace", minimum=1)
