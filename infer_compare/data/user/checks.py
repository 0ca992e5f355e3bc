"""What the user's arrays are checked for before anything is measured, and what converting them did.

* NaN or Inf in an input sample: refused (UsageError, exit 2), naming the file and the samples. Parity
  compares every runtime with the FP32 reference on the same inputs; a NaN or Inf goes through almost
  every operator into the outputs, where the comparison has no meaning, so every row would fail parity
  for the data's sake (and be blamed on the runtime). Nothing is measured yet when this is found.
* A conversion of dtype (float64 -> float32 on reading; int8, bool, ... -> the model's input dtype) is
  said with what it lost: the largest rounding, values beyond the target's range, or "values kept
  exactly" where every value survived.
"""

from __future__ import annotations

import numpy as np

from infer_compare.base.errors import UsageError

# elements compared per step (the float64 copies of one step stay small)
_STEP = 1 << 20
_SHOWN = 8  # sample indices named in the error


def _rows_per_step(a: np.ndarray) -> int:
    per_row = max(1, int(np.prod(a.shape[1:], dtype=np.int64))) if a.ndim > 1 else 1
    return max(1, _STEP // per_row)


def nonfinite_samples(a: np.ndarray) -> np.ndarray:
    """The indices (first axis) of the samples of ``a`` that hold a NaN or an Inf (none for non-floats)."""
    if a.dtype.kind not in "fc" or a.ndim == 0:
        return np.zeros(0, np.int64)
    step = _rows_per_step(a)
    bad = [np.flatnonzero(~np.isfinite(a[i:i + step]).reshape(len(a[i:i + step]), -1).all(axis=1)) + i
           for i in range(0, len(a), step)]
    return np.concatenate(bad) if bad else np.zeros(0, np.int64)


def _first_bad(a: np.ndarray, i: int) -> str:
    """'NaN at [0, 3]' for sample ``i``'s first non-finite value."""
    s = np.asarray(a[i])
    pos = tuple(int(x) for x in np.argwhere(~np.isfinite(s))[0]) if s.ndim else ()
    v = s[pos] if pos else s
    what = "NaN" if np.isnan(v) else ("+Inf" if v > 0 else "-Inf")
    return f"{what} at [{', '.join(map(str, pos))}]" if pos else what


def refuse_nonfinite(inputs: np.ndarray | dict[str, np.ndarray], where: str) -> None:
    """A UsageError (one line, exit 2) when any sample of ``inputs`` holds NaN or Inf: how many, which (the
    first few indices), and the first such value."""
    named = inputs.items() if isinstance(inputs, dict) else [("", inputs)]
    found: dict[int, str] = {}
    n = 0
    for name, a in named:
        a = np.asarray(a)
        n = max(n, len(a) if a.ndim else 1)
        for i in nonfinite_samples(a):
            found.setdefault(int(i), f"{f'input {name!r}: ' if name else ''}{_first_bad(a, int(i))}")
    if not found:
        return
    idx = sorted(found)
    more = f", ... ({len(idx) - _SHOWN} more)" if len(idx) > _SHOWN else ""
    shown = ", ".join(map(str, idx[:_SHOWN])) + more
    raise UsageError(f"{where}: {len(idx)} of {n} input samples hold NaN or Inf (samples {shown}; sample "
                     f"{idx[0]}: {found[idx[0]]}): a runtime's outputs on them cannot be compared with the "
                     "reference, so every row would fail parity for the data; remove or fill those samples "
                     "(numpy.nan_to_num) and run again")


def _float_loss(a: np.ndarray, out: np.ndarray) -> tuple[float, float, int]:
    """(largest absolute rounding, largest relative rounding, values that became Inf) of ``a`` -> ``out``."""
    worst = rel = 0.0
    over = 0
    step = _rows_per_step(a)
    for i in range(0, max(len(a), 1), step):
        x = np.asarray(a[i:i + step] if a.ndim else a, np.float64)
        y = np.asarray(out[i:i + step] if a.ndim else out, np.float64)
        fin = np.isfinite(x)
        over += int(np.count_nonzero(fin & ~np.isfinite(y)))
        ok = fin & np.isfinite(y)
        d = np.abs(y[ok] - x[ok])
        if d.size:
            worst = max(worst, float(d.max()))
            nz = x[ok] != 0
            if np.any(nz):
                rel = max(rel, float((d[nz] / np.abs(x[ok][nz])).max()))
    return worst, rel, over


def changed_values(a: np.ndarray, out: np.ndarray) -> tuple[int, float]:
    """(values that did not survive ``a`` -> ``out``, the largest change) for a conversion from integers."""
    n, worst = 0, 0.0
    step = _rows_per_step(a)
    for i in range(0, max(len(a), 1), step):
        x = np.asarray(a[i:i + step] if a.ndim else a)
        y = np.asarray(out[i:i + step] if a.ndim else out)
        with np.errstate(over="ignore", invalid="ignore"):
            back = y.astype(x.dtype) if np.all(np.isfinite(y)) else None
        bad = np.ones(x.shape, bool) if back is None else back != x
        n += int(np.count_nonzero(bad))
        if np.any(bad):
            worst = max(worst, float(np.max(np.abs(y[bad].astype(np.float64) - x[bad].astype(np.float64)))))
    return n, worst


def converted(a: np.ndarray, dtype, what: str = "") -> tuple[np.ndarray, str]:
    """``a`` in ``dtype`` (contiguous) and what the conversion did, '' when there was none: "float64 ->
    float32 (the largest rounding 2.9e-08, relative 6e-08)", "int8 -> float32 (values kept exactly)",
    "int64 -> float32 (3 of 96 values changed, by up to 2)"; ``what`` ("input 'x'") leads the text."""
    a = np.asarray(a)
    dt = np.dtype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # what overflowed is counted and said below
        out = np.ascontiguousarray(a, dtype=dt)
    if a.dtype == dt:
        return out, ""
    head = f"{what + ': ' if what else ''}{a.dtype} -> {dt}"
    if a.dtype.kind == "f" and dt.kind == "f":
        worst, rel, over = _float_loss(a, out)
        if not worst and not over:
            return out, f"{head} (values kept exactly)"
        lost = [f"the largest rounding {worst:.2g}, relative {rel:.2g}"] if worst else []
        lost += [f"{over} value{'s' if over != 1 else ''} beyond {dt}'s range became Inf"] if over else []
        return out, f"{head} ({'; '.join(lost)})"
    n, worst = changed_values(a, out)
    if not n:
        return out, f"{head} (values kept exactly)"
    return out, f"{head} ({n} of {a.size} values changed, by up to {worst:.3g})"
