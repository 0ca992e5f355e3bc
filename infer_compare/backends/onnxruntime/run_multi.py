"""ONNX Runtime with several inputs or outputs: the feed dict, built before timing (every input by
name, in the dtype the session declares: int64 ids stay int64), and the IO binding of every input
and output on the GPU. A model with one input and one output never comes here (run.py's own path)."""

from __future__ import annotations

from typing import Any

import numpy as np

from infer_compare.base.batches import arrays_for, count
from infer_compare.base.errors import RunnerError

DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
          "tensor(bfloat16)": None, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
          "tensor(int16)": np.int16,
          "tensor(int8)": np.int8, "tensor(uint64)": np.uint64, "tensor(uint32)": np.uint32,
          "tensor(uint16)": np.uint16, "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}


def io_dtype(onnx_type: str) -> Any:
    """The numpy dtype of an ONNX Runtime input/output type string ("tensor(int64)"); None if unknown."""
    return DTYPES.get(onnx_type)


def feed_of(inputs: list[tuple[str, Any]], batch: Any) -> dict[str, np.ndarray]:
    """{input name: contiguous array in its dtype} for the session's ``inputs`` [(name, dtype)]: ``batch``
    by name, or, where its names are not the session's (a pre-built file), by position."""
    try:
        arrays = arrays_for([n for n, _ in inputs], batch)
    except ValueError as e:
        raise RunnerError(str(e)) from None
    # np.array for a 0-d input (a scalar such as Silero VAD's sr): np.ascontiguousarray would make it 1-d
    return {n: (np.ascontiguousarray if np.ndim(a) else np.array)(a, dtype=dt)
            for (n, dt), a in zip(inputs, arrays, strict=True)}


def bind_all(r: Any, session: Any, feed: dict[str, np.ndarray]) -> tuple[Any, ...]:
    """An IO binding of every input (copied to the device) and every output (allocated there where its
    shape is known, else by ONNX Runtime in the first, cold, call), without running the session.
    (binding, the OrtValues it uses...)."""
    ort, dev, idx = r._ort, r._dev_type, r._dev_id
    b = session.io_binding()
    keep = []
    for name, x in feed.items():
        xv = ort.OrtValue.ortvalue_from_numpy(x, dev, idx)
        b.bind_ortvalue_input(name, xv)
        keep.append(xv)
    n = count(feed)
    for o in session.get_outputs():
        dims, dt = list(o.shape), io_dtype(o.type)
        if dt is not None and dims and all(isinstance(d, int) and d > 0 for d in dims[1:]):
            ov = ort.OrtValue.ortvalue_from_shape_and_type([n, *dims[1:]], dt, dev, idx)
            b.bind_ortvalue_output(o.name, ov)
            keep.append(ov)
        else:
            b.bind_output(o.name, dev, idx)
    return (b, *keep)
