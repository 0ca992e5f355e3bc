"""The noise allowance: a moving-block bootstrap of the ratio of a statistic between two runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from infer_compare.catalog import deps

MAX_SAMPLES = 4000  # per run, thinned evenly in time order beyond this (the bootstrap stays fast)
N_BLOCKS = 20


def sample_blocks(samples_ns) -> Any:
    """Raw samples (ms) as an array of N_BLOCKS contiguous blocks, shape (B, L); None if too few."""
    import numpy as np

    a = np.asarray(samples_ns, dtype=np.float64) / 1e6
    if a.size > MAX_SAMPLES:
        a = a[np.linspace(0, a.size - 1, MAX_SAMPLES).round().astype(np.int64)]
    n_blocks = min(N_BLOCKS, a.size)
    if n_blocks < 2:
        return None
    length = a.size // n_blocks
    return a[: n_blocks * length].reshape(n_blocks, length)


def stat_fn(kind: str) -> Callable[..., Any]:
    import numpy as np

    if kind.startswith("quantile:"):
        q = float(kind.split(":", 1)[1])
        return lambda x: np.percentile(x, q, axis=-1)
    if kind in ("mean", "throughput"):
        return lambda x: x.mean(axis=-1)
    if kind == "min":
        return lambda x: x.min(axis=-1)
    if kind == "max":
        return lambda x: x.max(axis=-1)
    raise ValueError(kind)


def bootstrap_ratio_ci(base_blocks, cur_blocks, kind: str, confidence: float = 0.95, n_resamples: int = 1000,
                       seed: int = 0) -> tuple[float, float, str]:
    """Confidence interval of stat(current) / stat(baseline) by a moving-block bootstrap.

    Each run's blocks of consecutive samples are resampled with replacement,
    independently for the two runs. Returns (low, high, method).
    """
    import numpy as np

    stat = stat_fn(kind)
    ba, bb = np.asarray(base_blocks), np.asarray(cur_blocks)

    def statistic(ia, ib, axis=-1):
        ia = np.moveaxis(np.asarray(ia), axis, -1)
        ib = np.moveaxis(np.asarray(ib), axis, -1)
        xa = ba[ia].reshape(*ia.shape[:-1], -1)
        xb = bb[ib].reshape(*ib.shape[:-1], -1)
        return stat(xb) / stat(xa)

    ia0, ib0 = np.arange(ba.shape[0]), np.arange(bb.shape[0])

    if deps.has("scipy"):
        import inspect

        from scipy import stats

        kw: dict[str, Any] = {}
        params = inspect.signature(stats.bootstrap).parameters
        if "rng" in params:
            kw["rng"] = np.random.default_rng(seed)
        else:
            kw["random_state"] = np.random.default_rng(seed)
        res = stats.bootstrap((ia0, ib0), statistic, n_resamples=n_resamples, batch=100, vectorized=True,
                              paired=False, axis=-1, confidence_level=confidence, method="percentile", **kw)
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        return lo, hi, "scipy.stats.bootstrap (percentile), moving blocks"
    rng = np.random.default_rng(seed)
    vals = []
    for start in range(0, n_resamples, 100):
        k = min(100, n_resamples - start)
        vals.append(statistic(rng.integers(0, ia0.size, (k, ia0.size)),
                              rng.integers(0, ib0.size, (k, ib0.size))))
    v = np.concatenate(vals)
    alpha = (1 - confidence) / 2
    lo, hi = np.percentile(v, [100 * alpha, 100 * (1 - alpha)])
    return float(lo), float(hi), "numpy percentile bootstrap, moving blocks (scipy absent)"

