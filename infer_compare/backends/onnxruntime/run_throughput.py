"""ONNX Runtime's throughput scenario (backends/throughput.py for the engines).

CPU: one session and N concurrent ``run()`` calls, each from its own host thread on its
own input. ONNX Runtime documents ``Run`` as thread-safe on one session, and its own
benchmark tool, ``onnxruntime_perf_test -c N``, measures concurrency this way. The
session is made for the scenario with the cell's threads split among the calls
(``intra_op_num_threads`` = threads // N; with 1, each call computes on its own thread
and no intra-op pool is shared). N is the cell's thread count unless the harness names
one (``--concurrency``). ``run()`` releases the GIL, so the calls overlap.

CUDA (and the TensorRT EP): N sessions (the loaded one and N-1 more), each with its own
execution provider instance and so its own compute stream, one host thread each
(``run_with_iobinding`` blocks until its outputs are ready). I/O follows ``--io`` as in
the latency scenario. N is :data:`CUDA_STREAMS` unless the harness names one. The CUDA
part has never run on the machines this was written on (no GPU there).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from infer_compare.backends.onnxruntime.run_multi import feed_of
from infer_compare.backends.throughput import (
    CUDA_STREAMS,
    ThroughputResult,
    ThroughputSettings,
    result,
    run_threads,
    split_threads,
)
from infer_compare.base.batches import count


def cpu_throughput(r: Any, batch: np.ndarray, s: ThroughputSettings) -> ThroughputResult:
    """One session, ``n`` concurrent run() calls, the cell's threads split among them."""
    ort = r._ort
    n = r.concurrency(s)
    per = split_threads(r.options.threads, n)
    so = ort.SessionOptions()
    so.intra_op_num_threads = per
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(r.artifact, so, providers=[r.provider])
    names, feed = r.output_names, r.input_name
    if r._multi:  # several inputs or outputs: each thread its own feed dict, every output
        feeds = [{k: v.copy() for k, v in r.prepare(batch).items()} for _ in range(n)]
        calls = [lambda f=f: sess.run(names, f) for f in feeds]
    else:
        xs = [np.array(batch, dtype=r._dtype, order="C") for _ in range(n)]
        calls = [lambda x=x: sess.run(names, {feed: x})[0] for x in xs]
    w = run_threads(calls, count(batch), s)
    how = (f"ONNX Runtime: one session, {n} concurrent run() calls from {n} threads (Run is thread-safe), "
           f"{per} intra-op thread(s) each")
    return result(w, n, "threads", how, {"sessions": 1, "concurrent_runs": n,
                                         "intra_op_threads_per_run": per},
                  outputs=r.to_numpy(w.last))


def cuda_throughput(r: Any, batch: np.ndarray, s: ThroughputSettings) -> ThroughputResult:
    """``n`` sessions (one CUDA stream each), one host thread each."""
    n = max(1, int(s.concurrency or CUDA_STREAMS))
    sessions = [r.session] + [r._create(r._so, r._gpu_providers()) for _ in range(n - 1)]
    x = feed_of(r._inputs, batch) if r._multi else np.ascontiguousarray(batch, dtype=r._dtype)
    calls = [_cuda_call(r, sess, {k: v.copy() for k, v in x.items()} if r._multi else x.copy())
             for sess in sessions]
    try:
        w = run_threads(calls, count(batch), s)
        out = r.to_numpy(w.last)
    finally:
        del calls, sessions
    how = (f"ONNX Runtime {r.provider}: {n} sessions, each its own execution provider instance and CUDA "
           "stream, one host thread each; "
           f"io {'device (IO binding)' if r._io else 'host (numpy in and out)'}")
    return result(w, n, "sessions", how, {"sessions": n}, outputs=out)


def _cuda_call(r: Any, sess: Any, x: np.ndarray | dict[str, np.ndarray]):
    if not r._io:
        names, feed = r.output_names, r.input_name
        if r._multi:
            return lambda: sess.run(names, x)
        return lambda: sess.run(names, {feed: x})[0]
    b, *values = r.bind(sess, x)

    def call(b=b, keep=tuple(values)):
        sess.run_with_iobinding(b)
        b.synchronize_outputs()
        return b

    return call
