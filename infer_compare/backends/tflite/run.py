"""LiteRT / TFLite on the CPU (ai-edge-litert's interpreter; tflite-runtime as a fallback).

- load(): ``Interpreter(model_path, num_threads=threads)``; the default op resolver
  applies the XNNPACK delegate (recorded). The file has batch 1; its inputs are
  resized to the requested batch (``resize_tensor_input`` + ``allocate_tensors``)
  where the graph allows (otherwise fixed_batch = 1 and the harness skips other sizes).
  Every input and output is bound by index, named as the model's (bindings.py).
- prepare() (untimed): each input by name, NCHW -> NHWC where the file is channel-last;
  int8 inputs quantized with their own tensor's scale and zero point.
- run() (timed): set_tensor per input, invoke, get_tensor per output; nothing else.
- to_numpy() (untimed): int8 outputs dequantized each with its own scale and zero point;
  several outputs as {model output name: array}.
- throughput() (the throughput scenario): several interpreters in threads (run_throughput.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from infer_compare.backends.runner import Runner
from infer_compare.backends.tflite import common
from infer_compare.backends.tflite.bindings import (
    bind,
    feed,
    from_file,
    guess_channel_last,
    read_io_map,
    to_file,
)
from infer_compare.backends.tflite.bindings import dequantize as dequantize
from infer_compare.backends.tflite.bindings import quantize as quantize
from infer_compare.backends.tflite.common import interpreter_module
from infer_compare.backends.tflite.delegation import delegation
from infer_compare.backends.tflite.options import TFLiteOptions
from infer_compare.backends.tflite.run_throughput import interpreters_throughput
from infer_compare.base.errors import BackendUnavailable, RunnerError
from infer_compare.base.records import Availability

PRECISION_NAMES = {"float32": "fp32", "int8": "int8", "uint8": "uint8", "float16": "fp16"}


class TFLiteRunner(Runner):
    name = "tflite"
    # "ai_edge_litert" or "tflite_runtime" (the runner option interpreter overrides it)
    prefer: str | None = None

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
        b = int(self.options.batch_size)
        it = self._resized(it, mod, b)
        self._bind(it)
        if self._fixed is None and self.ins[0].shape and self.ins[0].shape[0] != b:
            raise RunnerError(f"the interpreter did not accept batch {b} (input shape "
                              f"{list(self.ins[0].shape)})")
        self.interpreter = it
        kind = self._integer_kind()
        self.exec_precision = kind + _float_io(kind, self.ins, self.outs)
        split = self._kernels(it)
        state = common.resource_variables(self.artifact)
        if state:
            self.notes.append(state)
        if self.options.precision == "fp16":
            self.notes.append("fp16 file: float16 weights are dequantized to fp32 at load; XNNPACK "
                              "computes in fp32")
        self.settings = {
            "interpreter": f"{pkg} {ver}",
            "num_threads": int(self.options.threads) if self.options.threads else None,
            "delegate": "XNNPACK (the interpreter's default CPU delegate)",
            "batch": (f"file batch {self.file_batch}, resized to {b}" if self.file_batch != b
                      else f"file batch {b}"),
            **self._io_settings(),
        }
        if split is not None:
            self.settings["kernels"] = split.summary()
            self._extra = {"kernels": split.to_dict()}
            if kind in ("int8", "uint8"):
                n = sum(split.delegated.values())
                self.exec_precision += f" (XNNPACK {n} of {split.total} ops)" if n else " (built-in kernels)"
                self.notes.append(f"int8 kernels: {split.summary()}")

    def _integer_kind(self) -> str:
        """int8 / uint8 where the file's inputs are (or, with float inputs, where the file is an int8 file
        the converter left float at its ends); else fp32."""
        kinds = {t.dtype.name for t in self.ins}
        if "int8" in kinds or "uint8" in kinds:
            return "int8" if "int8" in kinds else "uint8"
        return "int8" if self.options.precision == "int8" else "fp32"

    def _bind(self, it: Any) -> None:
        """Every input and output of the file, bound by index with its own dtype and quantization, and
        named as the model's (the exporter's record, else the file's names: bindings.py)."""
        rec = read_io_map(self.artifact)
        ins, outs = it.get_input_details(), it.get_output_details()
        cl = rec.get("channel_last") or guess_channel_last(ins)
        self.ins, self.in_match = bind(ins, rec.get("inputs"), cl)
        self.outs, self.out_match = bind(outs, rec.get("outputs"), None)
        self.in_match = rec.get("inputs_matched") or self.in_match
        self.out_match = rec.get("matched") or self.out_match
        self.inp, self.out = ins[0], outs[0]  # the first ones (throughput, older callers)
        t0 = self.ins[0]
        self.layout = "NHWC" if t0.channel_last else "as-is"
        self.in_dtype, self.in_q = t0.dtype, (t0.scale, t0.zero_point)
        self.out_dtype, self.out_q = self.outs[0].dtype, (self.outs[0].scale, self.outs[0].zero_point)

    def _io_settings(self) -> dict[str, Any]:
        """The row's record of each input and output (and of the matching when there are several)."""
        one = len(self.ins) == 1 and len(self.outs) == 1
        s: dict[str, Any] = {
            "input": f"{self.layout} {self.in_dtype.name} {list(self.ins[0].shape)}" if one
            else [t.describe() for t in self.ins],
            "output": f"{self.out_dtype.name} {list(self.outs[0].shape)}" if one
            else [t.describe() for t in self.outs]}
        if not one:
            s["inputs_matched"], s["outputs_matched"] = self.in_match, self.out_match
        if self.ins[0].quantized:
            s["input_quantization"] = {"scale": self.ins[0].scale, "zero_point": self.ins[0].zero_point}
        if self.outs[0].quantized:
            s["output_quantization"] = {"scale": self.outs[0].scale, "zero_point": self.outs[0].zero_point}
        return s

    def _resized(self, it: Any, mod: Any, b: int) -> Any:
        """The interpreter with its inputs resized to batch ``b`` and allocated; a fresh one at the file's
        batch (``self._fixed``) when the graph cannot be re-planned for ``b``. Every input whose first axis
        is the file's batch is resized (a scalar or a fixed state keeps its shape)."""
        details = it.get_input_details()
        shapes = [[int(s) for s in d["shape"]] for d in details]
        self.file_batch = shapes[0][0] if shapes[0] else 1
        self._fixed: int | None = None
        # a dynamic signature beyond the batch ([-1, -1], allocated as [1, 1]): sized by the data in prepare()
        self._pending = any(int(v) < 0 for d in details for v in list(d.get("shape_signature", []))[1:])
        if self.file_batch == b:
            if not self._pending:
                it.allocate_tensors()
            return it
        try:
            for d, shape in zip(details, shapes, strict=True):
                if shape and shape[0] == self.file_batch:
                    it.resize_tensor_input(d["index"], [b] + shape[1:], strict=False)
            if not self._pending:
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
    def prepare(self, batch: Any) -> Any:
        """One array per file input in the file's order, each laid out and quantized as its tensor takes
        it."""
        try:
            arrays, by_position = feed(self.ins, batch)
        except ValueError as e:
            raise RunnerError(str(e)) from None
        if by_position and "inputs fed by position" not in self.in_match:
            self.in_match += "; inputs fed by position (the file's names are not the model's)"
            self.settings["inputs_matched"] = self.in_match
        out = [to_file(t, a) for t, a in zip(self.ins, arrays, strict=True)]
        self._fit(out)
        return out

    def _fit(self, arrays: list[np.ndarray]) -> None:
        """Resize the file's inputs to the arrays' shapes where they differ (untimed, in prepare): a file with
        a dynamic signature ([-1, -1] allocated as [1, 1]) takes the shapes of the data it is given."""
        same = all(tuple(a.shape) == tuple(t.shape) for t, a in zip(self.ins, arrays, strict=True))
        if same and not getattr(self, "_pending", False):
            return
        it = self.interpreter
        try:
            for t, a in zip(self.ins, arrays, strict=True):
                if tuple(a.shape) != tuple(t.shape):
                    it.resize_tensor_input(t.index, list(a.shape), strict=True)
            it.allocate_tensors()
        except (RuntimeError, ValueError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            want = ", ".join(f"{t.name} {list(a.shape)}" for t, a in zip(self.ins, arrays, strict=True))
            raise RunnerError(f"the file's inputs cannot take {want} (its signature fixes "
                              f"them): {first}") from None
        rec = read_io_map(self.artifact)
        self.ins, _ = bind(it.get_input_details(), rec.get("inputs"), [t.channel_last for t in self.ins])
        self.outs, _ = bind(it.get_output_details(), rec.get("outputs"), None)
        self._pending = False
        self.settings["input_resized"] = [f"{t.name} {list(t.shape)}" for t in self.ins]

    def run(self, prepared: Any) -> Any:
        it = self.interpreter
        for t, x in zip(self.ins, prepared, strict=True):
            it.set_tensor(t.index, x)
        it.invoke()
        return [it.get_tensor(t.index) for t in self.outs]

    def to_numpy(self, outputs: Any) -> Any:
        """float32 (dequantized per tensor); several outputs: {model output name: array}."""
        if len(self.outs) == 1:
            return from_file(self.outs[0], outputs[0])
        return {t.name: from_file(t, a) for t, a in zip(self.outs, outputs, strict=True)}

    def library_versions(self) -> dict[str, str]:
        return {self._pkg.replace("_", "-"): self._ver}

    def throughput(self, batch: np.ndarray, settings: Any) -> Any:
        """Several interpreters in threads (run_throughput.py)."""
        return interpreters_throughput(self, batch, settings)

    def extra_metrics(self) -> dict[str, Any]:
        try:
            info = common.inspect_model(self.artifact, self._mod.Interpreter)
        except Exception as e:  # a report figure, never a failure
            return {"inspect_error": f"{type(e).__name__}: {e}"}
        return {"full_integer": info["full_integer"], "ops": info["ops"],
                "tensor_dtypes": info["tensor_dtypes"],
                **({"float_ops": info["float_ops"]} if info["float_ops"] else {}),
                **getattr(self, "_extra", {})}


def _float_io(kind: str, ins: list, outs: list) -> str:
    """', float input and output' where an integer file takes or gives float tensors (the converter left a
    Quantize at its start or a Softmax/Dequantize at its end in float): the CPU runs it; the Edge TPU
    cannot."""
    if kind not in ("int8", "uint8"):
        return ""
    sides = [side for side, ts in (("input", ins), ("output", outs)) if any(t.dtype.kind == "f" for t in ts)]
    return f", float {' and '.join(sides)}" if sides else ""
