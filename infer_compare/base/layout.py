"""Inputs and outputs by role: which axis of each tensor is the batch (issue 24 a).

Everything the tool keeps (data sets, reference outputs, the files a child reads) holds one sample
per row: the first axis of every array is the sample. A model need not take it so: a recurrent
state ``[2, batch, 128]`` has its batch on axis 1, and a scalar ``sr`` has none (it is fed as
given, never stacked). :class:`Layout` says, per input and output name, where the model's batch
axis is (None: no batch axis), and lays rows into the model's arrays and back:

* ``to_model``: an input's rows moved to its batch axis; an input without one gets its first row
  (every row holds the same value);
* ``from_model``: an output's batch axis moved first; an output without one is repeated per row.

The batch axes come from the graph (:func:`batch_axes`): the dimension symbol the inputs and
outputs share (the first input's dynamic first axis, else the symbol most tensors carry); axis 0
where nothing says otherwise; none for scalars and for fixed inputs of a model whose batch is
dynamic elsewhere.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infer_compare.base.batches import count

Axis = int | None
UNNAMED = ("?", "", None)


def _dynamic(d: Any) -> bool:
    return not isinstance(d, int) or d < 1


def batch_symbol(shapes: Sequence[tuple | None]) -> str | None:
    """The batch's dimension symbol: the first shape's named dynamic first axis, else the named symbol
    found in the most shapes (at least two), else None."""
    for s in shapes:
        if s and isinstance(s[0], str) and s[0] not in UNNAMED:
            return s[0]
    seen = Counter(d for s in shapes if s for d in set(s) if isinstance(d, str) and d not in UNNAMED)
    best = seen.most_common(1)
    return best[0][0] if best and best[0][1] >= 2 else None


def axis_of(shape: tuple | None, symbol: str | None, dynamic_batch: bool) -> Axis:
    """The batch axis of one tensor of declared ``shape`` (int, symbol, or "?" per axis)."""
    if shape is None:
        return 0
    if not shape:
        return None  # a scalar
    if symbol is not None and symbol in shape:
        return list(shape).index(symbol)
    if _dynamic(shape[0]):
        return 0
    if symbol is None:
        unnamed = [i for i, d in enumerate(shape) if d in UNNAMED]
        if unnamed:
            return unnamed[0]  # e.g. [2, ?, 128]: the one unnamed size is the batch
    return None if dynamic_batch else 0  # fixed: a state fed as given, or a static-batch model's axis 0


def batch_axes(inputs: Sequence[tuple[str, tuple | None]],
               outputs: Sequence[tuple[str, tuple | None]] = ()) -> tuple[dict[str, Axis], dict[str, Axis]]:
    """({input: batch axis}, {output: batch axis}) from the declared shapes."""
    symbol = batch_symbol([s for _, s in inputs] + [s for _, s in outputs])
    ins = {n: axis_of(s, symbol, True) for n, s in inputs}
    if not any(a is not None for a in ins.values()):  # nothing dynamic: a static-batch model
        first = next((s for _, s in inputs if s), None)
        ins = {n: _static_axis(s, first[0]) for n, s in inputs} if first else ins
        outs = {n: _static_axis(s, first[0]) for n, s in outputs} if first else {}
        return ins, outs
    outs = {n: axis_of(s, symbol, True) for n, s in outputs}
    return ins, outs


def _static_axis(shape: tuple | None, batch: Any) -> Axis:
    """A static-batch model's batch axis of one tensor: axis 0 where it has the batch's size, else the first
    axis that has it (a state [2, 1, 128] at batch 1), else none."""
    if not shape:
        return None if shape is not None else 0
    if shape[0] == batch:
        return 0
    return next((i for i, d in enumerate(shape) if d == batch), None)


def sample_shape(shape: tuple, axis: Axis) -> tuple:
    """The shape of one row: ``shape`` without its batch axis."""
    return tuple(shape) if axis is None else tuple(shape[:axis]) + tuple(shape[axis + 1:])


def with_batch(sample: tuple, axis: Axis, batch: Any) -> tuple:
    """The model's shape of ``batch`` rows of ``sample``."""
    return tuple(sample) if axis is None else tuple(sample[:axis]) + (batch,) + tuple(sample[axis:])


@dataclass(frozen=True)
class Layout:
    inputs: dict[str, Axis] = field(default_factory=dict)
    outputs: dict[str, Axis] = field(default_factory=dict)

    def trivial(self) -> bool:
        return all(a == 0 for a in self.inputs.values()) and all(a == 0 for a in self.outputs.values())

    def to_model(self, x: Any) -> Any:
        """Rows -> the model's input arrays (a dict; a single array passes through)."""
        if not isinstance(x, dict):
            return x
        out = {}
        for k, v in x.items():
            a = self.inputs.get(k, 0)
            if a is None:
                out[k] = np.array(v[0])  # a 0-d array stays 0-d (np.ascontiguousarray would make it 1-d)
            else:
                out[k] = np.ascontiguousarray(v if a == 0 else np.moveaxis(v, 0, a))
        return out

    def from_model(self, y: Any, rows: int) -> Any:
        """The model's output arrays -> rows (``rows`` of them, for the outputs with no batch axis). A
        runner's one array is the layout's one output, by its name."""
        if not isinstance(y, dict):
            if len(self.outputs) != 1:
                return y
            y = {next(iter(self.outputs)): y}
        out = {}
        for k, v in y.items():
            a = self.outputs.get(k, 0)
            v = np.asarray(v)
            if a is None or v.ndim <= a:
                out[k] = np.ascontiguousarray(np.broadcast_to(v, (rows, *v.shape)))
            else:
                out[k] = np.ascontiguousarray(v if a == 0 else np.moveaxis(v, a, 0))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"inputs": dict(self.inputs), "outputs": dict(self.outputs)}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Layout:
        d = d or {}
        return cls(dict(d.get("inputs", {})), dict(d.get("outputs", {})))


def observed_output_axes(declared: dict[str, Axis], got: dict[str, np.ndarray], rows: int,
                         sure: set[str]) -> dict[str, Axis]:
    """Output axes confirmed on a run of ``rows`` rows: where the graph did not name the batch (``sure``
    lacks the output), the one axis of size ``rows`` (rows > 1), else the declared guess."""
    out = dict(declared)
    for k, v in got.items():
        if k in sure:
            continue
        shape = np.shape(v)
        hits = [i for i, n in enumerate(shape) if n == rows]
        if rows < 2:  # one row: the declared axis stands unless its size says it cannot be the batch's
            guess = out.get(k, 0)
            if guess is not None and (guess >= len(shape) or shape[guess] != rows) and len(hits) == 1:
                out[k] = hits[0]  # e.g. a recognizer declared [1, seqlen] that returns [T, 1, classes]
            continue
        out[k] = hits[0] if len(hits) == 1 else (None if not hits else out.get(k, 0))
    return out


def named_io(minfo: Any) -> bool:
    """Whether a ModelInfo's inputs and outputs are by name: several of them, or one batched on an axis
    other than 0 (a one-input, one-output model batched on axis 0 records its input all the same)."""
    ins, outs = getattr(minfo, "inputs", ()) or (), getattr(minfo, "outputs", ()) or ()
    return len(ins) > 1 or len(outs) > 0 or any(d.get("batch_axis", 0) != 0 for d in ins)


def of_model_info(minfo: Any) -> Layout:
    """The layout a ModelInfo records (its inputs' and outputs' "batch_axis"; axis 0 where none is said)."""
    return Layout({d["name"]: d.get("batch_axis", 0) for d in getattr(minfo, "inputs", ()) or ()},
                  {d["name"]: d.get("batch_axis", 0) for d in getattr(minfo, "outputs", ()) or ()})


class LaidOut:
    """A runner fed rows (the first axis of every array the sample, as the tool keeps them): each input
    laid along the model's batch axis on the way in, each output's batch axis moved first on the way out.
    Everything else is the runner's own."""

    def __init__(self, runner: Any, layout: Layout):
        self._runner, self._layout = runner, layout

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)

    def prepare(self, batch: Any) -> Any:
        return self._runner.prepare(self._layout.to_model(batch))

    def infer(self, batch: Any) -> Any:
        return self._layout.from_model(self._runner.infer(self._layout.to_model(batch)), count(batch))

    def throughput(self, batch: Any, settings: Any) -> Any:
        tp = self._runner.throughput(self._layout.to_model(batch), settings)
        if tp.outputs is not None:
            tp.outputs = self._layout.from_model(tp.outputs, count(batch))
        return tp
