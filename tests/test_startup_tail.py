"""The fixed work at the end of a comparison (issue 37, start-up round 6), CPU-only: the report writers'
imports start in the background once no CPU configuration is left to measure (never beside a CPU row), a
slot's worker says when it has nothing left, and the process ends without the interpreter's teardown yet with
everything the teardown does that anyone can see (non-daemon threads waited for, atexit handlers run, output
flushed, the status)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from types import SimpleNamespace

import pytest

from infer_compare.measure import lanes, prefetch
from infer_compare.measure.gpus import Slot
from infer_compare.measure.parallel import run_on_slots

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cells(*kinds: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(kind=k, device=("cuda:0" if k == "cuda" else k) if k != "none" else None,
                            name=f"c{i}")
            for i, k in enumerate(kinds)]


def _order(monkeypatch, cells: list[SimpleNamespace]) -> list[str]:
    """The events of measure_cells over ``cells`` in turn (one GPU, CPU rows after): each cell measured, and
    where the prefetch started."""
    events: list[str] = []
    monkeypatch.setattr(prefetch, "start", lambda cores=(): events.append("prefetch"))
    run = SimpleNamespace(environment=SimpleNamespace(gpus=[]), notes=[])
    sel = SimpleNamespace(cpu_rows="after", gpus="spread")
    lanes.measure_cells(run, cells, sel, lambda c, tag, slot=None: events.append(c.name))
    return events


def test_the_prefetch_starts_after_the_last_cpu_configuration_of_those_in_turn(monkeypatch):
    ev = _order(monkeypatch, _cells("cpu", "cuda", "cpu", "cuda", "cuda"))
    assert ev.index("prefetch") == ev.index("c2") + 1 and ev.index("prefetch") < ev.index("c3")


def test_the_prefetch_starts_at_once_without_cpu_configurations_and_never_in_a_cpu_only_run(monkeypatch):
    ev = _order(monkeypatch, _cells("cuda", "none", "cuda"))
    assert ev[0] == "prefetch"
    ev = _order(monkeypatch, _cells("cpu", "none", "cpu"))
    assert "prefetch" not in ev  # nothing measured after the last CPU row: no overlap, no import beside a row
    ev = _order(monkeypatch, _cells("edgetpu", "cuda"))
    assert ev == ["c0", "prefetch", "c1"]  # an accelerator driven from the host counts as CPU-side


def test_a_slot_says_when_the_board_has_nothing_left_for_it_and_not_after_an_error():
    said: list[tuple[str, float]] = []
    t0 = time.perf_counter()
    work = [("slow", ("cuda:0",)), ("quick", ("cpu",))]
    run_on_slots(work, [Slot("cuda:0"), Slot("cpu")], lambda c, s: time.sleep(0.3 if c == "slow" else 0.01),
                 threading.Event(), on_done=lambda s: said.append((s.device, time.perf_counter() - t0)))
    when = dict(said)
    # the CPU lane's end, at once
    assert set(when) == {"cuda:0", "cpu"} and when["cpu"] < 0.2 <= when["cuda:0"]
    said.clear()

    def bad(cell, slot):
        raise RuntimeError("a worker's error")

    with pytest.raises(RuntimeError):
        run_on_slots([("x", ("cpu",))], [Slot("cpu")], bad, threading.Event(),
                     on_done=lambda s: said.append(s))
    assert said == []


def test_the_prefetch_imports_in_a_thread_once_and_can_be_turned_off(monkeypatch):
    monkeypatch.setattr(prefetch, "_started", None)
    monkeypatch.setattr(prefetch, "REPORT_WRITERS", ("json", "infer_compare.no_such_module", "csv"))
    t = prefetch.start()
    assert t is not None and t.daemon and prefetch.start() is t
    t.join(10)
    # stops at the first failure
    assert prefetch.warm(("json", "infer_compare.no_such_module", "csv")) == ["json"]
    monkeypatch.setattr(prefetch, "_started", None)
    monkeypatch.setenv("INFER_COMPARE_PREFETCH", "0")
    assert prefetch.start() is None and prefetch._started is None


SCRIPT = textwrap.dedent("""
    import atexit, sys, threading, time
    from infer_compare.host.process_end import end_process

    class Teardown:
        def __del__(self):
            sys.__stdout__.write("teardown ran\\n")

    keep = Teardown()  # a module-level object: only the interpreter's teardown deletes it
    atexit.register(lambda: print("atexit ran", flush=True))
    threading.Thread(target=lambda: (time.sleep(0.3), print("thread done"))).start()
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(2)  # never shut down: its idle workers leave at threading's exit hook
    pool.submit(print, "pool task ran").result()
    sys.stdout.write("no newline yet")
    end_process(3)
""")


def _end(env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT, **env_extra}
    return subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, env=env)


def test_the_process_ends_without_teardown_but_with_threads_atexit_output_and_status():
    res = _end({})
    assert res.returncode == 3, res.stderr
    out = res.stdout
    assert "no newline yet" in out and "thread done" in out and "atexit ran" in out and "pool task ran" in out
    assert out.index("thread done") < out.index("atexit ran")  # threads first, as the interpreter's shutdown
    assert "teardown ran" not in out


def test_the_normal_end_when_turned_off():
    res = _end({"INFER_COMPARE_FAST_EXIT": "0"})
    assert res.returncode == 3 and "atexit ran" in res.stdout and "teardown ran" in res.stdout


class _Proc:
    def poll(self):
        return None


def _watched(monkeypatch, tmp_path, done_after: int) -> list[float]:
    """The poll intervals of isolate._watch over a stand-in resident asked for two results: it writes them
    after the 3rd and 6th poll, its done file after poll ``done_after``; the clock moves by each sleep."""
    import json

    from infer_compare.measure import isolate
    from infer_compare.measure.cells import CellResult

    result, done = tmp_path / f"r{done_after}.jsonl", tmp_path / f"done{done_after}"
    sleeps: list[float] = []
    clock = [0.0]

    def sleep(s: float) -> None:
        sleeps.append(s)
        clock[0] += s
        if len(sleeps) in (3, 6):
            with open(result, "a") as f:
                f.write(json.dumps(CellResult.failed(len(sleeps) // 3, "skipped", "stand-in").to_dict())
                        + "\n")
        if len(sleeps) == done_after:
            done.write_text("done\n")

    monkeypatch.setattr(isolate.time, "sleep", sleep)
    monkeypatch.setattr(isolate.time, "perf_counter", lambda: clock[0])
    assert isolate._watch(_Proc(), result, 600, None, done, None, None, expected=2) == ""
    return sleeps


def test_the_parent_polls_fast_only_between_a_childs_last_result_and_its_end(monkeypatch, tmp_path):
    """50 ms polls while the child measures, 5 ms ones once it has written every result asked for, until its
    done file appears; a child that hangs after its last result is polled every 50 ms again after the
    window."""
    from infer_compare.measure import isolate

    assert _watched(monkeypatch, tmp_path, 10) == [isolate.POLL_S] * 6 + [isolate.FINAL_POLL_S] * 4
    monkeypatch.setattr(isolate, "FINAL_WINDOW_S", 0.0175)  # four fast polls (0.015 s < 0.0175 s after three)
    sleeps = _watched(monkeypatch, tmp_path, 20)
    assert sleeps == [isolate.POLL_S] * 6 + [isolate.FINAL_POLL_S] * 4 + [isolate.POLL_S] * 10
