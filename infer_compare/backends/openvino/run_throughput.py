"""OpenVINO's throughput scenario, as ``benchmark_app -hint throughput`` measures it.

A second compiled model of the same IR, shape, precision hint and threads, with
PERFORMANCE_HINT THROUGHPUT (OpenVINO then picks its streams), and an AsyncInferQueue
of its OPTIMAL_NUMBER_OF_INFER_REQUESTS requests (or the harness's ``--concurrency``),
each with its own copy of the input. The loop is benchmark_app's inference-only loop:
``get_idle_request_id()`` then ``start_async()`` until the time is spent and a whole
round of requests has been started, then ``wait_all()``; images/s = requests x batch /
that wall time; each request's latency is OpenVINO's own ``InferRequest.latency``, read
when its request is idle again, as benchmark_app reports it. No Python completion
callback: one would need the GIL inside OpenVINO's thread while the loop waits. Compiling
the THROUGHPUT model is outside the measurement (``throughput_compile_s`` in the row's settings).

Against benchmark_app (openvino/tools/benchmark/benchmark.py, ``async_inference_only``):
the same loop, the same window (from before the first start_async() to the end of
wait_all(): the ramp-up and the drain count on both sides) and the same formula. One
difference, kept: the tool warms every request (whole rounds, >= ``warmup_s``, all
finished) before its window, benchmark_app one request once (``first_infer``), so its other
streams' first inferences fall in its window. The latency model of the cell stays loaded
during this scenario (idle: its threads took no CPU time in the window, and the loop's
img/s with or without it, or with it deleted, did not differ on the 2-core machine).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from infer_compare.backends.throughput import ThroughputResult, ThroughputSettings, Window, result
from infer_compare.base.batches import count


def _compile(r: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    compiled, _, _ = r._compile("THROUGHPUT")
    return compiled, round(time.perf_counter() - t0, 3)


def _run(q: Any, nireq: int, dur_ns: int, clock: Any) -> tuple[int, list[float]]:
    """benchmark_app's inference-only loop: requests started, and OpenVINO's latency (ms) of each one done."""
    t0, it, in_fly, lats = clock(), 0, set(), []
    while clock() - t0 < dur_ns or it % nireq:  # benchmark_app: end on a whole round of requests
        idle = q.get_idle_request_id()  # waits for one (no Python callback: the GIL stays free)
        if idle in in_fly:
            lats.append(q[idle].latency)
        else:
            in_fly.add(idle)
        q.start_async()
        it += 1
    q.wait_all()
    lats += [q[i].latency for i in in_fly]
    return it, lats


def _loop(q: Any, nireq: int, s: ThroughputSettings, images_per_request: int,
          clock: Any = time.perf_counter_ns) -> Window:
    """Warm-up (every request at least once, whole rounds, all done), then the measured window."""
    warm, _ = _run(q, nireq, int(s.warmup_s * 1e9), clock)  # at least one round of requests
    if s.meter is not None:
        s.meter.start()
    t0 = clock()
    it, lats = _run(q, nireq, int(s.duration_s * 1e9), clock)
    wall = clock() - t0
    energy = s.meter.stop() if s.meter is not None else None
    return Window(images=it * images_per_request, wall_ns=wall, latencies_ns=[int(v * 1e6) for v in lats],
                  warmup_calls=warm, energy=energy)


def async_queue_throughput(r: Any, batch: np.ndarray, s: ThroughputSettings) -> ThroughputResult:
    import openvino as ov

    compiled, compile_s = _compile(r)
    optimal = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    nireq = int(s.concurrency or optimal)
    q = ov.AsyncInferQueue(compiled, nireq)
    # each request its own input, kept alive
    inputs = [r.set_inputs(q[i], batch, copy=True) for i in range(nireq)]
    w = _loop(q, nireq, s, count(batch))
    out = r.to_numpy(q[0])
    streams = int(compiled.get_property("NUM_STREAMS"))
    settings = {"PERFORMANCE_HINT": str(compiled.get_property("PERFORMANCE_HINT")), "NUM_STREAMS": streams,
                "INFERENCE_NUM_THREADS": int(compiled.get_property("INFERENCE_NUM_THREADS")),
                "OPTIMAL_NUMBER_OF_INFER_REQUESTS": optimal, "infer_requests": nireq,
                "api": "AsyncInferQueue, start_async on the next idle request (benchmark_app's loop)",
                "throughput_compile_s": compile_s, "latency_source": "InferRequest.latency (OpenVINO's own)"}
    how = (f"OpenVINO AsyncInferQueue: {nireq} infer requests on a PERFORMANCE_HINT THROUGHPUT model "
           f"({streams} streams)")
    del q, inputs  # the requests before the input buffers they use
    return result(w, nireq, "requests", how, settings, outputs=out)
