"""LiteRT's throughput scenario: N interpreters of the same file, each resized to the
batch, with the cell's threads split among them (``num_threads`` = threads // N), each
invoked again and again from its own host thread on its own input. An interpreter is
not thread-safe, so each thread has its own; ``invoke()`` releases the GIL, so they run
at once. N is the cell's thread count unless the harness names one (``--concurrency``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from infer_compare.backends.throughput import (
    ThroughputResult,
    ThroughputSettings,
    result,
    run_threads,
    split_threads,
)
from infer_compare.base.batches import count


def _call(it: Any, ins: list[int], outs: list[int], xs: list[np.ndarray]):
    def call() -> Any:
        for i, x in zip(ins, xs, strict=True):
            it.set_tensor(i, x)
        it.invoke()
        return [it.get_tensor(o) for o in outs]

    return call


def interpreters_throughput(r: Any, batch: Any, s: ThroughputSettings) -> ThroughputResult:
    n = r.concurrency(s)
    per = split_threads(r.options.threads, n)
    xs = r.prepare(batch)
    ins, outs = [t.index for t in r.ins], [t.index for t in r.outs]
    calls = []
    for _ in range(n):
        it = r._mod.Interpreter(model_path=r.artifact, num_threads=per)
        for t, d in zip(r.ins, it.get_input_details(), strict=True):
            if [int(v) for v in d["shape"]] != list(t.shape):
                it.resize_tensor_input(t.index, list(t.shape), strict=False)
        it.allocate_tensors()
        calls.append(_call(it, ins, outs, [x.copy() for x in xs]))
    w = run_threads(calls, count(batch), s)
    how = f"LiteRT: {n} interpreters, {per} thread(s) each, one host thread each"
    return result(w, n, "interpreters", how, {"interpreters": n, "num_threads_per_interpreter": per},
                  outputs=r.to_numpy(w.last))
