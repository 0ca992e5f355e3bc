"""OpenVINO with several inputs or outputs: each dynamic batch set to the cell's before compiling,
every input tensor set by port in the dtype the model declares (int64 ids stay int64), every output
read by name. A model with one input and one output never comes here (run.py's own path)."""

from __future__ import annotations

from typing import Any

import numpy as np

from infer_compare.base.batches import arrays_for
from infer_compare.base.errors import RunnerError


def _name(port: Any, what: str) -> str:
    try:
        return str(port.get_any_name())
    except RuntimeError:  # a port without a tensor name
        return what


def _dtype(port: Any) -> Any:
    try:
        return np.dtype(port.get_element_type().to_dtype())
    except Exception:  # a type numpy has no name for (bf16): fed as float32
        return np.dtype(np.float32)


def ports(compiled: Any) -> tuple[list[tuple[str, Any]], list[str]]:
    """([(input name, numpy dtype)], [output name]) of a compiled model, in port order."""
    ins = [(_name(p, f"input_{i}"), _dtype(p)) for i, p in enumerate(compiled.inputs)]
    outs = [_name(p, f"output_{i}") for i, p in enumerate(compiled.outputs)]
    return ins, outs


def reshape_inputs(model: Any, batch: int) -> dict[str, list[int]] | None:
    """Set the dynamic batch of every input whose other dimensions are static to ``batch`` (a deployment's
    static shape, as for one input); the shapes set, or None where none could be."""
    shapes: dict[str, list[int]] = {}
    for i, inp in enumerate(model.inputs):
        ps = inp.partial_shape
        dims = list(ps)
        if ps.rank.is_static and ps.is_dynamic and dims and all(d.is_static for d in dims[1:]):
            shapes[_name(inp, f"input_{i}")] = [batch] + [d.get_length() for d in dims[1:]]
    if not shapes:
        return None
    model.reshape({k: v for k, v in shapes.items()})
    return shapes


def set_all(ov: Any, inputs: list[tuple[str, Any]], request: Any, batch: Any, copy: bool) -> list[np.ndarray]:
    """Every input of ``request`` from ``batch`` (by name, else by position), shared memory; the buffers."""
    try:
        arrays = arrays_for([n for n, _ in inputs], batch)
    except ValueError as e:
        raise RunnerError(str(e)) from None
    keep = []
    for i, ((_, dt), a) in enumerate(zip(inputs, arrays, strict=True)):
        # a 0-d input (a scalar such as Silero VAD's sr) stays 0-d: np.ascontiguousarray would make it 1-d
        x = np.ascontiguousarray(a, dtype=dt) if np.ndim(a) else np.array(a, dtype=dt)
        x = x.copy() if copy else x
        request.set_input_tensor(i, ov.Tensor(x, shared_memory=True))
        keep.append(x)
    return keep
