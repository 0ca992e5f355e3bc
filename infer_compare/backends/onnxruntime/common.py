"""What the ONNX Runtime runners share: the providers of the installed build, the GPU
install hint, and whether TensorRT's library (for the TensorRT EP) loads."""

from __future__ import annotations

from ... import deps

GPU_HINT = "pip install onnxruntime-gpu  (its CUDA major must match the CUDA libraries: CUDA 12 or 13 wheels)"
CUDA_PRECISIONS = ("fp32", "tf32", "fp16")


def providers() -> tuple[str, ...]:
    import onnxruntime as ort

    return tuple(ort.get_available_providers())



def nvinfer_missing() -> str:
    """'' when libnvinfer loads, else why not (ctypes; nothing else is imported)."""
    import ctypes

    errs = []
    for name in ("libnvinfer.so.10", "libnvinfer.so.8", "libnvinfer.so"):
        try:
            ctypes.CDLL(name)
            return ""
        except OSError as e:
            errs.append(str(e).split(":")[-1].strip())
    if deps.has("tensorrt_libs"):
        try:
            import tensorrt_libs  # noqa: F401  (the pip wheel's loader puts libnvinfer in the process)

            return ""
        except Exception as e:
            errs.append(f"tensorrt_libs: {e}")
    return f"libnvinfer.so.10 / .so.8 not found ({errs[0] if errs else 'no library'})"
