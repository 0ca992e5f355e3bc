"""A TFLite file's inputs and outputs bound to the model's, one tensor at a time (issue 25 b).

Every tensor is bound by its index in the interpreter and carries its own dtype, scale and zero
point: int8 inputs are quantized and int8 outputs dequantized each with their own parameters.

Which model tensor a file tensor is: the converter renames them (litert-torch writes
``serving_default_args_0:0`` / ``StatefulPartitionedCall:1``), so the exporter records the
match it checked at conversion (``io_map`` in the artifact's manifest: the model's name of each
file input and output, in the file's order, and how they were matched: by name, or by shape and
order). Without that record (a file from elsewhere), a file tensor whose name is a model name is
that one; the others are taken in order (the report says so).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# pydantic reads typing.TypedDict only from Python 3.12 on; typing_extensions comes with pydantic
from typing_extensions import TypedDict

from infer_compare.base.errors import RunnerError
from infer_compare.base.schema import check_type, read_json


@dataclass
class Tensor:
    """One file tensor: its interpreter index, file name, model name, dtype and quantization."""

    index: int
    file_name: str
    name: str
    dtype: np.dtype
    scale: float
    zero_point: int
    shape: tuple[int, ...]
    channel_last: bool = False  # an NCHW model input the file takes as NHWC

    @property
    def quantized(self) -> bool:
        return self.dtype.kind in "iu" and self.scale > 0

    def describe(self) -> str:
        q = f" (scale {self.scale:.6g}, zero point {self.zero_point})" if self.quantized else ""
        lay = " NHWC" if self.channel_last else ""
        named = self.name if self.name == self.file_name else f"{self.name} <- {self.file_name}"
        return f"{named}:{lay} {self.dtype.name} {list(self.shape)}{q}"


def quantize(x: np.ndarray, scale: float, zero_point: int, dtype: Any) -> np.ndarray:
    info = np.iinfo(dtype)
    q = np.round(x / np.float32(scale)) + zero_point
    return np.clip(q, info.min, info.max).astype(dtype)


def dequantize(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    return ((q.astype(np.float32) - np.float32(zero_point)) * np.float32(scale)).astype(np.float32)


def write_io_map(artifact: str, io: dict[str, Any]) -> None:
    """The record beside the file (``<file>.io.json``): it travels with the file (a bundle copies it)."""
    if io:
        Path(str(artifact) + ".io.json").write_text(json.dumps({"io_map": io}))


def read_io_map(artifact: str) -> dict[str, Any]:
    """The exporter's record of the file's tensors (``<file>.io.json`` beside it, else ``io_map`` in the cache
    manifest beside it), or {}. A compiled Edge TPU file placed in a bundle reads its int8 source's."""
    here = Path(artifact)
    candidates = [Path(str(artifact) + ".io.json"), here.parent / "manifest.json"]
    if here.name.endswith("_edgetpu.tflite"):  # a bundle's drop-in: artifacts/edgetpu-int8 beside tflite-int8
        candidates.append(here.parent.parent / "tflite-int8" / "model.tflite.io.json")
    for man in candidates:
        if not man.is_file():
            continue
        # bounded parse; a record that is there but malformed is refused (RunnerError naming the field),
        # never silently replaced by a guess that could bind the wrong tensors
        data = read_json(man, what="TFLite io map", max_bytes=16 << 20, error=RunnerError)
        holder = data.get("options", data) if isinstance(data, dict) else None
        got = holder.get("io_map") if isinstance(holder, dict) else None
        if got is not None:
            check_type(IoMap, got, where=f"{man}: io_map", error=RunnerError)
            return got
    return {}


class IoMap(TypedDict, total=False):
    """``<file>.io.json``'s record (convert_onnx.io_map writes it): the model's name of each file input
    and output in the file's order, which inputs the file takes channel-last, how they were matched."""

    inputs: list[str]
    outputs: list[str]
    channel_last: list[bool]
    inputs_matched: str
    matched: str


def _tensor(d: dict, name: str, channel_last: bool) -> Tensor:
    q = d.get("quantization") or (0.0, 0)
    return Tensor(int(d["index"]), str(d["name"]), name, np.dtype(d["dtype"]), float(q[0]), int(q[1]),
                  tuple(int(s) for s in d["shape"]), channel_last)


def bind(details: list[dict], recorded: list[str] | None,
         channel_last: list[bool] | None) -> tuple[list[Tensor], str]:
    """The file's tensors with their model names; how they were matched."""
    names = [str(d["name"]) for d in details]
    if recorded and len(recorded) == len(details):
        how = "by name" if recorded == names else "as recorded at export"
        names = list(recorded)
    else:
        how = "by the file's own names and order (no export record)"
    cl = channel_last if channel_last and len(channel_last) == len(details) else [False] * len(details)
    return [_tensor(d, n, c) for d, n, c in zip(details, names, cl, strict=True)], how


def feed(tensors: list[Tensor], batch: Any) -> tuple[list[np.ndarray], bool]:
    """One array per file input, in the file's order (by model name, else by position); whether any
    was taken by position."""
    if not isinstance(batch, dict):
        if len(tensors) != 1:
            raise ValueError(f"the file has {len(tensors)} inputs; one array was given")
        return [batch], False
    if all(t.name in batch for t in tensors):
        return [batch[t.name] for t in tensors], False
    if len(batch) != len(tensors):
        raise ValueError(f"the file has {len(tensors)} inputs ({', '.join(t.name for t in tensors)}); "
                         f"{len(batch)} were given ({', '.join(batch)})")
    return list(batch.values()), True


def to_file(t: Tensor, a: Any) -> np.ndarray:
    """A model array as the file's input ``t`` takes it: NCHW -> NHWC where the file is channel-last,
    quantized with the tensor's own scale and zero point, in its dtype."""
    x = np.asarray(a)
    if x.dtype.kind == "f" or t.dtype.kind == "f" or t.quantized:
        x = x.astype(np.float32, copy=False)
    if t.channel_last and x.ndim == 4 and tuple(x.shape[1:]) != tuple(t.shape[1:]):  # NCHW given, NHWC taken
        x = x.transpose(0, 2, 3, 1)
    if t.quantized:
        x = quantize(x, t.scale, t.zero_point, t.dtype)
    else:
        x = x.astype(t.dtype, copy=False)
    return np.ascontiguousarray(x) if x.ndim else np.array(x)


def from_file(t: Tensor, a: Any) -> np.ndarray:
    """A file output as float32, dequantized with the tensor's own scale and zero point."""
    if t.quantized:
        return dequantize(np.asarray(a), t.scale, t.zero_point)
    return np.asarray(a, dtype=np.float32)


def guess_channel_last(details: list[dict]) -> list[bool]:
    """Without an export record: a 4-D input whose last axis is 1 or 3 and whose second is not."""
    out = []
    for d in details:
        s = [int(v) for v in d["shape"]]
        out.append(len(s) == 4 and s[3] in (1, 3) and s[1] not in (1, 3))
    return out


def match_outputs(model_shapes: list[tuple[int, ...]], file_shapes: list[tuple[int, ...]],
                  model_names: list[str], file_names: list[str]) -> tuple[list[str], str]:
    """The model's name of each file output (in the file's order): by name where every file name is a
    model name, else by shape and order (each model output, in order, takes the first file output of its
    shape not yet taken). ValueError when a model output has no file output of its shape."""
    if len(model_shapes) != len(file_shapes):
        raise ValueError(f"the file has {len(file_shapes)} outputs, the model {len(model_shapes)}")
    if set(file_names) == set(model_names) and len(set(file_names)) == len(file_names):
        return list(file_names), "by name"
    names: list[str | None] = [None] * len(file_shapes)
    for name, shape in zip(model_names, model_shapes, strict=True):
        free = [i for i, s in enumerate(file_shapes) if names[i] is None and tuple(s) == tuple(shape)]
        if not free:
            raise ValueError(f"model output '{name}' {list(shape)}: no output of the file has that shape "
                             f"({', '.join(str(list(s)) for s in file_shapes)})")
        names[free[0]] = name
    moved = [f"{f} -> {n}" for f, n in zip(file_names, names, strict=True)]
    return [str(n) for n in names], ("by shape and order (the converter renames outputs: "
                                     + ", ".join(moved) + ")")
