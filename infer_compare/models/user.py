"""The user's own model: an ONNX file, a TorchScript file, an ExportedProgram, a factory
callable or a ``torch.nn.Module`` object, described the same way whatever its form.

Public API
----------
``TensorSpec(name, shape, dtype)`` (frozen)
    One input or output. ``shape``: a tuple of int (fixed sizes) and str (symbolic
    dimensions; a dynamic batch is always the string ``"batch"``), or None where the model
    does not declare it (outputs only). ``dtype``: a numpy dtype name ("float32", "int64").
``UserModel(kind, source, sha256, inputs, outputs, static_batch, module, notes, weights_hash)``
    ``kind``: "onnx" | "torchscript" | "exported_program" | "factory" | "module" | "tflite"
    (prepare/tflite_file.py).
    ``source``: the absolute path, the "package.module:callable" reference or "<python object>".
    ``sha256``: of the file: the ``.onnx`` file, the ``.pt``/``.pt2`` file, the ``--weights``
    file; "" for a Python object (a factory without ``--weights``, a module). An ONNX file
    with external data hashes every file: sha256 of the ``"<sha256>  <relative name>\\n"``
    lines of the model file and then each sidecar in name order (a ``sha256sum`` listing).
    ``inputs``: every dimension an int except a dynamic batch (``"batch"``); ``outputs``:
    from the ONNX graph, or for a torch model from running the example input once.
    ``static_batch``: the batch the model requires (its inputs' fixed first axis), else None.
    ``module``: the eval-mode ``torch.nn.Module`` (torch kinds); None for ONNX.
    ``notes``: lines for the report. ``weights_hash``: 16 hex digits of the module's state
    dict (torch kinds; "" for ONNX): a content key where ``sha256`` is "".
    ``name`` (the file stem, the callable's or the class's name), ``example_inputs(batch)``
    (zeros of the right shapes and dtypes), ``as_dict()`` (everything but the module).
``looks_like_user_model(ref) -> bool``
    True for an existing file, a path-like string (with a separator, or ending in .onnx,
    .pt, .pth, .pt2, .ts, .torchscript), a "package.module:callable" reference, and any
    non-string object (a module); False for built-in and torchvision names.
``parse_input_shapes(text) -> dict[str | None, tuple[int, ...]]``
    ``"1x3x224x224"`` -> ``{None: (1, 3, 224, 224)}``; ``"image:1x3x224x224,mask:1x1x224x224"``
    -> one entry per input (names may contain ':', as in ``input:0``).
``load_user_model(ref, *, weights=None, input_shapes=None, example_input=None) -> UserModel``
``reference_outputs(model, inputs, batch=16) -> dict[str, np.ndarray]``
    FP32 reference outputs keyed by output name, in chunks of ``batch`` (a static batch
    sets the chunk, the last one padded with zeros): PyTorch (inference mode) for torch
    kinds, ONNX Runtime's CPU provider on the original file for ONNX.

Every bad input is a one-line ``UsageError`` (exit code 2). Nothing is unpickled beyond
``torch.load(weights_only=True)``: a pickled whole model is refused, never loaded.
The ONNX side lives in ``user_onnx.py``; the torch side in ``user_torch.py`` (factories,
modules, what every torch kind shares) and ``user_torchfile.py`` (TorchScript, ExportedProgram).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from infer_compare.base.errors import UsageError
from infer_compare.base.layout import Layout, batch_axes, sample_shape, with_batch

ONNX_SUFFIXES = (".onnx",)
TORCH_SUFFIXES = (".pt", ".pth", ".pt2", ".ts", ".torchscript")
# a TFLite file as the model: LiteRT on the CPU is its reference (prepare/tflite_file.py)
TFLITE_SUFFIXES = (".tflite",)
SUFFIXES = ONNX_SUFFIXES + TORCH_SUFFIXES + TFLITE_SUFFIXES
KINDS = ("onnx", "torchscript", "exported_program", "factory", "module", "tflite")
_FACTORY = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
SHAPE_HELP = "1x3x224x224, or name:1x3x224x224,name2:1x1x224x224 for several inputs"

Dim = int | str


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[Dim, ...] | None
    dtype: str
    # the axis that holds the batch (base/layout.py); None: fed as given, never stacked
    batch_axis: int | None = 0

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": None if self.shape is None else list(self.shape),
                "dtype": self.dtype, "batch_axis": self.batch_axis}

    def sample(self) -> tuple[Dim, ...]:
        """The shape of one sample: the shape without its batch axis."""
        return sample_shape(tuple(self.shape or ()), self.batch_axis)


@dataclass
class UserModel:
    kind: str
    source: str
    sha256: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    static_batch: int | None = None
    module: Any = field(default=None, repr=False, compare=False)
    notes: list[str] = field(default_factory=list)
    weights_hash: str = ""
    wraps: str = ""  # the user's file that ``source`` wraps (models/torchvision_det.py), else ""

    @property
    def name(self) -> str:
        if self.kind == "factory":
            return self.source.rpartition(":")[2].rpartition(".")[2]
        if self.kind == "module":
            return type(self.module).__name__ if self.module is not None else "module"
        return Path(self.source).stem

    def example_inputs(self, batch: int) -> dict[str, np.ndarray]:
        """Zeros of every input's shape and dtype, with the dynamic batch set to ``batch``."""
        if self.static_batch is not None and batch != self.static_batch:
            raise UsageError(f"{self.name} has a static batch {self.static_batch}; batch {batch} is not "
                             "possible")
        return {s.name: np.zeros(tuple(batch if d == "batch" else int(d) for d in s.shape or ()),
                                 dtype=s.dtype)
                for s in self.inputs}

    def layout(self) -> Any:
        """Each input's and output's batch axis (layout.Layout)."""
        return Layout({s.name: s.batch_axis for s in self.inputs},
                      {s.name: s.batch_axis for s in self.outputs})

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "source": self.source, "sha256": self.sha256,
                "weights_hash": self.weights_hash, "inputs": [s.as_dict() for s in self.inputs],
                "outputs": [s.as_dict() for s in self.outputs], "static_batch": self.static_batch,
                "notes": list(self.notes)}


# ---------------------------------------------------------------- parsing


def looks_like_user_model(ref: Any) -> bool:
    """Whether ``--model``'s value is the user's model rather than a built-in/torchvision name."""
    if not isinstance(ref, str | os.PathLike):
        return True  # a torch.nn.Module object (Python API)
    s = os.fspath(ref).strip()
    if not s:
        return False
    if os.path.isfile(os.path.expanduser(s)) or s.lower().endswith(SUFFIXES):
        return True
    return "/" in s or os.sep in s or s.startswith(("~", ".")) or bool(_FACTORY.match(s))


def parse_input_shapes(text: str) -> dict[str | None, tuple[int, ...]]:
    """``--input-shape``: "1x3x224x224" or "name:1x3x224x224,name2:...". Malformed: UsageError."""
    items = [s.strip() for s in str(text).split(",")]
    if not str(text).strip() or not all(items):
        raise UsageError(f"--input-shape {text!r}: an empty entry; use {SHAPE_HELP}")
    out: dict[str | None, tuple[int, ...]] = {}
    for item in items:
        name, _, dims = item.rpartition(":")
        key = name.strip() or None
        if key is None and len(items) > 1:
            raise UsageError(f"--input-shape {text!r}: name each input when giving several ({SHAPE_HELP})")
        try:
            shape = tuple(int(d) for d in dims.strip().lower().split("x"))
        except ValueError:
            raise UsageError(f"--input-shape {text!r}: {item!r} is not a shape; use {SHAPE_HELP}") from None
        if any(d <= 0 for d in shape):
            raise UsageError(f"--input-shape {text!r}: dimensions must be positive integers in {item!r}")
        if key in out:
            raise UsageError(f"--input-shape {text!r}: input {key!r} is given twice")
        out[key] = shape
    return out


def fmt_shape(shape: Iterable[Any] | None) -> str:
    return "?" if shape is None else "x".join(str(d) for d in shape) or "scalar"


def first_line(e: BaseException, limit: int = 300) -> str:
    """The first non-empty line of an exception's message (its type name when empty)."""
    line = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")
    return (line or type(e).__name__)[:limit]


# ---------------------------------------------------------------- shapes


def match_names(names: list[str], given: Mapping[str | None, tuple[int, ...]] | None,
                what: str) -> dict[str, tuple[int, ...]]:
    """The user's input shapes keyed by the model's input names (unnamed: the single input)."""
    if not given:
        return {}
    if None in given:
        if len(given) > 1:
            raise UsageError(f"--input-shape: name each input when giving several ({SHAPE_HELP})")
        if len(names) != 1:
            raise UsageError(f"{what} has {len(names)} inputs ({', '.join(names)}): name each one, "
                             f"e.g. --input-shape {names[0]}:1x3x224x224,{names[1]}:...")
        return {names[0]: tuple(given[None])}
    unknown = [k for k in given if k not in names]
    if unknown:
        raise UsageError(f"--input-shape names input '{unknown[0]}', which {what} does not have "
                         f"(its inputs: {', '.join(names)})")
    return {str(k): tuple(v) for k, v in given.items()}


def resolve_shape(name: str, declared: tuple[Any, ...] | None, given: tuple[int, ...] | None,
                  axis: int | None = 0) -> tuple[Dim, ...]:
    """A declared shape (int, symbolic str, or None for unknown) resolved with the user's shape:
    the batch ``axis`` stays ``"batch"`` when dynamic, other dynamic axes need the user's size."""
    if declared is None:
        if given is None:
            raise UsageError(f"input '{name}' has no shape in the model: give it with "
                             f"--input-shape {name}:1x3x224x224")
        declared = tuple("?" for _ in given)
    if given is not None:
        if len(given) != len(declared):
            raise UsageError(f"input '{name}': --input-shape {fmt_shape(given)} has {len(given)} dimensions, "
                             f"the model's input is {fmt_shape(declared)}")
        for i, (d, g) in enumerate(zip(declared, given, strict=True)):
            if isinstance(d, int) and d != g:
                raise UsageError(f"input '{name}': --input-shape {fmt_shape(given)} does not match the "
                                 f"model's {fmt_shape(declared)} (dimension {i} is fixed at {d})")
    out: list[Dim] = []
    for i, d in enumerate(declared):
        if isinstance(d, int):
            out.append(d)
        elif i == axis:
            out.append("batch")
        elif given is not None:
            out.append(int(given[i]))
        else:
            hint = "x".join("1" if j == axis else str(x) if isinstance(x, int) else "N"
                            for j, x in enumerate(declared))
            raise UsageError(f"input '{name}' has a dynamic dimension {i} ('{d}') with no size: "
                             f"give it with --input-shape {name}:{hint}")
    return tuple(out)


def resolve_inputs(declared: list[tuple[str, tuple[Any, ...] | None, str]],
                   given: Mapping[str | None, tuple[int, ...]] | None, what: str,
                   outputs: list[tuple[str, tuple[Any, ...] | None]] = (),  # type: ignore[assignment]
                   data_shapes: Mapping[str, tuple[int, ...]] | None = None) -> tuple[TensorSpec, ...]:
    """(name, declared shape, dtype) per input -> TensorSpecs with every dimension resolved and each
    input's batch axis (layout.batch_axes, from the symbols the inputs and ``outputs`` share). A dynamic
    size that --input-shape does not give comes from ``data_shapes`` (one sample's shape per input,
    from --data) where its rank fits."""
    shapes = match_names([d[0] for d in declared], given, what)
    axes, _ = batch_axes([(n, s) for n, s, _ in declared], outputs)
    for n, s, _ in declared:
        got = (data_shapes or {}).get(n, (data_shapes or {}).get("") if len(declared) == 1 else None)
        if n not in shapes and got is not None and s is not None and \
                len(got) + (axes[n] is not None) == len(s):
            shapes[n] = with_batch(tuple(int(d) for d in got), axes[n], 1)
    return tuple(TensorSpec(n, resolve_shape(n, s, shapes.get(n), axes[n]), t, axes[n])
                 for n, s, t in declared)


def static_batch_of(inputs: tuple[TensorSpec, ...]) -> int | None:
    """The first input's fixed batch when no input has a dynamic one."""
    firsts = [s.shape[s.batch_axis] for s in inputs if s.shape and s.batch_axis is not None]
    if not firsts or "batch" in firsts or not isinstance(firsts[0], int):
        return None
    return firsts[0]


def name_problem(path: str) -> str:
    """'' when the runtimes can open ``path`` by name, else why not, in one line. ONNX, ONNX Runtime,
    OpenVINO, TensorRT, TFLite and TorchScript open a file by its UTF-8 name (their C++ side), while a name
    the locale cannot decode (a Latin-1 byte under a UTF-8 or C locale) reaches Python as escapes that have
    no UTF-8 form: no library could open it, whatever the file holds."""
    raw = os.fsencode(path)
    try:
        if path.encode("utf-8") == raw:
            return ""
    except UnicodeEncodeError:
        pass
    shown = raw.decode("utf-8", "backslashreplace")
    enc = sys.getfilesystemencoding()
    try:
        raw.decode("utf-8")
        why = f"its bytes are not its name in UTF-8 (the locale's encoding is {enc})"
    except UnicodeDecodeError as e:
        part = raw[raw.rfind(b"/", 0, e.start) + 1:].split(b"/")[0].decode("utf-8", "backslashreplace")
        why = f"byte 0x{raw[e.start]:02x} in '{part}' is not UTF-8, and the locale ({enc}) cannot decode it"
    return (f"{shown}: the file name cannot be opened by the runtimes: {why}; they open files by UTF-8 "
            "names, so rename it (or its folder) to a UTF-8 name and run again (its content was not read)")


def sha256_files(paths: list[str]) -> str:
    """sha256 of one file; of several, sha256 of their ``sha256sum`` listing (first file's folder)."""
    def one(p: str) -> str:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    if len(paths) == 1:
        return one(paths[0])
    base = os.path.dirname(os.path.abspath(paths[0]))
    listing = "".join(f"{one(p)}  {os.path.relpath(os.path.abspath(p), base)}\n" for p in paths)
    return hashlib.sha256(listing.encode()).hexdigest()


def state_dict_hash(sd) -> str:
    h = hashlib.sha256()
    for k in sorted(sd):
        t = sd[k]
        h.update(k.encode())
        if hasattr(t, "detach"):
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]
