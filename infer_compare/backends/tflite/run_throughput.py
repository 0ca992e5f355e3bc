"""LiteRT's throughput scenario: N interpreters of the same file, each resized to the
batch, with the cell's threads split among them (``num_threads`` = threads // N), each
invoked again and again from its own host thread on its own input. An interpreter is
not thread-safe, so each thread has its own; ``invoke()`` releases the GIL, so they run
at once. N is the cell's thread count unless the harness names one (``--concurrency``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..throughput import ThroughputResult, ThroughputSettings, result, run_threads, split_threads


def _call(it: Any, inp: int, out: int, x: np.ndarray):
    def call() -> Any:
        it.set_tensor(inp, x)
        it.invoke()
        return it.get_tensor(out)

    return call


def interpreters_throughput(r: Any, batch: np.ndarray, s: ThroughputSettings) -> ThroughputResult:
    n = r.concurrency(s)
    per = split_threads(r.options.threads, n)
    x = r.prepare(batch)
    shape = [int(v) for v in r.inp["shape"]]
    calls = []
    for _ in range(n):
        it = r._mod.Interpreter(model_path=r.artifact, num_threads=per)
        if int(it.get_input_details()[0]["shape"][0]) != shape[0]:
            it.resize_tensor_input(r.inp["index"], shape, strict=False)
        it.allocate_tensors()
        calls.append(_call(it, r.inp["index"], r.out["index"], x.copy()))
    w = run_threads(calls, len(batch), s)
    how = f"LiteRT: {n} interpreters, {per} thread(s) each, one host thread each"
    return result(w, n, "interpreters", how, {"interpreters": n, "num_threads_per_interpreter": per},
                  outputs=r.to_numpy(w.last))
