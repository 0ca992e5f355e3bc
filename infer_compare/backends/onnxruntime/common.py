"""What the ONNX Runtime runners share: the providers of the installed build, the GPU
install hint, and whether TensorRT's library (for the TensorRT EP) loads."""

from __future__ import annotations

import platform

from infer_compare.catalog import deps

GPU_HINT = "pip install onnxruntime-gpu  (its CUDA major must match the CUDA libraries: CUDA 12 or 13 wheels)"
if platform.machine().lower() in ("aarch64", "arm64"):  # a Jetson: PyPI's aarch64 wheels are not JetPack's
    GPU_HINT = ("on a Jetson: the onnxruntime-gpu wheel built for its JetPack (NVIDIA's Jetson wheels: "
                "the CUDA of the JetPack); PyPI's aarch64 onnxruntime-gpu wheels need glibc 2.34 and CUDA "
                "12/13 libraries")
CUDA_PRECISIONS = ("fp32", "tf32", "fp16")


def providers() -> tuple[str, ...]:
    import onnxruntime as ort

    return tuple(ort.get_available_providers())


# TensorRT 10 first: the onnxruntime-gpu wheels of today link the TensorRT EP against it
NVINFER = ("libnvinfer.so.10", "libnvinfer.so.11", "libnvinfer.so.8", "libnvinfer.so")


def nvinfer_found() -> tuple[str, str]:
    """(the TensorRT library that loads -- e.g. 'libnvinfer.so.10' --, '') or ('', why none
    does). ctypes only; TensorRT's Python package is not imported. Never raises."""
    import ctypes

    errs = []
    for name in NVINFER:
        try:
            ctypes.CDLL(name)
            return name, ""
        except OSError as e:
            errs.append(str(e).split(":")[-1].strip())
    if deps.has("tensorrt_libs"):
        try:
            import tensorrt_libs  # noqa: F401  (the pip wheel's loader puts libnvinfer in the process)

            return "libnvinfer (tensorrt_libs wheel)", ""
        except Exception as e:
            errs.append(f"tensorrt_libs: {e}")
    return "", f"libnvinfer.so.10 / .so.11 / .so.8 not found ({errs[0] if errs else 'no library'})"


def nvinfer_missing() -> str:
    """'' when libnvinfer loads, else why not."""
    return nvinfer_found()[1]
