"""OpenVINO on the CPU, with the execution precision stated truthfully.

On CPUs with AMX or AVX-512 BF16, OpenVINO silently runs bf16 unless
INFERENCE_PRECISION_HINT is set. Every row here sets the hint for its precision and
records what the compiled model reports: fp32 (hint f32), bf16 (hint bf16, only where
the CPU lists BF16), fp16 (fp16-compressed IR, hint f16 where the CPU lists FP16),
int8 (NNCF IR; its non-quantized ops run at the CPU's default, recorded).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import deps
from ...records import Availability
from ..runner import Runner
from .options import OpenVinoOptions

HINTS = {"fp32": "f32", "bf16": "bf16", "fp16": "f16"}
CAPS = {"bf16": "BF16", "fp16": "FP16", "int8": "INT8"}
NAMES = {"f32": "fp32", "bf16": "bf16", "f16": "fp16", "float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _cpu_caps() -> tuple[list[str], str]:
    import openvino as ov

    core = ov.Core()
    return list(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")), str(core.get_property("CPU", "FULL_DEVICE_NAME"))


def _type_name(t: Any) -> str:
    s = str(t)
    s = s.split("'")[1] if "'" in s else s
    return NAMES.get(s.lower(), s.lower())


class OpenVinoRunner(Runner):
    name = "openvino"

    @classmethod
    def probe(cls, device: str = "cpu") -> Availability:
        if not deps.has("openvino"):
            return Availability(False, "OpenVINO is not installed", deps.hint("openvino"))
        try:
            caps, name = _cpu_caps()
        except Exception as e:
            return Availability(False, f"OpenVINO cannot open the CPU device: {e}", deps.hint("openvino"),
                                version=deps.version("openvino"))
        return Availability(True, version=deps.version("openvino"), devices=("cpu",),
                            details={"cpu": name, "capabilities": caps})

    @classmethod
    def supports(cls, fmt: str, precision: str, device: str) -> Availability:
        need = CAPS.get(precision)
        if need:
            try:
                caps, name = _cpu_caps()
            except Exception as e:
                return Availability(False, f"OpenVINO cannot open the CPU device: {e}")
            if need not in caps:
                return Availability(False, f"this CPU ({name}) has no {need} support in OpenVINO "
                                           f"(capabilities: {', '.join(caps)})")
        return Availability(True)

    def load(self) -> None:
        import openvino as ov

        core = ov.Core()
        prec = self.options.precision
        cfg: dict[str, Any] = {"PERFORMANCE_HINT": self.options.runner_as(OpenVinoOptions).performance_hint}
        if self.options.threads:
            cfg["INFERENCE_NUM_THREADS"] = int(self.options.threads)
        if prec in HINTS:
            cfg["INFERENCE_PRECISION_HINT"] = HINTS[prec]
        model = core.read_model(self.artifact)
        ps = model.inputs[0].partial_shape
        static = None
        if ps.rank.is_static and ps.is_dynamic and all(d.is_static for d in list(ps)[1:]):
            # Each cell runs one batch size: compile for that static shape, as a deployment would
            # (and as benchmark_app -shape does); OpenVINO's CPU plugin is faster on static shapes.
            static = [int(self.options.batch_size)] + [d.get_length() for d in list(ps)[1:]]
            model.reshape(static)
        self.compiled = core.compile_model(model, "CPU", cfg)
        self.request = self.compiled.create_infer_request()
        executed = _type_name(self.compiled.get_property("INFERENCE_PRECISION_HINT"))
        self.exec_precision = f"int8+{executed}" if prec == "int8" else executed
        self.settings = {
            "device": "CPU",
            "PERFORMANCE_HINT": str(self.compiled.get_property("PERFORMANCE_HINT")),
            "NUM_STREAMS": int(self.compiled.get_property("NUM_STREAMS")),
            "INFERENCE_NUM_THREADS": int(self.compiled.get_property("INFERENCE_NUM_THREADS")),
            "INFERENCE_PRECISION_HINT": executed,
            "api": "sync InferRequest, shared input tensor",
            "ENABLE_CPU_PINNING": bool(self.compiled.get_property("ENABLE_CPU_PINNING")),
            "input_shape": str(static) + " (reshaped from dynamic batch)" if static else str(ps),
        }
        if prec == "int8":
            self.notes.append(f"int8 ops run in int8; ops NNCF left unquantized run in {executed}")
        self._ov = ov
        self._version = ov.get_version()

    def prepare(self, batch: np.ndarray) -> Any:
        x = np.ascontiguousarray(batch, dtype=np.float32)
        self.request.set_input_tensor(self._ov.Tensor(x, shared_memory=True))
        return x  # keep the buffer alive while the request uses it

    def run(self, prepared: Any) -> Any:
        # Synchronous on the CPU: when infer() returns, the outputs are in the request's host buffer.
        # Returning the request (not a fresh numpy view of it) keeps per-call Python overhead at the
        # level of benchmark_app's loop; to_numpy() reads the buffer outside the timed region.
        self.request.infer()
        return self.request

    def to_numpy(self, outputs: Any) -> np.ndarray:
        return np.array(outputs.get_output_tensor(0).data, dtype=np.float32, copy=True)

    def library_versions(self) -> dict[str, str]:
        return {"openvino": self._version}
