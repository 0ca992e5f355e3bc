"""A ``.tflite`` file as the model (issue 25 d): what many Coral users have, a model trained and converted
elsewhere. Its inputs and outputs come from the file (LiteRT's interpreter), its reference outputs from
LiteRT on the CPU running that file at its own precision (int8 for a quantized file, stated). Imported
only for TFLite models; see ``user.py`` for the public API.

The model's inputs are the file's *real* values: an int8/uint8 input with a scale is fed float32 values
that the runner quantizes with that tensor's scale and zero point (as every TFLite row does), so the
tool's data (images preprocessed with the file's own layout, H x W x C for an NHWC file; ``--mean``,
``--std``, ``--scale`` where the model was trained otherwise) feed the file as they feed any model.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from infer_compare.artifacts.chain import Unbuilt
from infer_compare.backends.runner import RunOptions
from infer_compare.backends.tflite import common
from infer_compare.backends.tflite.common import interpreter_module
from infer_compare.backends.tflite.edgetpu_precheck import precheck_summary
from infer_compare.backends.tflite.run import TFLiteRunner
from infer_compare.base.errors import BackendUnavailable, UsageError
from infer_compare.base.records import SKIPPED, ExportRecord
from infer_compare.models.user import (
    TensorSpec,
    UserModel,
    fmt_shape,
    match_names,
    resolve_shape,
    sha256_files,
)


def _interpreter(path: str) -> Any:
    try:
        mod = interpreter_module()[0]
    except BackendUnavailable as e:
        raise UsageError(f"{path}: reading a TFLite model needs a TFLite interpreter: {e.reason} "
                         f"({e.hint})") from None
    try:
        return mod.Interpreter(model_path=path)
    except (ValueError, RuntimeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UsageError(f"{path} is not a TFLite model LiteRT can load: {first}") from None


def _real_dtype(d: dict) -> str:
    q = d.get("quantization") or (0.0, 0)
    dt = np.dtype(d["dtype"])
    real = dt.kind == "f" or (dt.kind in "iu" and float(q[0]) > 0)  # quantized: fed and read as real values
    return "float32" if real else dt.name


def _declared(d: dict, batched: bool) -> tuple[Any, ...]:
    """The tensor's shape from its signature (-1: a dynamic dimension, "?"), the batch axis as "batch";
    the allocated shape where the file has no signature."""
    sig = [int(s) for s in d.get("shape_signature", [])] or [int(s) for s in d["shape"]]
    if len(sig) != len(d["shape"]):
        sig = [int(s) for s in d["shape"]]
    return tuple("batch" if batched and i == 0 else "?" if v < 0 else v for i, v in enumerate(sig))


def _spec(d: dict, batched: bool, given: tuple[int, ...] | None = None,
          sample: tuple[int, ...] | None = None) -> TensorSpec:
    """An input's spec: dynamic dimensions sized by --input-shape (``given``) or one sample of --data
    (``sample``, where its rank fits; a static file's data is checked later, in its own layout)."""
    name, declared = str(d["name"]), _declared(d, batched)
    if given is None and sample is not None and "?" in declared and len(sample) + batched == len(declared):
        given = ((1,) if batched else ()) + tuple(int(v) for v in sample)
    dims = declared if given is None and "?" not in declared else resolve_shape(name, declared, given,
                                                                                0 if batched else None)
    return TensorSpec(name, dims, _real_dtype(d), 0 if batched else None)


def _output_spec(d: dict, batched: bool) -> TensorSpec:
    return TensorSpec(str(d["name"]), _declared(d, batched), _real_dtype(d), 0 if batched else None)


def _batched(d: dict, batch: int) -> bool:
    sig = [int(s) for s in d.get("shape_signature", [])]
    return bool(d["shape"].size) and (int(d["shape"][0]) == batch or bool(sig) and sig[0] == -1)


def file_precision(path: str) -> str:
    """The file's own precision: int8 (every tensor integer, quantized I/O), fp16 (float16 weights), else
    fp32."""
    info = common.inspect_model(path)
    kinds = set(info["tensor_dtypes"])
    if not any(k.startswith(("float", "bfloat")) for k in kinds):
        return "int8"
    return "fp16" if "float16" in kinds else "fp32"


def load_tflite(path: str, input_shapes: Mapping | None = None,
                data_shapes: Mapping | None = None) -> UserModel:
    """A .tflite file as the model. Dynamic dimensions (-1 in the file's shape signature; the allocated shape
    is 1 there) are sized by ``input_shapes`` (--input-shape) or by one sample of ``data_shapes`` (--data)."""
    it = _interpreter(path)
    ins, outs = it.get_input_details(), it.get_output_details()
    first = [int(s) for s in ins[0]["shape"]]
    batch = first[0] if first else 1
    given = match_names([str(d["name"]) for d in ins], input_shapes, f"TFLite model {os.path.basename(path)}")
    data = dict(data_shapes or {})
    inputs = tuple(_spec(d, _batched(d, batch), given.get(str(d["name"])),
                         data.get(str(d["name"]), data.get("") if len(ins) == 1 else None)) for d in ins)
    outputs = tuple(_output_spec(d, _batched(d, batch)) for d in outs)
    prec = file_precision(path)
    fed = (", quantized inputs fed as real values through each tensor scale and zero point"
           if prec == "int8" else "")
    notes = [f"a TFLite file ({prec}): its reference is LiteRT on the CPU running this file at its own "
             f"precision ({prec}{fed})",
             f"the file has batch {batch}: the reference runs it one sample at a time; rows resize it where "
             "its graph allows"]
    dynamic = [f"'{s.name}' {fmt_shape(_declared(d, False))} -> {fmt_shape(s.shape)}"
               for s, d in zip(inputs, ins, strict=True) if "?" in _declared(d, False)[1:] or
               ("?" in _declared(d, False) and not _batched(d, batch))]
    if dynamic:
        notes.append("dynamic inputs (shape signature), sized by --input-shape or --data: "
                     + "; ".join(dynamic))
    state = common.resource_variables(path)
    if state:
        notes.append(state)
    return UserModel("tflite", path, sha256_files([path]), inputs, outputs, None, None, notes)


def tflite_runner(model: UserModel) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """LiteRT on the CPU (the TFLite runner's own binding: quantized per tensor), one sample at a time."""
    r = TFLiteRunner(model.source, "cpu", RunOptions(precision=file_precision(model.source), batch_size=1))
    r.load()

    def run(feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        n = len(next(iter(feed.values())))
        rows: dict[str, list[np.ndarray]] = {}
        for i in range(n):
            fixed = {s.name for s in model.inputs if s.batch_axis is None}
            one = {k: v if k in fixed else v[i:i + 1] for k, v in feed.items()}
            got = r.to_numpy(r.run(r.prepare(one if len(one) > 1 else next(iter(one.values())))))
            for k, v in (got.items() if isinstance(got, dict) else [(model.outputs[0].name, got)]):
                rows.setdefault(k, []).append(np.asarray(v))
        return {k: np.concatenate(v) for k, v in rows.items()}

    return run


def root_artifacts(um: UserModel) -> tuple[dict[tuple[str, str], Any], dict[tuple[str, str], Any]]:
    """(carried, unbuilt) of a TFLite root: the file is the ``tflite`` artifact of its own precision (its
    int8 file feeds the Edge TPU compile and pre-check); the other formats and precisions are skipped rows
    that say why (a float file: the pre-check's explanation of why the Edge TPU needs full-integer int8)."""
    import os

    prec = file_precision(um.source)
    carried = {("tflite", prec): ExportRecord("tflite", prec, um.source, os.path.getsize(um.source), 0.0,
                                              True, key=um.sha256[:20],
                                              notes=("the user's TFLite file, measured as given",))}
    hint = "give the ONNX or PyTorch model to compare the other runtimes and precisions"
    unbuilt = {("pytorch", "fp32"): Unbuilt(SKIPPED, "the model arrived as a TFLite file: PyTorch rows need "
                                                     "the PyTorch model", hint),
               ("onnx", "fp32"): Unbuilt(SKIPPED, "the model arrived as a TFLite file: ONNX Runtime, "
                                                  "OpenVINO and TensorRT rows need an ONNX model (nothing "
                                                  "converts TFLite back)", hint)}
    for p in ("fp32", "fp16", "int8"):
        if p != prec:
            unbuilt[("tflite", p)] = Unbuilt(SKIPPED, f"the model is this TFLite file ({prec}): its rows run "
                                                      "it at its own precision", hint)
    if prec != "int8":
        unbuilt[("tflite", "int8")] = Unbuilt(
            SKIPPED, f"the Edge TPU runs full-integer int8 files only (int8 tensors with quantization "
                     f"parameters); {os.path.basename(um.source)} is {prec}: {precheck_summary(um.source)}",
            "convert the model with full-integer int8 quantization (a representative dataset, int8 input and "
            "output)")
    return carried, unbuilt
