import math
import time

import numpy as np
import pytest

from infer_compare.base.records import PERCENTILE_MIN_SAMPLES, LatencyStats
from infer_compare.measure.bench import (
    STOP_BUDGET,
    STOP_MAX_ITERS,
    STOP_MIN,
    STOP_TARGET,
    LoopSettings,
    median_ci,
    median_ci_ranks,
    time_loop,
)


class FakeClock:
    """A clock that only the fake function moves: each call takes the next duration (ns)."""

    def __init__(self, durations_ns):
        self.now = 0
        self.durations = iter(durations_ns)
        self.calls = 0

    def __call__(self) -> int:
        return self.now

    def fn(self, _x) -> None:
        self.now += int(next(self.durations))
        self.calls += 1


def _stable(first_ns=100_000_000, ns=1_000_000, seed=0):
    rng = np.random.default_rng(seed)
    yield first_ns
    while True:
        yield ns * (1 + rng.uniform(-0.005, 0.005))


def _noisy(ns=1_000_000, seed=0):
    rng = np.random.default_rng(seed)
    while True:
        yield ns * rng.lognormal(0, 1.5)


def test_stats_match_numpy_and_keep_tails():
    rng = np.random.default_rng(1)
    s = (rng.lognormal(0, 0.5, 1000) * 1e6).astype(np.int64)
    s[0] = 10**9  # one huge outlier: never clipped
    st = LatencyStats.from_samples_ns(s)
    ms = s / 1e6
    assert st.count == 1000
    assert st.max_ms == pytest.approx(1000.0)
    assert st.p50_ms == pytest.approx(np.percentile(ms, 50))
    assert st.p99_ms == pytest.approx(np.percentile(ms, 99))
    assert st.mean_ms == pytest.approx(ms.mean())
    assert st.std_ms == pytest.approx(ms.std(ddof=1))
    assert st.min_ms <= st.p50_ms <= st.p90_ms <= st.p95_ms <= st.p99_ms <= st.max_ms
    assert st.median_ci_low_ms <= st.p50_ms <= st.median_ci_high_ms
    assert st.omitted_percentiles == ()


def test_stats_reject_empty():
    with pytest.raises(ValueError):
        LatencyStats.from_samples_ns([])


@pytest.mark.parametrize("name", sorted(PERCENTILE_MIN_SAMPLES))
def test_a_percentile_with_too_few_samples_is_not_given(name):
    need = PERCENTILE_MIN_SAMPLES[name]
    few = LatencyStats.from_samples_ns(np.arange(1, need) * 1_000_000)
    enough = LatencyStats.from_samples_ns(np.arange(1, need + 1) * 1_000_000)
    assert getattr(few, f"{name}_ms") is None and few.percentile(name) is None and \
        name in few.omitted_percentiles
    assert getattr(enough, f"{name}_ms") is not None and enough.percentile(name) is not None
    # p99 of 5 calls was the maximum under another name: not shown any more
    five = LatencyStats.from_samples_ns([1, 2, 3, 4, 100])
    assert five.p99_ms is None and five.max_ms == pytest.approx(100e-6) and five.median_ci_low_ms is None


def test_an_old_file_with_every_percentile_still_loads_and_applies_the_rule():
    old = {"count": 5, "mean_ms": 1.0, "std_ms": 0.1, "min_ms": 0.9, "p50_ms": 1.0, "p90_ms": 1.1,
           "p95_ms": 1.15, "p99_ms": 1.2, "max_ms": 1.2}
    st = LatencyStats.from_dict(old)
    assert st.p99_ms == 1.2 and st.percentile("p99") is None and st.percentile("p50") == 1.0
    assert st.median_ci_rel is None and not st.budget_ran_out


def test_median_ci_ranks_exact_and_approximate():
    assert median_ci_ranks(5) is None  # (min, max) covers only 1 - 2/32 < 95 %
    assert median_ci_ranks(6) == (0, 5)
    for n in (6, 10, 31, 100, 999):
        lo, hi = median_ci_ranks(n)
        j = lo + 1  # coverage of [x_(j), x_(n-j+1)] = 1 - 2 P(B <= j-1), B ~ Binomial(n, 1/2)
        tail = sum(math.comb(n, i) for i in range(j)) / 2**n
        assert 1 - 2 * tail >= 0.95
        wider_tail = sum(math.comb(n, i) for i in range(j + 1)) / 2**n
        assert 1 - 2 * wider_tail < 0.95  # the narrowest interval that reaches 95 %
        assert hi == n - 1 - lo
    lo_exact, _ = median_ci_ranks(1000)
    lo_approx, _ = median_ci_ranks(1001)
    assert abs(lo_exact - lo_approx) <= 1


def test_median_ci_covers_the_true_median():
    rng = np.random.default_rng(3)
    n, reps = 25, 2000
    hits = 0
    for _ in range(reps):
        _, lo, hi = median_ci(rng.exponential(1.0, n))
        hits += lo <= math.log(2) <= hi
    assert hits / reps >= 0.93  # nominal >= 95 %; 2000 draws leave about +-1 %


def test_loop_stops_early_when_the_ci_target_is_met_on_stable_timings():
    clk = FakeClock(_stable())
    s = LoopSettings(warmup_iters=2, warmup_time_s=0.2, min_iters=20, min_time_s=0.0, max_time_s=60.0,
                     target_ci=0.02)
    r = time_loop(clk.fn, 0, s, clock=clk)
    assert r.stopped_by == STOP_TARGET and r.target_met
    assert 20 <= r.n <= 40  # met at the first checks, long before 60 s of 1 ms calls
    assert r.first_ns == 100_000_000 and max(r.samples_ns) < 2_000_000  # the cold call is not a sample
    assert r.warmup_calls >= 199 and r.warmup_ns >= 200_000_000  # warm-up by time, after the cold call
    assert r.ci_rel <= 0.02 and r.ci_low_ns <= r.median_ns <= r.ci_high_ns
    assert sum(r.samples_ns) == r.wall_ns
    # the row's statistics from the windows the loop kept (measure/rows.py): the interval the loop stopped on
    st = LatencyStats.from_samples_ns(r.used_samples(), target_ci=r.target_ci, stopped_by=r.stopped_by,
                                      windows=r.used_sizes())
    assert st.median_ci_rel == pytest.approx(r.ci_rel) and not st.budget_ran_out
    assert st.windows == len(r.windows) >= 3 and not st.unstable and not st.disturbed


def test_loop_runs_to_the_budget_on_noisy_timings():
    clk = FakeClock(_noisy())
    s = LoopSettings(warmup_iters=1, warmup_time_s=0.0, min_iters=20, min_time_s=0.0, max_time_s=0.5,
                     target_ci=0.001)
    r = time_loop(clk.fn, 0, s, first_call_done=True, clock=clk)
    assert r.stopped_by == STOP_BUDGET and not r.target_met and r.first_ns is None
    assert r.wall_ns >= 0.5e9 and r.ci_checks > 1
    assert r.summary()["target_met"] is False and r.summary()["n"] == r.n
    st = LatencyStats.from_samples_ns(r.used_samples(), target_ci=r.target_ci, stopped_by=r.stopped_by,
                                      windows=r.used_sizes())
    assert st.budget_ran_out


def test_loop_without_target_stops_at_min_count_and_time():
    clk = FakeClock(_stable())
    s = LoopSettings(warmup_iters=2, warmup_time_s=0.0, min_iters=50, min_time_s=0.0, target_ci=None)
    r = time_loop(clk.fn, 0, s, clock=clk)
    assert r.n == 50 and r.stopped_by == STOP_MIN
    assert clk.calls == 52  # cold + 1 warm-up + 50 measured


def test_loop_respects_max_iters_and_real_clock_invariants():
    r = time_loop(lambda x: None, 0, LoopSettings(warmup_iters=0, warmup_time_s=0.0, min_iters=10,
                                                  min_time_s=100.0, max_iters=20))
    assert r.n == 20 and r.stopped_by == STOP_MAX_ITERS
    # the real clock, with CI checks pausing it: the samples still add up to the wall time
    r = time_loop(lambda x: time.sleep(0.0005), 0, LoopSettings(warmup_iters=1, warmup_time_s=0.01,
                                                                min_iters=10, min_time_s=0.05,
                                                                max_time_s=30.0, target_ci=0.25))
    assert sum(r.samples_ns) == r.wall_ns and r.wall_ns >= 0.05e9
    # sleep(0.5 ms) is stable to +-25 % at the median even on a busy machine
    assert r.stopped_by == STOP_TARGET


def test_a_warm_up_until_stable_ends_once_the_calls_are_steady():
    s = LoopSettings(warmup_iters=2, warmup_time_s=0.2, min_iters=20, min_time_s=0.0, max_time_s=60.0,
                     target_ci=0.02, warmup_until_stable=True)
    clk = FakeClock(_stable())
    r = time_loop(clk.fn, 0, s, clock=clk)
    assert r.summary()["warmup_stopped_by"] == "stable"
    assert 16 <= r.warmup_calls <= 25 and 20_000_000 <= r.warmup_ns < 30_000_000  # 1 ms calls: ~20, not 200
    assert r.stopped_by == STOP_TARGET and sum(r.samples_ns) == r.wall_ns


def test_a_warm_up_until_stable_waits_out_a_ramp_and_stops_at_its_time_cap():
    def ramp():  # calls 3 % faster every 8 calls for 40 calls (a clock ramping up), then steady
        yield 100_000_000
        for i in range(100_000):
            yield 2_000_000 * (0.97 ** min(i // 8, 5))

    s = LoopSettings(warmup_iters=2, warmup_time_s=0.2, min_iters=5, min_time_s=0.0, max_time_s=1.0,
                     target_ci=0.02, warmup_until_stable=True)
    clk = FakeClock(ramp())
    r = time_loop(clk.fn, 0, s, clock=clk)
    # the ramp's last step is at warm-up call 40: steady once the last 8 calls and the median of the 8 before
    # them (5 of those 8) are past it, i.e. after 53 calls, not during the ramp
    assert r.warmup_stopped_by == "stable" and r.warmup_calls == 53
    slow = FakeClock(_stable(ns=50_000_000))  # 50 ms calls: 16 of them outlast the 0.2 s cap
    r = time_loop(slow.fn, 0, s, clock=slow)
    assert r.warmup_stopped_by == "time" and 4 <= r.warmup_calls <= 5 and r.warmup_ns >= 200_000_000
    off = FakeClock(_stable())
    r = time_loop(off.fn, 0, LoopSettings(warmup_iters=2, warmup_time_s=0.2, min_iters=5, min_time_s=0.0,
                                          max_time_s=1.0, target_ci=0.02), clock=off)
    # off (CPU rows): the fixed warm-up as before
    assert r.warmup_stopped_by == "time" and r.warmup_calls >= 199
    few = FakeClock(_stable())
    r = time_loop(few.fn, 0, LoopSettings(warmup_iters=40, warmup_time_s=0.0, warmup_until_stable=True),
                  clock=few)
    assert r.warmup_stopped_by == "calls" and r.warmup_calls == 39  # --warmup calls are always made
