import numpy as np
import pytest

from infer_compare.bench import LoopSettings, time_loop
from infer_compare.records import LatencyStats


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


def test_stats_reject_empty():
    with pytest.raises(ValueError):
        LatencyStats.from_samples_ns([])


def test_loop_meets_min_count_and_min_time():
    calls = []
    r = time_loop(calls.append, 0, LoopSettings(warmup_iters=2, min_iters=50, min_time_s=0.0))
    assert len(r.samples_ns) == 50
    assert len(calls) == 52  # warm-up (the first call timed as 'first') + measured
    assert r.first_ns is not None
    assert sum(r.samples_ns) == r.wall_ns  # samples add up to the loop's wall time

    import time

    r = time_loop(lambda x: time.sleep(0.002), 0, LoopSettings(warmup_iters=0, min_iters=1, min_time_s=0.05))
    assert r.wall_ns >= 0.05e9
    assert len(r.samples_ns) >= 1


def test_loop_respects_max_iters():
    r = time_loop(lambda x: None, 0, LoopSettings(warmup_iters=0, min_iters=10, min_time_s=100.0, max_iters=20))
    assert len(r.samples_ns) == 20
