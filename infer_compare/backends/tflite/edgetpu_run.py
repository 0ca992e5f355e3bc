"""Coral Edge TPU: the compiled ``*_edgetpu.tflite`` file with the libedgetpu delegate.

pycoral's ``make_interpreter`` when pycoral is installed; otherwise the LiteRT
(ai-edge-litert) or tflite-runtime interpreter with ``load_delegate`` on the
platform's library (libedgetpu.so.1 / libedgetpu.1.dylib / edgetpu.dll). Input
quantization, NHWC layout and output dequantization are the TFLite runner's.

A missing accelerator (USB 1a6e:089a / 18d1:9302, or /dev/apex_*), a missing
libedgetpu and a delegate that fails to load are skip reasons, not crashes. The
op coverage that the compiler reported and the static pre-check's prediction (both in the
artifact's manifest) go into the row (``extra["op_coverage"]``, ``extra["edgetpu_precheck"]``)
with a note "pre-check predicted N/M, compiler mapped K/M"; a model that mostly runs on
the CPU gets a note of its own.
"""

from __future__ import annotations

import ctypes.util
import json
import platform
from pathlib import Path
from typing import Any

from infer_compare.backends.tflite.common import interpreter_module
from infer_compare.backends.tflite.edgetpu_export import coverage_notes
from infer_compare.backends.tflite.options import EdgeTpuOptions
from infer_compare.backends.tflite.run import TFLiteRunner
from infer_compare.base.errors import BackendUnavailable
from infer_compare.base.records import Availability
from infer_compare.catalog import deps, device_kinds

LIB_HINT = ("install the Edge TPU runtime from Coral's apt repository: sudo apt-get install libedgetpu1-std "
            "(macOS/Windows: the runtime package from coral.ai/software); pycoral is optional")


def delegate_library() -> str:
    return {"Darwin": "libedgetpu.1.dylib",
            "Windows": "edgetpu.dll"}.get(platform.system(), "libedgetpu.so.1")


def _coral_device(device: str) -> str:
    """'edgetpu:usb:0' -> 'usb:0' (pycoral/libedgetpu syntax); 'edgetpu' -> '' (the first one)."""
    parts = device.split(":", 1)
    return parts[1] if len(parts) == 2 else ""


def _manifest_options(artifact: str) -> dict[str, Any]:
    man = Path(artifact).parent / "manifest.json"
    try:
        opts = json.loads(man.read_text()).get("options", {})
    except (OSError, ValueError):
        return {}
    return opts if isinstance(opts, dict) else {}


def read_coverage(artifact: str) -> dict[str, Any] | None:
    """The compiler's op coverage from the cache entry's manifest beside the artifact."""
    return _manifest_options(artifact).get("op_coverage")


def read_precheck(artifact: str) -> dict[str, Any] | None:
    """The static pre-check's prediction recorded at compile time (None when absent or failed)."""
    pred = _manifest_options(artifact).get("precheck")
    return pred if isinstance(pred, dict) and "tpu_ops" in pred else None


class EdgeTpuRunner(TFLiteRunner):
    name = "edgetpu"

    @classmethod
    def probe(cls, device: str = "edgetpu") -> Availability:
        found = device_kinds.edgetpu_devices()
        if not found:
            return Availability(False, "no Coral Edge TPU found (USB 1a6e:089a / 18d1:9302, or /dev/apex_*)",
                                LIB_HINT)
        if deps.has("pycoral"):
            return Availability(True, version=f"pycoral {deps.version('pycoral')}", devices=tuple(found))
        try:
            _mod, pkg, ver = interpreter_module()
        except BackendUnavailable as e:
            return Availability(False, e.reason, e.hint, devices=tuple(found))
        lib = delegate_library()
        if platform.system() == "Linux" and ctypes.util.find_library("edgetpu") is None:
            return Availability(False, f"the Edge TPU runtime library ({lib}) is not installed", LIB_HINT,
                                devices=tuple(found))
        return Availability(True, version=f"{pkg} {ver} + {lib}", devices=tuple(found))

    @classmethod
    def supports(cls, fmt: str, precision: str, device: str) -> Availability:
        if precision != "int8":
            return Availability(False, f"the Edge TPU runs int8 only, not {precision}")
        return Availability(True)

    def _make_interpreter(self, mod: Any) -> Any:
        dev = _coral_device(self.device)
        if deps.has("pycoral") and self.options.runner_as(EdgeTpuOptions).use_pycoral:
            edgetpu = deps.require("pycoral.utils.edgetpu", "the Edge TPU")
            try:
                it = edgetpu.make_interpreter(self.artifact, device=dev or None)
            except (ValueError, RuntimeError, OSError) as e:
                raise BackendUnavailable(f"pycoral could not open the Edge TPU {dev or '(first)'}: {e}",
                                         LIB_HINT) from e
            self._how = f"pycoral {deps.version('pycoral')} make_interpreter"
            return it
        lib = delegate_library()
        try:
            delegate = mod.load_delegate(lib, {"device": dev} if dev else {})
        except (ValueError, RuntimeError, OSError) as e:
            raise BackendUnavailable(f"the Edge TPU delegate ({lib}) failed to load "
                                     f"for {dev or 'the first device'}: {e}", LIB_HINT) from e
        self._how = f"{self._pkg} Interpreter + load_delegate({lib})"
        return mod.Interpreter(model_path=self.artifact, experimental_delegates=[delegate])

    def _kernels(self, interpreter: Any) -> None:
        return None  # the Edge TPU's split is the compiler's op coverage (coverage_notes)

    def load(self) -> None:
        super().load()
        self.settings["delegate"] = getattr(self, "_how", "libedgetpu")
        self.settings["device"] = self.device
        self.settings.pop("num_threads", None)
        self.exec_precision = "int8"

        self._coverage = read_coverage(self.artifact)
        self._precheck = read_precheck(self.artifact)
        self.notes.extend(coverage_notes(self._coverage, self._precheck))

    def throughput(self, batch: Any, settings: Any) -> Any:
        raise BackendUnavailable("the throughput scenario is not measured on the Edge TPU: one device "
                                 "runs one invocation at a time, and its own way to more throughput is a "
                                 "pipeline of model segments over several TPUs (pycoral's "
                                 "PipelinedModelRunner), not concurrent interpreters; the latency row's "
                                 "img/s is its throughput")

    def extra_metrics(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if getattr(self, "_coverage", None):
            extra["op_coverage"] = self._coverage
        if getattr(self, "_precheck", None):
            extra["edgetpu_precheck"] = self._precheck
        return extra
