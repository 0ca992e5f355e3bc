"""Lazy optional imports with install hints.

Nothing here imports a heavy library: ``has()`` asks importlib for the module spec,
``version()`` reads installed distribution metadata.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import importlib.util
from typing import Any

from .errors import BackendUnavailable

# module name -> (distribution names to read the version from, install hint)
KNOWN: dict[str, tuple[tuple[str, ...], str]] = {
    "torch": (("torch",), "pip install 'infer-compare[torch]'  (PyTorch: see pytorch.org for the build for your CUDA)"),
    "torchvision": (("torchvision",), "pip install 'infer-compare[torch]'"),
    "onnx": (("onnx",), "pip install 'infer-compare[torch]'  (or: pip install onnx)"),
    "onnxscript": (("onnxscript",), "pip install onnxscript"),
    "onnxruntime": (
        ("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino", "onnxruntime-directml"),
        "pip install 'infer-compare[onnxruntime]'  (GPU: pip install onnxruntime-gpu)",
    ),
    "openvino": (("openvino",), "pip install 'infer-compare[openvino]'"),
    "nncf": (("nncf",), "pip install 'infer-compare[openvino]'  (nncf brings OpenVINO int8 quantization)"),
    "tensorrt": (
        ("tensorrt", "tensorrt-cu13", "tensorrt-cu12", "tensorrt_libs"),
        "pip install tensorrt (x86-64 with CUDA), or on a Jetson use JetPack's python3-libnvinfer",
    ),
    "ai_edge_litert": (("ai-edge-litert",), "pip install 'infer-compare[tflite]'  (ai-edge-litert)"),
    "tflite_runtime": (("tflite-runtime",), "pip install tflite-runtime  (needs numpy<2)"),
    "pycoral": (("pycoral",), "install pycoral and libedgetpu from Coral's package repository (coral.ai/software)"),
    "sklearn": (("scikit-learn",), "pip install 'infer-compare[data]'"),
    "skimage": (("scikit-image",), "pip install 'infer-compare[data]'"),
    "PIL": (("pillow", "Pillow"), "pip install pillow"),
    "pynvml": (("nvidia-ml-py", "pynvml"), "pip install 'infer-compare[gpu]'  (nvidia-ml-py)"),
    "matplotlib": (("matplotlib",), "pip install 'infer-compare[report]'"),
    "scipy": (("scipy",), "pip install 'infer-compare[report]'"),
    "cpuinfo": (("py-cpuinfo",), "pip install py-cpuinfo"),
}


def has(module: str) -> bool:
    """True when ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def hint(module: str) -> str:
    return KNOWN.get(module, ((), f"pip install {module}"))[1]


def version(module_or_dist: str) -> str | None:
    """The installed version of a module (via its known distributions) or distribution."""
    dists = KNOWN.get(module_or_dist, ((module_or_dist,), ""))[0]
    for dist in dists:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            continue
    return None


def require(module: str, purpose: str = "") -> Any:
    """Import ``module`` or raise BackendUnavailable with its install hint."""
    if not has(module):
        what = f" (needed for {purpose})" if purpose else ""
        raise BackendUnavailable(f"Python module '{module}' is not installed{what}", hint(module))
    try:
        return importlib.import_module(module)
    except Exception as e:  # a broken install is a reason, not a crash
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BackendUnavailable(f"'{module}' is installed but fails to import: {first}", hint(module)) from e


# Library versions recorded in every report (only those installed appear).
VERSIONED = (
    "numpy", "torch", "torchvision", "onnx", "onnxscript", "onnxruntime", "openvino", "nncf",
    "tensorrt", "ai_edge_litert", "tflite_runtime", "pycoral", "sklearn", "skimage", "PIL", "pynvml",
)


def library_versions() -> dict[str, str]:
    out = {}
    for m in VERSIONED:
        v = version(m)
        if v is not None:
            out[KNOWN.get(m, ((m,), ""))[0][0]] = v
    return out
