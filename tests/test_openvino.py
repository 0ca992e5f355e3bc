"""OpenVINO's runner, on the points where it is compared with benchmark_app.

- the latency loop calls ``infer(share_outputs=True)`` (no per-call copy of the outputs) and keeps
  OpenVINO's own latency of each call, the cold first call left out of its figures;
- the throughput loop warms every request (whole rounds, all finished) before its window opens, and
  counts, in the window, whole rounds of requests started and one latency per request;
- on a tiny model with real OpenVINO: the same, outputs right on both paths.

No assertion here is on a measured time: the latencies below are stand-ins.
"""

from __future__ import annotations

import importlib.util
from collections import deque
from types import SimpleNamespace

import numpy as np
import pytest

from infer_compare.backends.openvino.run import OpenVinoRunner
from infer_compare.backends.openvino.run_throughput import _loop
from infer_compare.backends.runner import RunOptions
from infer_compare.backends.throughput import ThroughputSettings


# ------------------------------------------------------------------------------ the latency loop
class _Request:
    """An InferRequest stand-in: records how infer() is called; its 'latency' is the call's number."""

    def __init__(self):
        self.calls: list[dict] = []
        self.inputs: list = []

    def infer(self, inputs=None, share_inputs=False, share_outputs=False):
        self.calls.append({"inputs": inputs, "share_outputs": share_outputs})

    @property
    def latency(self) -> float:
        return float(len(self.calls))

    def set_input_tensor(self, t):
        self.inputs.append(t)


def _fake_runner() -> tuple[OpenVinoRunner, _Request]:
    r = OpenVinoRunner("model.xml", "cpu", RunOptions(threads=2))
    req = _Request()
    r.request, r._multi = req, False
    r._ov = SimpleNamespace(Tensor=lambda x, shared_memory: ("tensor", x, shared_memory))
    return r, req


def test_latency_loop_shares_outputs_and_keeps_openvino_own_latency():
    r, req = _fake_runner()
    x = r.prepare(np.zeros((1, 3, 4, 4), np.float32))
    assert req.inputs == [("tensor", x, True)]  # the input set once, shared: no copy per call
    for _ in range(5):
        assert r.run(x) is req
    assert all(c == {"inputs": None, "share_outputs": True} for c in req.calls)  # outputs stay in the request
    m = r.extra_metrics()
    assert m["openvino_calls"] == 4  # the cold first call left out
    assert m["openvino_ms_min"] == 2.0 and m["openvino_ms_max"] == 5.0 and m["openvino_ms_p50"] == 3.5
    r.prepare(x)  # a new timed batch: its own calls only
    r.run(x)
    r.run(x)
    assert r.extra_metrics()["openvino_calls"] == 1


def test_openvino_own_latency_is_absent_without_calls():
    r, _ = _fake_runner()
    r.prepare(np.zeros((1, 3, 4, 4), np.float32))
    assert not any(k.startswith("openvino_") for k in r.extra_metrics())


def test_compile_config_is_what_the_runner_compiles_with():
    r = OpenVinoRunner("model.xml", "cpu", RunOptions(precision="bf16", threads=6))
    assert r.compile_config("THROUGHPUT") == {"PERFORMANCE_HINT": "THROUGHPUT", "INFERENCE_NUM_THREADS": 6,
                                              "INFERENCE_PRECISION_HINT": "bf16"}
    assert "INFERENCE_NUM_THREADS" not in \
        OpenVinoRunner("m.xml", "cpu", RunOptions()).compile_config("LATENCY")


# ------------------------------------------------------------------------------ the throughput loop
class _Queue:
    """An AsyncInferQueue stand-in: requests complete oldest first when an idle one is asked for."""

    def __init__(self, n: int):
        self.n, self.idle, self.busy, self.started = n, deque(range(n)), deque(), []
        self.reqs = [SimpleNamespace(latency=1.0) for _ in range(n)]

    def get_idle_request_id(self) -> int:
        if not self.idle:
            self.idle.append(self.busy.popleft())
        return self.idle[0]

    def start_async(self) -> None:
        i = self.idle.popleft()
        self.started.append(i)
        self.busy.append(i)

    def wait_all(self) -> None:
        self.idle.extend(self.busy)
        self.busy.clear()

    def __getitem__(self, i: int):
        return self.reqs[i]


class _Meter:
    def __init__(self, q: _Queue):
        self.q, self.at_start = q, None

    def start(self) -> None:
        self.at_start = (list(self.q.started), list(self.q.busy))

    def stop(self) -> str:
        return "reading"


@pytest.mark.parametrize("nireq", [1, 3, 4])
def test_every_request_is_warm_before_the_throughput_window(nireq):
    q = _Queue(nireq)
    meter = _Meter(q)
    ticks = iter(range(0, 10**12, 1_000_000))  # 1 ms per clock read
    w = _loop(q, nireq, ThroughputSettings(duration_s=0.05, warmup_s=0.01, meter=meter), 2,
              clock=lambda: next(ticks))
    warm_started, busy_at_start = meter.at_start
    assert set(warm_started) == set(range(nireq))  # every request ran before the window
    assert len(warm_started) % nireq == 0 and busy_at_start == []  # whole rounds, all finished
    assert w.warmup_calls == len(warm_started)
    in_window = len(q.started) - len(warm_started)
    assert in_window % nireq == 0 and in_window > 0  # benchmark_app's end: a whole round started
    assert w.images == 2 * in_window and len(w.latencies_ns) == in_window  # one OpenVINO latency per request
    assert w.energy == "reading"


# ------------------------------------------------------------------------------ real OpenVINO, a tiny model
@pytest.fixture
def relu_ir(tmp_path):
    if importlib.util.find_spec("openvino") is None:
        pytest.skip("OpenVINO is not installed")
    import openvino as ov
    import openvino.opset13 as ops

    p = ops.parameter([-1, 3, 8, 8], ov.Type.f32, name="input")
    path = tmp_path / "relu.xml"
    ov.save_model(ov.Model([ops.relu(p)], [p], "relu"), str(path))
    return str(path)


def test_real_runner_records_openvino_latency_and_reads_outputs(relu_ir):
    r = OpenVinoRunner(relu_ir, "cpu", RunOptions(threads=1, batch_size=2))
    r.load()
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    prepared = r.prepare(x)
    outs = [r.run(prepared) for _ in range(3)]
    assert np.array_equal(r.to_numpy(outs[-1]), np.maximum(x, 0))
    m = r.extra_metrics()
    assert m["openvino_calls"] == 2 and {"openvino_ms_p50", "openvino_ms_mean"} <= set(m)
    assert "share_outputs=True" in r.settings["api"]
    tp = r.throughput(x, ThroughputSettings(duration_s=0.05, warmup_s=0.01))
    n = tp.settings["infer_requests"]
    assert tp.warmup_calls >= n and tp.warmup_calls % n == 0  # every request warm, whole rounds
    assert tp.images == 2 * len(tp.latencies_ns) and len(tp.latencies_ns) % n == 0
    assert np.array_equal(tp.outputs, np.maximum(x, 0))
