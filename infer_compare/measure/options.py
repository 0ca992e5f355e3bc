"""The run's options, declared once: what to measure and how. ``compare()``, ``run_bundle()``, ``soak()``
and a fleet's jobs all take them, as ``options=MeasureOptions(...)`` or as keywords of the same names
(``compare("lenet5", batch_sizes=[1, 8])``); the CLI builds one from its flags (cli/flags.py).

Each field is the CLI flag of the same meaning (``infer-compare --help``). ``selection()`` checks them
(UsageError before any work) and gives the Selection that planning reads (measure/plan.py).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from infer_compare.base.cache import Cache
from infer_compare.base.records import LATENCY
from infer_compare.measure.plan import Selection, make_selection


@dataclass(frozen=True)
class MeasureOptions:
    # what to measure (None: everything present)
    backends: Iterable[str] | None = None  # --backends
    formats: Iterable[str] | None = None  # --formats
    precisions: Iterable[str] | None = None  # --precisions
    devices: Iterable[str] | None = None  # --device
    batch_sizes: Iterable[int] | str | None = None  # --batch-sizes
    scenarios: str | Iterable[str] = LATENCY  # --scenario: latency, throughput or both
    io: str | None = None  # --io: the GPU timing policy, device (default) or host
    concurrency: int = 0  # --concurrency: requests in flight in the throughput scenario (0: the runtime's)
    gpus: str = "spread"  # --gpus: several GPUs: spread (default), every or sequential (measure/gpus.py)
    # --cpu-rows: CPU rows beside the GPU ones where cores allow (auto), after or beside
    cpu_rows: str = "auto"
    # {runner: {option: value}}, backends/*/options.py
    runner_options: dict[str, dict[str, Any]] | None = None
    artifacts: Iterable[str] = ()  # --artifact: pre-built files measured as given (compare only)
    # how to sample
    threads: int | None = None  # --threads (None: the physical cores)
    warmup_iters: int = 2  # --warmup
    warmup_time_s: float = 0.2  # --warmup-time
    min_iters: int = 5  # --min-iters
    min_time_s: float = 0.2  # --min-time
    max_time_s: float = 1.0  # --max-time
    target_ci: float | None = 0.02  # --target-ci
    passes: int = 2  # --passes
    parity_every_batch: bool = False  # --parity-every-batch
    seed: int = 0  # --seed
    # limits and the cache
    export_timeout_s: float = 1800.0  # --export-timeout
    cell_timeout_s: float = 600.0  # --cell-timeout
    cache_dir: str | os.PathLike | None = None  # --cache-dir
    use_cache: bool = True  # not --no-cache

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def of(cls, options: MeasureOptions | None, kwargs: dict[str, Any], where: str) -> MeasureOptions:
        """``options`` (or the defaults) with the keywords a caller gave on top; an unknown keyword is the
        TypeError a Python function would raise, with the closest option named."""
        names = cls.names()
        for k in kwargs:
            if k not in names:
                close = difflib.get_close_matches(k, names, n=1)
                raise TypeError(f"{where}() got an unexpected keyword argument {k!r}"
                                + (f"; did you mean {close[0]!r}?" if close else ""))
        return replace(options or cls(), **kwargs)

    def selection(self, **over: Any) -> Selection:
        """The checked Selection (UsageError on a bad value), ``over`` replacing fields first."""
        kw = {n: getattr(self, n) for n in self.names() if n not in ("cache_dir", "use_cache")}
        return make_selection(**{**kw, **over})

    def cache(self, warn: Any = None, log: Any = None) -> Cache:
        return Cache(self.cache_dir, enabled=self.use_cache, warn=warn, log=log)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (lists, not iterators), as a fleet's job carries it to a node."""
        d = asdict(self)
        for k, v in d.items():
            if v is not None and not isinstance(v, str | int | float | bool | dict):
                d[k] = os.fspath(v) if isinstance(v, os.PathLike) else list(v)
        return d

    def differing(self, names: Iterable[str]) -> list[str]:
        """Those of ``names`` whose value is not the default."""
        default = type(self)()
        return [n for n in names if getattr(self, n) != getattr(default, n)]
