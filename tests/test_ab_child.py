"""One side of the A/B gate (measure/ab_child.py): its calling thread pinned to one CPU while blocks are timed
and let go before a runner loads; a runner loaded by "open" (both sides at once) keeps its load time for
"load"."""

from __future__ import annotations

import os
import threading
from types import SimpleNamespace

import pytest

from infer_compare.measure import ab_child
from infer_compare.measure.ab_child import _Pin, _Side

multi_cpu = pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                               reason="needs Linux and at least 2 CPUs")


def _in_thread(fn):
    out = {}

    def body():
        try:
            out["v"] = fn()
        except BaseException as e:  # pragma: no cover - reported by the assertion below
            out["e"] = e

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert "e" not in out, out.get("e")
    return out["v"]


@multi_cpu
def test_the_calling_thread_alone_is_pinned_to_the_highest_cpu_and_let_go():
    allowed = set(os.sched_getaffinity(0))

    def body():
        pin = _Pin()
        started_before = {}
        # a runtime's thread, started before the pin: it keeps every CPU
        t = threading.Thread(target=lambda: started_before.setdefault("m", None))
        cpu = pin.hold()
        held = set(os.sched_getaffinity(0))
        t.start()
        t.join()
        pin.release()
        return cpu, held, set(os.sched_getaffinity(0))

    cpu, held, after = _in_thread(body)
    assert cpu == max(allowed) and held == {cpu}
    assert after == allowed
    assert set(os.sched_getaffinity(0)) == allowed  # this (another) thread was never pinned


class _Runner:
    fixed_batch = None
    exec_precision = "fp32"
    settings: dict = {}
    notes: tuple = ()

    def __init__(self):
        self.affinity_at_run: list[set[int]] = []

    def prepare(self, x):
        return x

    def run(self, x):
        if hasattr(os, "sched_getaffinity"):
            self.affinity_at_run.append(set(os.sched_getaffinity(0)))
        return x

    def library_versions(self):
        return {}


class _Session:
    def __init__(self, runner):
        self.runner, self.loaded, self.calls = runner, None, []

    def runner_for(self, batch):
        self.calls.append(set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set())
        if self.loaded == batch:
            return self.runner, 0.0
        self.loaded = batch
        return self.runner, 0.25


def _side(monkeypatch) -> _Side:
    runner = _Runner()
    monkeypatch.setattr(ab_child, "tile", lambda images, b: images)
    side = _Side.__new__(_Side)
    side.spec = SimpleNamespace(loop=SimpleNamespace(warmup_iters=2, warmup_time_s=0.0))
    side.sess, side.images, side.x, side.opened, side.pin = _Session(runner), [0], None, None, _Pin()
    return side


def test_a_runner_opened_side_by_side_keeps_its_load_time(monkeypatch):
    side = _side(monkeypatch)
    assert _in_thread(lambda: side.open(1)) == {"ok": True, "load_s": 0.25}
    got = _in_thread(lambda: side.load(1, 0.0, pin=False))
    assert got["ok"] and got["load_s"] == 0.25 and got["calling_thread_cpu"] is None
    again = _in_thread(lambda: side.load(1, 0.0, pin=False))  # not opened again: ready, 0 s
    assert again["load_s"] == 0.0


@multi_cpu
def test_load_pins_after_the_cold_call_and_lets_go_before_the_next_load(monkeypatch):
    side = _side(monkeypatch)
    allowed = set(os.sched_getaffinity(0))

    def body():
        first = side.load(1, 0.0, pin=True)
        during = set(os.sched_getaffinity(0))
        second = side.load(8, 0.0, pin=True)  # another batch size: loaded with every CPU, pinned again
        return first, during, second

    first, during, second = _in_thread(body)
    assert first["calling_thread_cpu"] == max(allowed) and during == {max(allowed)}
    assert side.sess.calls == [allowed, allowed]  # both loads ran unpinned
    runs = side.sess.runner.affinity_at_run
    assert runs[0] == allowed  # the cold call: the runtime starts its threads unpinned
    assert all(a == {max(allowed)} for a in runs[1:2])  # the warm-up: pinned
    assert second["calling_thread_cpu"] == max(allowed)
