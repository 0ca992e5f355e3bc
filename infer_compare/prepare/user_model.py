"""The user's own model, loaded and run for its reference: a path (ONNX, TorchScript, .pt2, TFLite),
"package.module:callable", or a torch.nn.Module, each read by its own module (models/user_*.py,
tflite_file.py here: a TFLite file is read and run by the TFLite runtime); every problem is a one-line
UsageError. ``reference_of`` runs the model on the inputs for its FP32 reference outputs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from infer_compare.base.errors import UsageError
from infer_compare.base.layout import observed_output_axes
from infer_compare.models import user_onnx, user_torch, user_torchfile
from infer_compare.models.user import (
    _FACTORY,
    ONNX_SUFFIXES,
    SUFFIXES,
    TFLITE_SUFFIXES,
    TensorSpec,
    UserModel,
    fmt_shape,
    name_problem,
    parse_input_shapes,
)
from infer_compare.prepare import tflite_file


def load_user_model(ref: Any, *, weights: str | None = None, input_shapes: Mapping | None = None,
                    example_input: Any = None,
                    data_shapes: Mapping[str, tuple[int, ...]] | None = None) -> UserModel:
    """The user's model (a path, "package.module:callable", or a torch.nn.Module), checked and
    described; every problem is a one-line UsageError."""
    if input_shapes is not None and not isinstance(input_shapes, Mapping):
        input_shapes = parse_input_shapes(str(input_shapes))
    if not isinstance(ref, str | os.PathLike):
        return user_torch.from_module(ref, example_input, input_shapes, weights)
    text = os.fspath(ref).strip()
    path = os.path.expanduser(text)
    if not text:
        raise UsageError("--model is empty")
    if _FACTORY.match(text) and not os.path.exists(path):
        return user_torch.from_factory(text, weights, input_shapes, example_input)
    if not os.path.exists(path):
        raise UsageError(f"model file not found: {text}")
    bad_name = name_problem(os.path.abspath(path))
    if bad_name:  # a name problem, not a content problem: said before any library reads the file
        raise UsageError(bad_name)
    if not os.path.isfile(path):
        raise UsageError(f"{text} is not a file (a model file is one of {', '.join(SUFFIXES)})")
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise UsageError(f"unsupported model file suffix '{suffix or '(none)'}' of {text}; supported: "
                         f"{', '.join(SUFFIXES)}, or package.module:callable")
    if weights is not None:
        raise UsageError(f"--weights applies to a package.module:factory model; {text} carries its own "
                         "weights")
    if suffix in ONNX_SUFFIXES:
        if example_input is not None:
            raise UsageError("example_input applies to PyTorch models; an ONNX model's inputs come from its "
                             "graph")

        return user_onnx.load_onnx(os.path.abspath(path), input_shapes, data_shapes)
    if suffix in TFLITE_SUFFIXES:
        if example_input is not None:
            raise UsageError("example_input applies to PyTorch models; a TFLite model's inputs come from the "
                             "file")

        return tflite_file.load_tflite(os.path.abspath(path), input_shapes, data_shapes)

    return user_torchfile.from_file(os.path.abspath(path), input_shapes, example_input)


# ---------------------------------------------------------------- reference


def _checked_inputs(model: UserModel, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The inputs as rows (first axis: the sample) of each input's sample shape and dtype."""
    names = [s.name for s in model.inputs]
    missing = [n for n in names if n not in inputs]
    extra = [n for n in inputs if n not in names]
    if missing or extra:
        raise UsageError(f"{model.name}: inputs {', '.join(inputs) or '(none)'} do not match the model's "
                         f"({', '.join(names)})")
    out: dict[str, np.ndarray] = {}
    for s in model.inputs:
        a = np.asarray(inputs[s.name])
        if a.dtype != np.dtype(s.dtype) and not np.can_cast(a.dtype, s.dtype, "same_kind"):
            raise UsageError(f"{model.name}: input '{s.name}' is {a.dtype}; the model takes {s.dtype}")
        want = s.sample()
        ok = a.ndim == len(want) + 1 and all(d == "batch" or d == n
                                             for d, n in zip(want, a.shape[1:], strict=True))
        if not ok:
            raise UsageError(f"{model.name}: input '{s.name}' has samples of shape {fmt_shape(a.shape[1:])} "
                             f"({len(a) if a.ndim else 0} of them); the model takes {fmt_shape(want)} per "
                             f"sample (its input {fmt_shape(s.shape)}, batch axis {s.batch_axis})")
        out[s.name] = np.ascontiguousarray(a, dtype=s.dtype)
    counts = {len(a) for a in out.values()}
    if len(counts) != 1 or 0 in counts:
        raise UsageError(f"{model.name}: the inputs need the same, non-zero number of samples "
                         f"(got {sorted(counts)})")
    return out


def _pad(a: np.ndarray, rows: int) -> np.ndarray:
    return np.concatenate([a, np.zeros((rows - len(a),) + a.shape[1:], a.dtype)]) if len(a) < rows else a


def reference_of(model: UserModel, inputs: Mapping[str, Any], batch: int = 16) -> dict[str, np.ndarray]:
    """FP32 reference outputs on ``inputs`` (rows, keyed by input name), as rows keyed by output name. Each
    input is laid into the model along its batch axis (base/layout.py); the outputs' batch axes are confirmed
    on the first chunk (an output whose graph names no sizes) and kept in ``model.outputs``."""
    arrays = _checked_inputs(model, inputs)
    n = len(next(iter(arrays.values())))
    step = model.static_batch or max(1, int(batch))
    if model.kind == "onnx":
        # deferred: one of several by kind, bound to the same name
        from infer_compare.models.user_onnx import onnx_runner as make
    elif model.kind == "tflite":
        from infer_compare.prepare.tflite_file import tflite_runner as make  # type: ignore[assignment]
    else:
        # deferred: one of several by kind, bound to the same name
        from infer_compare.models.user_torch import torch_runner as make
    run = make(model)
    parts: dict[str, list[np.ndarray]] = {}
    for i in range(0, n, step):
        chunk = {k: v[i:i + step] for k, v in arrays.items()}
        rows = len(next(iter(chunk.values())))
        fed = {k: _pad(v, step) for k, v in chunk.items()} if model.static_batch else chunk
        fed_rows = len(next(iter(fed.values())))
        got = run(model.layout().to_model(fed))
        if i == 0:
            axes = observed_output_axes(model.layout().outputs, got, fed_rows, set())
            model.outputs = tuple(TensorSpec(o.name, o.shape, o.dtype, axes.get(o.name, o.batch_axis))
                                  for o in model.outputs) or tuple(TensorSpec(k, None, "float32", a)
                                                                  for k, a in axes.items())
        for k, v in model.layout().from_model(got, fed_rows).items():
            parts.setdefault(k, []).append(v[:rows])
    return {k: np.concatenate(v) for k, v in parts.items()}


def reference_note(um) -> str:
    """What the reference is: ONNX Runtime CPU FP32 on an ONNX file, LiteRT CPU on a TFLite file, else
    PyTorch."""
    if um.kind == "onnx" and getattr(um, "wraps", ""):
        return f"reference: ONNX Runtime CPU FP32 on the wrapper {um.source} of the user's file {um.wraps}"
    if um.kind == "onnx":
        return f"reference: ONNX Runtime CPU FP32 on the user's file {um.source}"
    if um.kind == "tflite":
        return f"reference: LiteRT on the CPU running the user's TFLite file {um.source} at its own precision"
    return "reference: PyTorch FP32 on the user's model"


STREAM_ROWS = 8  # rows computed one at a time and together to see whether grouping changes the outputs
STREAM_REL = 1e-3  # beyond float rounding: the outputs depend on how rows are grouped


def stream_reference(model: UserModel, inputs: Mapping[str, Any], ref: Any, notes: list[str]):
    """For a model whose rows are consecutive windows of one stream (an LSTM over the batch axis: the outputs
    of the first rows change when they are computed one at a time rather than together), a function giving
    the reference computed in groups of the measured batch size, as each row runs; None for rows that are
    independent. The notes say which."""
    if model.static_batch or model.kind == "tflite":
        return None
    arrays = _checked_inputs(model, inputs)
    n = min(STREAM_ROWS, len(next(iter(arrays.values()))))
    if n < 2:
        return None
    head = {k: v[:n] for k, v in arrays.items()}
    one, together = reference_of(model, head, batch=1), reference_of(model, head, batch=n)
    scale = max((float(np.abs(v).max()) for v in together.values()), default=0.0) or 1.0
    diff = max(float(np.abs(one[k] - together[k]).max()) for k in together)
    if diff <= STREAM_REL * scale:
        return None
    notes.append(f"a stream: the outputs of the first {n} rows change by {diff / scale:.3g} of their scale "
                 "when they are computed one at a time rather than together (rows are consecutive windows "
                 "through a state), so each batch size is judged against the reference computed in groups "
                 "of that size")
    cache: dict[int, Any] = {}

    def at(batch: int) -> Any:
        if batch not in cache:
            got = reference_of(model, arrays, batch=batch)
            cache[batch] = got if isinstance(ref, dict) else got[model.outputs[0].name]
        return cache[batch]

    return at
