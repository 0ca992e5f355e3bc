"""The measured loop in windows (measure/bench.py): the row's interval from the spread between window
medians, its coverage, and disturbed windows measured again; on simulated windows with a fake clock."""

import io
import math
from contextlib import redirect_stderr

import numpy as np
import pytest

from infer_compare.base.records import LatencyStats
from infer_compare.base.statistics import median_ci, window_interval, windows_needed
from infer_compare.measure import windows as meter
from infer_compare.measure.bench import REMEASURE_MAX, STOP_BUDGET, STOP_TARGET, LoopSettings, time_loop
from infer_compare.measure.rows import window_notes

# the comparison's defaults (cli/args.py): --min-time 0.2 (three windows of 67 ms), --max-time 1,
# --target-ci 0.02
DEFAULT = LoopSettings(warmup_iters=2, warmup_time_s=0.0, min_iters=5, min_time_s=0.2, max_time_s=1.0,
                       target_ci=0.02)


class Sim:
    """A fake clock and load meter: each call takes ``base_ns`` times the window's speed times per-call noise
    (lognormal, ``within``). The speed holds for a window and moves at the meter's reading between windows
    (lognormal, ``between``; or ``levels(k)`` for window k), as a launch-bound GPU row's host does on a scale
    of tenths of a second. Windows in ``disturbed`` read as measured beside another process (``always``:
    all)."""

    def __init__(self, seed, base_ns=1_000_000, between=0.0, within=0.01, levels=None, disturbed=(),
                 always=False):
        self.rng = np.random.default_rng(seed)
        self.now, self.base, self.between, self.within, self.levels = 0, base_ns, between, within, levels
        self.k, self.disturbed, self.always = 0, set(disturbed), always
        self.level = self._level()

    def _level(self) -> float:
        if self.levels is not None:
            return float(self.levels(self.k))
        return float(np.exp(self.rng.normal(0.0, self.between)))

    def __call__(self) -> int:
        return self.now

    def fn(self, _x) -> None:
        self.now += int(self.base * self.level * math.exp(self.rng.normal(0.0, self.within)))

    def start(self) -> None:
        pass

    def read(self, wall_ns: int) -> dict:
        busy = self.always or self.k in self.disturbed
        self.k += 1
        self.level = self._level()
        return {"other_cores": 1.0 if busy else 0.0, "steal_cores": 0.0, "other_ticks": 7 if busy else 0,
                "steal_ticks": 0, "disturbed": busy}


@pytest.fixture(autouse=True)
def _judging(monkeypatch):
    """These tests are of the judgement itself: on, whatever tests/conftest.py set for the real runs."""
    monkeypatch.setenv(meter.SWITCH, "1")


def _run(sim: Sim, s: LoopSettings = DEFAULT):
    return time_loop(sim.fn, 0, s, first_call_done=True, clock=sim, load_meter=sim)


def _binomial_floor(n: int, p: float, alpha: float = 1e-3) -> int:
    """The smallest hit count k with P(Binomial(n, p) < k) >= alpha: fewer hits than this at a true rate of
    ``p`` or more happen less than once in 1/alpha."""
    cum = 0.0
    for k in range(n + 1):
        cum += math.comb(n, k) * p**k * (1 - p) ** (n - k)
        if cum >= alpha:
            return k
    return n


def test_the_loop_is_windows_that_split_the_cells_time():
    r = _run(Sim(0))
    assert len(r.windows) == 3 and r.stopped_by == STOP_TARGET  # steady: the first three agree
    assert all(w.wall_ns >= 200_000_000 // 3 for w in r.windows) and r.wall_ns < 250_000_000  # split
    assert [w.first for w in r.windows] == [0, r.windows[0].n, r.windows[0].n + r.windows[1].n]
    assert sum(w.n for w in r.windows) == r.n and sum(r.samples_ns) == r.wall_ns
    starts = [w.start_ns for w in r.windows]
    assert starts == sorted(starts) and starts[0] == 0
    loop = r.summary()
    assert [w["used"] for w in loop["windows"]] == [True] * 3 and loop["windows_used"] == 3
    assert all(w["median_ms"] == pytest.approx(1.0, rel=0.01) for w in loop["windows"])


def test_a_lasting_shift_between_windows_widens_the_interval_to_cover_a_rerun():
    # whole windows 10 % apart (lognormal), each call 1 % around its window's speed
    n, covered, within = 150, 0, 0
    for seed in range(n):
        a, b = _run(Sim(2 * seed, between=0.1)), _run(Sim(2 * seed + 1, between=0.1))
        rerun = b.median_ns
        covered += a.ci_low_ns <= rerun <= a.ci_high_ns
        _, lo, hi = median_ci(a.samples_ns)  # the interval the loop gave before windows
        within += lo <= rerun <= hi
        assert a.ci_low_ns <= lo and hi <= a.ci_high_ns  # never narrower than the within-window CI
    # measured: 0.88-0.91 of reruns inside the windows' interval, 0.1-0.2 inside the within-window CI;
    # at a true rate of 0.8, fewer than the floor happen less than once in a thousand
    assert covered >= _binomial_floor(n, 0.8)
    assert within <= n // 3


@pytest.mark.parametrize("between", [0.01, 0.02, 0.06])
def test_the_interval_covers_the_centre_at_its_stated_rate(between):
    # the centre of the window medians is the base time (the speeds' median is 1, the calls' noise symmetric
    # on the log scale); the interval says 95 %, with the loop stopping on it (Stein's rule keeps the rate)
    n, hits = 200, 0
    for seed in range(n):
        r = _run(Sim(1000 + seed, between=between))
        hits += r.ci_low_ns <= 1_000_000 <= r.ci_high_ns
    assert hits >= _binomial_floor(n, 0.95)


def test_stein_needs_more_windows_for_a_wider_spread_and_the_interval_holds_it():
    assert windows_needed([1.0, 1.0, 1.0], 0.02) == 3
    assert windows_needed([1.0, 1.01, 0.99], 0.02) > 3
    assert windows_needed([1.0, 1.2, 0.8], 0.02) > windows_needed([1.0, 1.01, 0.99], 0.02)
    # 15 windows alike after 3 that spread: no narrower than the first stage's spread gives for 15
    _, lo, hi = window_interval([1.0, 1.1, 0.9] + [1.0] * 12)
    assert (hi - lo) / 2 > 0.02
    assert window_interval([1.0, 1.1]) is None


def test_a_row_whose_windows_disagree_is_unstable_and_says_so():
    levels = [2.9, 4.8, 3.3, 4.1, 2.9, 4.6]
    r = _run(Sim(5, levels=lambda k: levels[k % len(levels)], within=0.02))
    assert r.stopped_by == STOP_BUDGET and len(r.windows) >= 10
    st = LatencyStats.from_samples_ns(r.used_samples(), target_ci=r.target_ci, stopped_by=r.stopped_by,
                                      windows=r.used_sizes())
    assert st.unstable and st.windows == len(r.windows) and st.budget_ran_out
    assert st.window_min_ms == pytest.approx(2.9, rel=0.02)
    assert st.window_max_ms == pytest.approx(4.8, rel=0.02)
    notes = window_notes(st, r.summary())
    assert len(notes) == 1 and notes[0].startswith("windows 2.9-4.8 ms: unstable (")
    assert "other processes 0.00 cores" in notes[0]  # what the meter saw beside it
    steady = _run(Sim(6))
    st = LatencyStats.from_samples_ns(steady.used_samples(), target_ci=0.02, stopped_by=steady.stopped_by,
                                      windows=steady.used_sizes())
    assert not st.unstable and window_notes(st, steady.summary()) == []


def test_a_disturbed_window_is_measured_again_and_left_out():
    r = _run(Sim(7, disturbed={1, 2}))
    assert r.stopped_by == STOP_TARGET and len(r.windows) == 5
    assert [w.disturbed for w in r.windows] == [False, True, True, False, False]
    assert r.used == (0, 3, 4) and not r.disturbed
    assert r.used_samples() == r.samples_ns[:r.windows[0].n] + r.samples_ns[r.windows[3].first:]
    loop = r.summary()
    left = [w for w in loop["windows"] if not w["used"]]
    assert [w["remeasured"] for w in left] == [True, True]
    assert all(len(w["samples_ns"]) == w["n"] for w in left)
    st = LatencyStats.from_samples_ns(r.used_samples(), target_ci=0.02, stopped_by=r.stopped_by,
                                      windows=r.used_sizes(), disturbed=r.disturbed)
    assert not st.disturbed
    notes = window_notes(st, loop)
    assert len(notes) == 1 and notes[0].startswith("2 windows measured again: other processes used the cores")
    # the budget grows by the windows measured again: a budget of the three windows alone still gets three
    # clean ones
    tight = LoopSettings(warmup_iters=1, warmup_time_s=0.0, min_iters=5, min_time_s=0.2, max_time_s=0.2,
                         target_ci=0.02)
    r = _run(Sim(8, disturbed={0}), tight)
    assert len(r.used) == 3 and r.used == (1, 2, 3) and not r.disturbed


def test_a_persistently_disturbed_row_says_disturbed_and_the_run_exits_3():
    r = _run(Sim(9, always=True))
    assert sum(w.excused for w in r.windows) == REMEASURE_MAX  # bounded: the later windows count
    assert len(r.windows) == 3 + REMEASURE_MAX and r.stopped_by == STOP_TARGET
    assert r.disturbed and r.used == (3, 4, 5)  # those the stop rule counted
    loop = r.summary()
    assert loop["disturbed"] is True
    st = LatencyStats.from_samples_ns(r.used_samples(), target_ci=0.02, stopped_by=r.stopped_by,
                                      windows=r.used_sizes(), disturbed=r.disturbed)
    notes = window_notes(st, loop)
    head = "disturbed: other processes used the cores while 3 of its 3 windows were measured (3 measured "
    assert st.disturbed and any(n.startswith(head + "again, the load persisted")
                                and n.endswith("not a clean measurement") for n in notes)
    rep = _report_with(st, notes)
    from infer_compare.cli.output import exit_code
    from infer_compare.report import common

    err = io.StringIO()
    with redirect_stderr(err):
        assert exit_code(rep) == 3
    assert "disturbed" in err.getvalue() and "not a clean measurement" in err.getvalue()
    assert common.status_text(rep.rows[0]) == "ok (disturbed)"
    clean = _report_with(LatencyStats.from_samples_ns([1_000_000] * 30, windows=(10, 10, 10)), [])
    assert exit_code(clean) == 0


def _report_with(st: LatencyStats, notes):
    from tests.test_verdict_ties import report, row

    return report([row("onnxruntime", "onnx", "fp32", 1, latency=st).replace(notes=tuple(notes))])


def test_the_meters_threshold_is_the_gates_and_allows_the_ticks_truncation():
    from infer_compare.regress.judge import DISTURBED_CORES

    assert meter.DISTURBED_CORES == DISTURBED_CORES
    # a window of 67 ms at 100 ticks a second: 1.7 ticks are a quarter core, 2 more the counters' truncation
    assert not meter.judge(3, 0, 0.067, 100) and meter.judge(4, 0, 0.067, 100)
    assert meter.judge(2, 2, 0.067, 100)  # other guests (steal) count too
    got = meter.summary([{"wall_s": 0.5, "other_ticks": 10, "steal_ticks": 0, "gpu_sm_mhz": 1980.0},
                         {"wall_s": 0.5, "other_ticks": 20, "steal_ticks": 5, "gpu_sm_mhz": 1965.0}], hz=100)
    assert got["other_cores"] == 0.3 and got["steal_cores"] == 0.05 and got["disturbed"]
    assert got["gpu_sm_mhz"] == (1965.0, 1980.0)


def test_the_judgement_can_be_switched_off(monkeypatch):
    monkeypatch.setenv(meter.SWITCH, "0")
    assert not meter.judge(100, 0, 0.067, 100)
    m = meter.LoadMeter()
    m.start()
    assert m.read(0).get("disturbed", False) is False
    r = _run(Sim(9, always=True))  # the simulated meter judges for itself: the loop takes its word
    assert r.disturbed


@pytest.mark.skipif(meter.own_ticks() is None, reason="no /proc")
def test_the_tools_own_children_are_its_own_time():
    import subprocess
    import sys
    import time

    before = meter.own_ticks()
    kid = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                            "while time.process_time() - t < 0.3: pass\ntime.sleep(30)"])
    try:
        deadline = time.time() + 30
        while time.time() < deadline and (meter.own_ticks() or 0) - before < 20:
            time.sleep(0.05)
        assert (meter.own_ticks() or 0) - before >= 20  # the child's 0.3 s of CPU, while it still runs
    finally:
        kid.kill()
        kid.wait()


def test_results_with_windows_load_and_older_ones_still_do(tmp_path):
    import json

    from infer_compare.base.errors import SchemaError
    from infer_compare.base.records import load_report
    from tests.test_verdict_ties import report, row

    st = LatencyStats.from_samples_ns([1_000_000 + i for i in range(30)], target_ci=0.02,
                                      windows=(10, 10, 10))
    d = report([row("onnxruntime", "onnx", "fp32", 1, latency=st)]).to_dict()
    path = tmp_path / "results.json"
    path.write_text(json.dumps(d))
    got = load_report(path).rows[0].latency
    assert got == st and got.windows == 3 and got.within_ci_low_ms is not None
    for k in ("windows", "window_min_ms", "window_max_ms", "within_ci_low_ms", "within_ci_high_ms",
              "unstable", "disturbed"):
        del d["rows"][0]["latency"][k]
    path.write_text(json.dumps(d))
    old = load_report(path).rows[0].latency
    assert old.windows is None and not old.unstable and not old.disturbed
    d["rows"][0]["latency"]["unstable"] = "yes"
    path.write_text(json.dumps(d))
    with pytest.raises(SchemaError, match="unstable"):
        load_report(path)


@pytest.mark.skipif(meter.own_ticks() is None, reason="no /proc")
def test_a_real_cpu_hog_beside_the_window_makes_it_disturbed(monkeypatch):
    """Another process (not one this process started: detached, its parent gone) spinning on a core while a
    window is measured: the real meter reads its CPU time as others' and judges the window disturbed."""
    import subprocess
    import sys
    import time

    hog = ("import os, time\nif os.fork():\n    os._exit(0)\nt = time.time()\n"
           "while time.time() - t < 4:\n    pass\n")
    subprocess.run([sys.executable, "-c", hog], check=True, timeout=30)  # returns once the grandchild spins
    time.sleep(0.3)
    m = meter.LoadMeter()
    m.start()
    time.sleep(1.0)
    got = m.read(1_000_000_000)
    assert got["other_cores"] >= 0.5 and got["disturbed"], got


def test_under_an_emulator_no_window_is_judged_disturbed(monkeypatch):
    """Under qemu and proot (scripts/arm64-check) the tracer works beside every call and reads as other
    processes' time: the readings are kept, no window is judged disturbed."""
    from infer_compare.host.arm import EMULATION_ENV

    assert meter.judge(100, 0, 0.067, 100)
    monkeypatch.setenv(EMULATION_ENV, "qemu-aarch64-static 7.2, user mode under proot")
    assert not meter.judge(100, 0, 0.067, 100)


def test_windows_too_short_to_judge_alone_are_judged_together():
    """0.45 cores of others in every window of 0.067 s is 3 ticks a window, within the truncation's slack
    of each (2 ticks beyond 0.25 cores); the windows the row keeps, together, are over it: disturbed."""

    class Busy(Sim):
        def read(self, wall_ns: int) -> dict:
            self.k += 1
            self.level = self._level()
            return {"other_cores": 0.45, "steal_cores": 0.0, "other_ticks": 3, "steal_ticks": 0,
                    "disturbed": meter.judge(3, 0, wall_ns / 1e9, 100)}

    r = _run(Busy(12))
    assert not any(w.disturbed for w in r.windows)
    assert r.disturbed and r.summary()["disturbed"]
    quiet = _run(Sim(12))
    assert not quiet.disturbed
