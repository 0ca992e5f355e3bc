"""Inputs as arrays: a .npy (one input) or a .npz (named inputs, labels, reference outputs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from infer_compare.base import npyfile
from infer_compare.base.errors import UsageError
from infer_compare.data.user.checks import converted
from infer_compare.data.user.spec import fmt_shape

ONLY_OUTPUT = ""  # key of the reference outputs of a .npz "reference" array: the model's only output
Shape = Sequence[int | None]


@dataclass
class Arrays:
    inputs: np.ndarray | dict[str, np.ndarray]
    n: int
    labels: np.ndarray | None = None
    reference: dict[str, np.ndarray] | None = None
    notes: list[str] = field(default_factory=list)  # what reading them did: "x: float64 -> float32 (...)"


def first_line(e: BaseException) -> str:
    s = str(e).strip()
    return (s.splitlines()[0] if s else type(e).__name__)[:200]


def fits(sample: tuple[int, ...], want: Shape) -> bool:
    """True when ``sample`` matches ``want``; None or a negative entry of ``want`` matches any size."""
    return len(sample) == len(want) and all(w is None or w < 0 or s == w
                                            for s, w in zip(sample, want, strict=True))


def _as_input(a: np.ndarray, want: Shape | None, where: str, notes: list[str] | None = None,
              name: str = "") -> np.ndarray:
    """dtype kept when integer or bool, float32 otherwise (what that lost goes to ``notes``); a single
    sample gets its batch axis."""
    if a.dtype.kind in "iub":
        pass
    elif a.dtype.kind == "f":
        if a.dtype != np.float32:
            a, said = converted(a, np.float32, f"input {name!r}" if name else "")
            if notes is not None:
                notes.append(said)
    else:
        raise UsageError(f"{where}: arrays of dtype {a.dtype} cannot be model inputs (numbers only)")
    if a.ndim == 0:
        raise UsageError(f"{where}: a scalar is not an input sample")
    if want is not None:
        if fits(a.shape, want):
            a = a[None]
        elif not fits(a.shape[1:], want):
            raise UsageError(f"{where}: sample shape {fmt_shape(a.shape[1:])} does not match the model input "
                             f"{fmt_shape(want)} (array shape {fmt_shape(a.shape)})")
    if len(a) == 0:
        raise UsageError(f"{where} holds no samples")
    return a


def _open(path: Path):
    try:  # every header against the file's bytes and the memory available before anything is allocated;
        return npyfile.load(path, mmap=True)  # memory-mapped where uncompressed, inflated once where not
    except ValueError as e:
        raise UsageError(f"cannot read {e}") from None
    except Exception as e:
        if "allow_pickle" in str(e):  # object arrays need pickle: refused
            raise UsageError(f"cannot read {path}: it holds Python objects (refused: only numeric arrays, "
                             "loaded without pickle)") from None
        raise UsageError(f"cannot read {path}: not a valid {path.suffix} file ({first_line(e)})") from None


def load_npy(path: Path, input_shape: Shape | None) -> Arrays:
    a = _open(path)
    if not isinstance(a, np.ndarray):
        raise UsageError(f"cannot read {path}: not a .npy array")
    notes: list[str] = []
    a = _as_input(a, input_shape, str(path), notes)
    return Arrays(a, len(a), notes=notes)


def load_npz(path: Path, input_shape: Shape | Mapping[str, Shape] | None) -> Arrays:
    """Every array except "labels" and "reference"/"reference_<output>" is a model input, by name."""
    z = _open(path)
    if not isinstance(z, dict):
        raise UsageError(f"cannot read {path}: not a .npz archive")
    arrays = dict(z)
    names = [k for k in arrays if k != "labels" and k != "reference" and not k.startswith("reference_")]
    if not names:
        raise UsageError(f"{path} holds no input array (only labels/reference)")
    shapes = _shapes_for(names, input_shape, path)
    notes: list[str] = []
    inputs = {k: _as_input(arrays[k], shapes.get(k), f"{path}[{k}]", notes, k) for k in names}
    counts = {k: len(v) for k, v in inputs.items()}
    if len(set(counts.values())) > 1:
        raise UsageError(f"{path}: the inputs have different numbers of samples: "
                         + ", ".join(f"{k} {n}" for k, n in counts.items()))
    n = next(iter(counts.values()))
    labels = _labels(arrays["labels"], n, path) if "labels" in arrays else None
    ref = {(ONLY_OUTPUT if k == "reference" else k[len("reference_"):]): _reference(v, n, f"{path}[{k}]")
           for k, v in arrays.items() if k == "reference" or k.startswith("reference_")}
    return Arrays(inputs, n, labels, ref or None, notes)


def _shapes_for(names: list[str], input_shape, path: Path) -> dict[str, Shape]:
    if input_shape is None:
        return {}
    if isinstance(input_shape, Mapping):
        missing = [k for k in input_shape if k not in names]
        if missing:
            raise UsageError(f"{path} has no array for model input '{missing[0]}' "
                             f"(it has: {', '.join(names)})")
        extra = [k for k in names if k not in input_shape]
        if extra:
            raise UsageError(f"{path}: array '{extra[0]}' is not a model input "
                             f"(inputs: {', '.join(input_shape)})")
        return dict(input_shape)
    if len(names) > 1:
        raise UsageError(f"{path} holds {len(names)} inputs ({', '.join(names)}) but the model has one")
    return {names[0]: input_shape}


def _labels(a: np.ndarray, n: int, path: Path) -> np.ndarray:
    a = np.atleast_1d(a)
    if a.ndim != 1 or len(a) != n:
        raise UsageError(f"{path}: 'labels' must hold one class index per sample ({n}), "
                         f"has shape {fmt_shape(a.shape)}")
    if a.dtype.kind not in "iu" and not (a.dtype.kind == "f" and np.all(a == np.round(a))):
        raise UsageError(f"{path}: 'labels' must be integer class indices, got dtype {a.dtype}")
    if len(a) and a.min() < 0:
        raise UsageError(f"{path}: 'labels' holds a negative class index ({int(a.min())})")
    return a.astype(np.int64)


def _reference(a: np.ndarray, n: int, where: str) -> np.ndarray:
    if a.dtype.kind not in "iubf":
        raise UsageError(f"{where}: reference outputs must be numbers, got dtype {a.dtype}")
    a = a.astype(np.float32, copy=False) if a.dtype.kind == "f" else a
    if a.ndim >= 1 and len(a) == n:
        return a
    if n == 1:
        return a[None]
    raise UsageError(f"{where}: {len(a) if a.ndim else 'no'} reference samples for {n} inputs")
