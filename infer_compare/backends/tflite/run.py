"""LiteRT / TFLite on the CPU (ai-edge-litert's interpreter; tflite-runtime as a fallback).

- load(): ``Interpreter(model_path, num_threads=threads)``; the default op resolver
  applies the XNNPACK delegate (recorded). The file has batch 1; the input is
  resized to the requested batch (``resize_tensor_input`` + ``allocate_tensors``)
  where the graph allows (otherwise fixed_batch = 1 and the harness skips other sizes).
- prepare() (untimed): NCHW float32 -> NHWC; for int8 inputs, quantized with the
  file's own scale and zero point.
- run() (timed): set_tensor, invoke, get_tensor; nothing else.
- to_numpy() (untimed): int8 outputs dequantized with the file's scale and zero point.
- throughput() (the throughput scenario): several interpreters in threads (run_throughput.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import BackendUnavailable, RunnerError
from ...records import Availability
from ..runner import Runner
from .common import inspect_model, interpreter_module
from .delegation import delegation
from .options import TFLiteOptions

ONE_IO_HINT = "ONNX Runtime, OpenVINO and PyTorch rows measure every input and output"
PRECISION_NAMES = {"float32": "fp32", "int8": "int8", "uint8": "uint8", "float16": "fp16"}


def quantize(x: np.ndarray, scale: float, zero_point: int, dtype: Any) -> np.ndarray:
    info = np.iinfo(dtype)
    q = np.round(x / np.float32(scale)) + zero_point
    return np.clip(q, info.min, info.max).astype(dtype)


def dequantize(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    return ((q.astype(np.float32) - np.float32(zero_point)) * np.float32(scale)).astype(np.float32)


class TFLiteRunner(Runner):
    name = "tflite"
    prefer: str | None = None  # "ai_edge_litert" or "tflite_runtime" (the runner option interpreter overrides it)

    @classmethod
    def probe(cls, device: str = "cpu") -> Availability:
        if not device.startswith("cpu"):
            return Availability(False, f"the TFLite runner runs on the CPU, not {device}")
        try:
            _mod, pkg, ver = interpreter_module()
        except BackendUnavailable as e:
            return Availability(False, e.reason, e.hint)
        return Availability(True, version=f"{pkg} {ver}", devices=("cpu",), details={"interpreter": pkg})

    # --- lifecycle ------------------------------------------------------------------
    def _make_interpreter(self, mod: Any) -> Any:
        threads = self.options.threads
        return mod.Interpreter(model_path=self.artifact, num_threads=int(threads) if threads else None)

    def load(self) -> None:
        mod, pkg, ver = interpreter_module(self.options.runner_as(TFLiteOptions).interpreter or self.prefer)
        self._pkg, self._ver, self._mod = pkg, ver, mod
        it = self._make_interpreter(mod)
        inp = it.get_input_details()
        out = it.get_output_details()
        if len(inp) != 1 or len(out) != 1:
            raise BackendUnavailable(f"TFLite rows measure one input and one output so far; the file has {len(inp)} "
                                     f"input(s) and {len(out)} output(s)", ONE_IO_HINT)
        self.inp, self.out = inp[0], out[0]
        shape = [int(s) for s in self.inp["shape"]]
        b = int(self.options.batch_size)
        it = self._resized(it, mod, shape, b)
        self.inp = it.get_input_details()[0]
        self.out = it.get_output_details()[0]
        if self._fixed is None and int(self.inp["shape"][0]) != b:
            raise RunnerError(f"the interpreter did not accept batch {b} (input shape {list(self.inp['shape'])})")
        self.interpreter = it
        self.in_dtype = np.dtype(self.inp["dtype"])
        self.out_dtype = np.dtype(self.out["dtype"])
        self.in_q = tuple(self.inp["quantization"])
        self.out_q = tuple(self.out["quantization"])
        self.layout = "NHWC" if len(shape) == 4 and shape[3] in (1, 3) and shape[1] not in (1, 3) else "as-is"
        kind = self.in_dtype.name
        self.exec_precision = {"int8": "int8", "uint8": "uint8"}.get(kind, "fp32")
        split = self._kernels(it)
        if self.options.precision == "fp16":
            self.exec_precision = "fp32"
            self.notes.append("fp16 file: float16 weights are dequantized to fp32 at load; XNNPACK computes in fp32")
        self.settings = {
            "interpreter": f"{pkg} {ver}",
            "num_threads": int(self.options.threads) if self.options.threads else None,
            "delegate": "XNNPACK (the interpreter's default CPU delegate)",
            "input": f"{self.layout} {kind} {list(int(s) for s in self.inp['shape'])}",
            "output": f"{self.out_dtype.name} {list(int(s) for s in self.out['shape'])}",
            "batch": f"file batch {self.file_batch}, resized to {b}" if self.file_batch != b else f"file batch {b}",
        }
        if split is not None:
            self.settings["kernels"] = split.summary()
            self._extra = {"kernels": split.to_dict()}
            if kind in ("int8", "uint8"):
                n = sum(split.delegated.values())
                self.exec_precision += f" (XNNPACK {n} of {split.total} ops)" if n else " (built-in kernels)"
                self.notes.append(f"int8 kernels: {split.summary()}")
        if kind in ("int8", "uint8"):
            self.settings["input_quantization"] = {"scale": float(self.in_q[0]), "zero_point": int(self.in_q[1])}
        if self.out_dtype.name in ("int8", "uint8"):
            self.settings["output_quantization"] = {"scale": float(self.out_q[0]), "zero_point": int(self.out_q[1])}

    def _resized(self, it: Any, mod: Any, shape: list[int], b: int) -> Any:
        """The interpreter with its input resized to batch ``b`` and allocated; a fresh one at the file's
        batch (``self._fixed``) when the graph cannot be re-planned for ``b``."""
        self.file_batch = shape[0]
        self._fixed: int | None = None
        if shape[0] == b:
            it.allocate_tensors()
            return it
        try:
            it.resize_tensor_input(self.inp["index"], [b] + shape[1:], strict=False)
            it.allocate_tensors()
        except (RuntimeError, ValueError) as e:
            # e.g. a RESHAPE with the batch baked into its shape: XNNPACK cannot re-plan it
            self._fixed = self.file_batch
            self._resize_error = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            it = self._make_interpreter(mod)
            it.allocate_tensors()
        return it

    def _kernels(self, interpreter: Any):
        """Which ops XNNPACK runs (the Edge TPU runner says it with the compiler's own coverage instead)."""
        return delegation(interpreter)

    def close(self) -> None:
        self.interpreter = None

    @property
    def fixed_batch(self) -> int | None:
        """Set when the file's batch cannot be resized (its graph has the batch baked in)."""
        return getattr(self, "_fixed", None)

    # --- inference ------------------------------------------------------------------
    def prepare(self, batch: np.ndarray) -> Any:
        if isinstance(batch, dict):  # a model with several inputs, and a file with one
            raise BackendUnavailable(f"TFLite rows measure one input and one output so far; the model has "
                                     f"{len(batch)} inputs ({', '.join(batch)})", ONE_IO_HINT)
        x = np.asarray(batch, dtype=np.float32)
        if self.layout == "NHWC" and x.ndim == 4:
            x = x.transpose(0, 2, 3, 1)
        if self.in_dtype.kind in "iu":
            x = quantize(x, self.in_q[0], self.in_q[1], self.in_dtype)
        else:
            x = x.astype(self.in_dtype)
        return np.ascontiguousarray(x)

    def run(self, prepared: Any) -> Any:
        it = self.interpreter
        it.set_tensor(self.inp["index"], prepared)
        it.invoke()
        return it.get_tensor(self.out["index"])

    def to_numpy(self, outputs: Any) -> np.ndarray:
        if self.out_dtype.kind in "iu":
            return dequantize(np.asarray(outputs), self.out_q[0], self.out_q[1])
        return np.asarray(outputs, dtype=np.float32)

    def library_versions(self) -> dict[str, str]:
        return {self._pkg.replace("_", "-"): self._ver}

    def throughput(self, batch: np.ndarray, settings: Any) -> Any:
        """Several interpreters in threads (run_throughput.py)."""
        from .run_throughput import interpreters_throughput

        return interpreters_throughput(self, batch, settings)

    def extra_metrics(self) -> dict[str, Any]:
        try:
            info = inspect_model(self.artifact, self._mod.Interpreter)
        except Exception as e:  # a report figure, never a failure
            return {"inspect_error": f"{type(e).__name__}: {e}"}
        return {"full_integer": info["full_integer"], "ops": info["ops"], "tensor_dtypes": info["tensor_dtypes"],
                **({"float_ops": info["float_ops"]} if info["float_ops"] else {}), **getattr(self, "_extra", {})}
