"""What the TensorRT exporter and runner share: the import probe (TensorRT >= 10),
the version parser, the GPU an engine is built for, and a logger that keeps
TensorRT's warnings and errors for the error message.

TensorRT itself has never run on the machines this code was written and tested on
(no full TensorRT wheel reaches them); see docs/gpu.md, "What did not run"."""

from __future__ import annotations

import re
from typing import Any

from infer_compare.catalog import deps
from infer_compare.catalog.device_kinds import gpus

# Strongly typed networks built from the precision's ONNX file need TensorRT 10 (the
# creation flag STRONGLY_TYPED exists since 9.x; 10.0 is the first release whose API we
# use without the pre-10 implicit-batch and calibrator paths). TensorRT 11 only builds
# strongly typed networks.
MIN_VERSION = (10, 0)


def trt_status() -> tuple[Any, str, str | None]:
    """(tensorrt module or None, reason when None, version). Never raises.

    ``tensorrt-stubs`` alone installs a ``tensorrt`` folder of .pyi files, which
    imports as an empty namespace package: that is "not installed", not TensorRT."""
    if not deps.has("tensorrt"):
        return None, "TensorRT (the tensorrt Python package) is not installed", None
    try:
        import tensorrt as trt
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return None, f"tensorrt is installed but fails to import: {first}", deps.version("tensorrt")
    v = getattr(trt, "__version__", None)
    if v is None or not hasattr(trt, "Builder"):
        return None, "only the tensorrt type stubs are installed, not TensorRT itself", None
    if parse_version(v) < MIN_VERSION:
        return None, too_old(v), v
    return trt, "", v


def too_old(v: str) -> str:
    return (f"TensorRT {v} is too old: engines here are strongly typed networks built from the "
            f"precision's ONNX file, which needs TensorRT >= {MIN_VERSION[0]}.{MIN_VERSION[1]} (on a Jetson: "
            "JetPack 6 or newer)")


def parse_version(v: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", v or "")
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def first_gpu() -> dict[str, Any] | None:
    """The GPU TensorRT builds for (cuda:0 as NVML or the driver reports it)."""
    try:
        g = gpus()
    except Exception:
        return None
    return dict(g[0]) if g else None


def slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s).strip("_") or "gpu"


class TrtLog:
    """A TensorRT logger that keeps the warnings and errors for the error message."""

    def __init__(self) -> None:
        import tensorrt as trt

        outer = self
        self.lines: list[str] = []
        keep = {trt.ILogger.Severity.INTERNAL_ERROR, trt.ILogger.Severity.ERROR, trt.ILogger.Severity.WARNING}

        class _Logger(trt.ILogger):
            def __init__(self) -> None:
                trt.ILogger.__init__(self)

            def log(self, severity: trt.ILogger.Severity, msg: str) -> None:
                if severity in keep:
                    outer.lines.append(f"{severity}: {msg}")

        self.logger = _Logger()

    def tail(self, n: int = 8) -> str:
        return " | ".join(self.lines[-n:])
