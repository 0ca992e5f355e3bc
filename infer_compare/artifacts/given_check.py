"""A pre-built artifact (``--artifact``) checked against the model before anything is measured (issue 38):
the number of inputs and outputs, each input's rank, fixed sizes and kind of dtype, each output's size per
sample. A file whose tensors the converter renamed (TFLite: ``serving_default_x:0``) is matched by order;
an NHWC file input matches an NCHW model input; a dynamic dimension (-1 / a symbol) matches any size; a
quantized int8/uint8 input takes real values (the runner quantizes them).

What cannot be read here is said, not guessed: a TensorRT engine (needs TensorRT) and an OpenVINO IR's
outputs are not checked, and the row's notes say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infer_compare.backends.tflite.tflite_file import read_model
from infer_compare.base.errors import UsageError


@dataclass(frozen=True)
class Side:
    """One tensor as a file declares it: None for a dynamic dimension; kind f (float), i (integer),
    q (quantized integer: takes real values), b (bool), ? (unknown)."""

    name: str
    dims: tuple[int | None, ...] | None
    kind: str


def _tflite(path: str) -> tuple[list[Side], list[Side]]:
    m = read_model(path)

    def side(i: int) -> Side:
        t = m.tensors[i]
        sig = t.shape_signature if len(t.shape_signature) == len(t.shape) else t.shape
        kind = "f" if t.type.startswith(("float", "bfloat")) else "b" if t.type == "bool" else \
            "q" if t.type in ("int8", "uint8", "int16") and any(s > 0 for s in t.scale) else "i"
        return Side(t.name, tuple(None if v < 0 else int(v) for v in sig), kind)

    return [side(i) for i in m.inputs], [side(i) for i in m.outputs]


def _onnx(path: str) -> tuple[list[Side], list[Side]]:
    import onnx

    g = onnx.load(path, load_external_data=False).graph
    inits = {i.name for i in g.initializer}

    def side(vi: Any) -> Side:
        tt = vi.type.tensor_type
        dims = tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else None
                     for d in tt.shape.dim) if tt.HasField("shape") else None
        kind = "f" if tt.elem_type in (1, 10, 11, 16) else "b" if tt.elem_type == 9 else "i"
        return Side(vi.name, dims, kind)

    return [side(v) for v in g.input if v.name not in inits], [side(v) for v in g.output]


_PARAM = re.compile(r'<layer[^>]*type="Parameter"[^>]*>\s*<data([^>]*)>')


def _attr(text: str, name: str) -> str:
    m = re.search(rf'\b{name}="([^"]*)"', text)
    return m.group(1) if m else ""


def _ir(path: str) -> tuple[list[Side] | None, None]:
    """An OpenVINO IR's inputs (Parameter layers: their data's shape and element_type, in either order) from
    its XML; outputs are not read (None)."""
    text = Path(path).read_text(errors="replace")
    ins = []
    for data in _PARAM.findall(text):
        shape, et = _attr(data, "shape"), _attr(data, "element_type")
        dims = tuple(int(d) if d.strip().isdigit() else None
                     for d in shape.split(",")) if shape.strip() else ()
        ins.append(Side("", dims, "f" if et.startswith(("f", "bf")) else "b" if et == "boolean" else "i"))
    return (ins or None), None  # none found: a layout this reader does not know, not "no inputs"


def declared_io(path: str, fmt: str) -> tuple[list[Side] | None, list[Side] | None]:
    """(inputs, outputs) of a pre-built file; None for a side this tool cannot read without its runtime."""
    if fmt in ("tflite", "edgetpu"):
        return _tflite(path)
    if fmt == "onnx":
        return _onnx(path)
    if fmt == "openvino":
        return _ir(path)
    return None, None


def _fits(file_dims: tuple[int | None, ...], sample: tuple[int, ...] | None) -> bool:
    """A file tensor (batch axis first) takes one sample of ``sample`` (NCHW model, NHWC file allowed)."""
    if sample is None:  # batched off axis 0: not compared here
        return True
    body = file_dims[1:]
    if len(body) != len(sample):
        return False
    same = all(f is None or f == s for f, s in zip(body, sample, strict=True))
    if same or len(sample) != 3:
        return same
    nhwc = (sample[1], sample[2], sample[0])
    return all(f is None or f == s for f, s in zip(body, nhwc, strict=True))


def _size(dims: tuple[int | None, ...]) -> int | None:
    n = 1
    for d in dims[1:]:
        if d is None:
            return None
        n *= d
    return n


def _show(dims: Any) -> str:
    return "x".join("?" if d is None else str(d) for d in dims) if dims is not None else "?"


def _input_problems(ins: list[Side], model_ins: list[tuple[str, tuple[int, ...], str]]) -> list[str]:
    if len(ins) != len(model_ins):
        return [f"it has {len(ins)} input(s), the model {len(model_ins)} "
                f"({', '.join(n for n, _, _ in model_ins)})"]
    by_name = {s.name: s for s in ins}
    out = []
    for i, (name, sample, dkind) in enumerate(model_ins):
        s = by_name.get(name, ins[i])
        where = f"input '{s.name or name}'" + (f" (the model's '{name}')" if s.name
                                               and s.name != name else "")
        if s.dims is not None and not _fits(s.dims, sample):
            out.append(f"{where} is {_show(s.dims)}; the model's takes {_show(('N', *sample))}")
        elif s.kind in "fq" and dkind not in "fq" or s.kind in "ib" and dkind in "fq" and s.kind != dkind:
            out.append(f"{where} takes {'real values' if s.kind in 'fq' else 'integers'}; the model's is "
                       f"{'float' if dkind in 'fq' else 'integer'}")
    return out


def _output_problems(outs: list[Side], model_outs: list[tuple[str, tuple[int, ...]]]) -> list[str]:
    if len(outs) != len(model_outs):
        return [f"it has {len(outs)} output(s), the model {len(model_outs)} "
                f"({', '.join(n for n, _ in model_outs)})"]
    file_sizes = [_size(s.dims) if s.dims is not None else None for s in outs]
    if None in file_sizes:
        return []
    if any(s is None for _, s in model_outs):
        return []
    want = sorted(int(_prod(s)) for _, s in model_outs)
    if sorted(int(x) for x in file_sizes if x is not None) != want:
        return [f"its outputs hold {', '.join(str(x) for x in file_sizes)} values per sample; the model's "
                f"{', '.join(str(x) for x in want)}"]
    return []


def _prod(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def mismatch(path: str, fmt: str, model_ins: list[tuple[str, tuple[int, ...], str]],
             model_outs: list[tuple[str, tuple[int, ...]]]) -> tuple[list[str], str]:
    """(what does not match the model, what was not checked). ``model_ins``: (name, one sample's shape, dtype
    kind f/i/b) per input; ``model_outs``: (name, one sample's shape) per output."""
    try:
        ins, outs = declared_io(path, fmt)
    except Exception as e:  # a file this reader does not understand: the runner will say more
        return [], f"not checked against the model (its tensors could not be read: {type(e).__name__}: {e})"
    problems = _input_problems(ins, model_ins) if ins is not None else []
    problems += _output_problems(outs, model_outs) if outs is not None and model_outs is not None else []
    unchecked = {(True, True): "",
                 (True, False): "its outputs not checked (not readable without the runtime)",
                 (False, False): "its inputs and outputs not checked (not readable without the runtime)",
                 (False, True): "its inputs not checked"}[(ins is not None, outs is not None)]
    return problems, unchecked


def check_artifacts(artifacts: Any, model_ins: list, model_outs: list) -> dict[str, str]:
    """Every pre-built artifact against the model; UsageError (one line, exit 2) naming the first that does
    not match; {path: what was not checked} for the rows' notes."""
    notes = {}
    for art in artifacts:
        problems, unchecked = mismatch(art.path, art.format, model_ins, model_outs)
        if problems:
            raise UsageError(f"--artifact {Path(art.path).name} does not match the model: "
                             f"{'; '.join(problems)}")
        if unchecked:
            notes[art.path] = unchecked
    return notes


def _kind(dtype: Any) -> str:
    import numpy as np

    k = np.dtype(dtype).kind
    return "f" if k in "fc" else "b" if k == "b" else "i"


def check_given(artifacts: Any, minfo: Any, eval_inputs: Any, ref: Any) -> list[str]:
    """:func:`check_artifacts` with the model's sides read from the run's data (one sample of each input and
    of each reference output; a tensor batched off axis 0 is matched by count only); lines for the run's
    notes."""
    if not artifacts:
        return []
    axes = {d.get("name"): d.get("batch_axis", 0) for d in (minfo.inputs or ())}
    out_axes = {d.get("name"): d.get("batch_axis", 0) for d in (minfo.outputs or ())}
    first = (minfo.inputs[0].get("name") if minfo.inputs else None) or "input"
    ins = eval_inputs.items() if isinstance(eval_inputs, dict) else [(first, eval_inputs)]
    model_ins = [(n, tuple(a.shape[1:]) if axes.get(n, 0) == 0 else None, _kind(a.dtype)) for n, a in ins]
    outs = ref.items() if isinstance(ref, dict) else [("output", ref)] if ref is not None else []
    model_outs = [(n, tuple(a.shape[1:]) if out_axes.get(n, 0) == 0 else None) for n, a in outs]
    notes = check_artifacts(artifacts, model_ins, model_outs if outs else None)
    return [f"--artifact {Path(p).name}: {why}" for p, why in notes.items()]
