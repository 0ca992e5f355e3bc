"""Inputs and outputs of one model or several tensors, as one value.

A batch is a numpy array (a model with one input, or one output: the path every built-in
model takes, unchanged) or a dict {name: array} in the model's order (several inputs or
outputs); the first axis of every array is the sample. These helpers treat both alike:
counting, slicing, tiling, joining, and the files that carry them across the process
boundary (``.npy`` for one array, as before; a ``.npz`` archive, one array per name, for
several: written to the exact path given, and told apart on reading by its content).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from infer_compare.base import npyfile

Batch = np.ndarray | dict[str, np.ndarray]


def is_multi(x: Any) -> bool:
    return isinstance(x, Mapping)


def count(x: Batch) -> int:
    """Samples in ``x`` (the first axis; of the first array of a dict)."""
    return len(next(iter(x.values()))) if is_multi(x) else len(x)


def each(x: Batch, fn: Callable[[np.ndarray], np.ndarray]) -> Batch:
    """``fn`` applied to the array, or to every array of a dict (names and order kept)."""
    return {k: fn(v) for k, v in x.items()} if is_multi(x) else fn(x)


def head(x: Batch, n: int) -> Batch:
    return each(x, lambda a: a[:n])


def part(x: Batch, start: int, stop: int) -> Batch:
    return each(x, lambda a: a[start:stop])


def tile(x: Batch, n: int) -> Batch:
    """The first ``n`` samples of ``x``, repeated from its start where it has fewer; contiguous."""
    if is_multi(x):
        return {k: tile(v, n) for k, v in x.items()}
    if len(x) >= n:
        return np.ascontiguousarray(x[:n])
    reps = -(-n // len(x))
    return np.ascontiguousarray(np.concatenate([x] * reps)[:n])


def concat(parts: list[Batch]) -> Batch:
    """Batches joined along the sample axis (dicts name by name)."""
    if parts and is_multi(parts[0]):
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return np.concatenate(parts)


def as_float32(x: Any) -> Batch:
    """Outputs as float32 host arrays (parity compares in float)."""
    if is_multi(x):
        return {str(k): np.asarray(v, dtype=np.float32) for k, v in x.items()}
    return np.asarray(x, dtype=np.float32)


def save(path: Any, x: Batch) -> None:
    """One array as ``.npy`` (``np.save``, as before); several as a ``.npz`` archive at exactly ``path``."""
    if not is_multi(x):
        np.save(path, x)
        return
    with open(path, "wb") as f:
        np.savez(f, **{k: np.asarray(v) for k, v in x.items()})


def load(path: Any, *, mmap: bool = False) -> Batch:
    """What :func:`save` wrote: an array, or {name: array} in the order written; every header is
    checked against the file and the memory available before anything is allocated, a compressed
    array inflated once (base/npyfile.py: ValueError, one line). ``mmap``: memory-mapped where the
    file holds the bytes uncompressed (for files nothing rewrites while they are in use: a bundle's,
    the user's; never the exchange files between processes)."""
    return npyfile.load(path, mmap=mmap)


def digest_update(h: Any, x: Batch | None) -> None:
    """Feed ``x`` to the hash ``h``: an array's bytes (as before); a dict's names, dtypes, shapes and
    bytes."""
    if x is None:
        return
    if not is_multi(x):
        h.update(np.ascontiguousarray(x).tobytes())
        return
    for k, v in x.items():
        v = np.ascontiguousarray(v)
        h.update(f"{k}|{v.dtype.str}|{v.shape}|".encode())
        h.update(v.tobytes())


def arrays_for(names: list[str], x: Batch) -> list[np.ndarray]:
    """The arrays of ``x`` for a runtime whose inputs are ``names``: by name, or, where ``x`` names them
    otherwise (a pre-built file with its own names), by position; one array feeds a one-input runtime."""
    if not is_multi(x):
        if len(names) != 1:
            raise ValueError(f"the model takes {len(names)} inputs ({', '.join(names)}); given one array")
        return [x]
    if all(n in x for n in names):
        return [x[n] for n in names]
    if len(x) == len(names):
        return list(x.values())
    raise ValueError(f"the model takes inputs {', '.join(names)}; given {', '.join(x)}")
