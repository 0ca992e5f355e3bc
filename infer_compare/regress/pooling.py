"""Several runs of one side pooled: each row at its fastest sustained speed, the machine's own speed.

On a shared machine, unchanged code measured twice differs by more than any one run's interval shows,
and in one direction: other tenants, frequency and cache contention only ever slow a run down. On the
2-core VM this project is tested on, the speed of a row switches between levels up to 2x apart, each
lasting from a tenth of a second to several seconds, within a row and between runs. So the figure of a
row that best says what the code can do is its fastest sustained level: the median (mean, throughput)
of the fastest of NBLOCKS blocks of consecutive calls of a run (``fast``); a side's figure is the median of
its runs' (``best``), the same statistic on both sides, which does not improve by adding runs. A slower
runner is slower in every block of every run; a slow level is not in all of them. Runs made at different
times still see different levels: the A/B gate (regress/ab.py), which measures both sides side by side, is
the way to judge small changes.
docs/gate.md has the figures that chose it.

A machine that is uniformly slower (or faster) today shows in two witnesses that do not depend on
the code under test changing one runtime: the change three quarters of the run's rows share (their
lower quartile), and the fixed calibration workload timed before each row (measure/calibration.py). Only when
both moved the same way by more than MACHINE_SHIFT are the timings divided by that shared change, and
the result says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from infer_compare.base.records import RunRecord
from infer_compare.regress.metrics import Metric
from infer_compare.regress.noise import sample_blocks

NBLOCKS = 20  # blocks of consecutive calls a row's samples are cut into (noise.sample_blocks)
FAST_METRICS = ("p50", "mean", "throughput")  # judged at the fastest block; tail metrics as measured
MACHINE_SHIFT = 0.10  # a run-wide change beyond this, in both witnesses, is the machine's, not the code's
CONDITION_KEYS = ("thread", "stream", "precision", "optimization", "provider", "hint", "device")


def fast(r: RunRecord, m: Metric) -> float | None:
    """Metric ``m`` of row ``r`` at its fastest sustained level: for p50 the median of the block of
    consecutive calls with the lowest median, for mean its mean, for throughput the row's throughput
    scaled by mean(all calls) / mean(that block). Other metrics, and rows without raw samples (or too
    few for blocks), as measured."""
    v = m.get(r)
    if v is None or m.name not in FAST_METRICS or not r.samples_ns:
        return v
    import numpy as np

    blocks = sample_blocks(r.samples_ns)
    if blocks is None or blocks.shape[1] < 3:
        return v
    k = int(np.argmin(np.median(blocks, axis=1)))
    if m.name == "p50":
        return float(np.median(blocks[k]))
    if m.name == "mean":
        return float(blocks[k].mean())
    return float(v) * float(blocks.mean()) / float(blocks[k].mean())


def best(rows: Sequence[RunRecord], m: Metric) -> tuple[RunRecord, float] | None:
    """(a run's row, the figure) of metric ``m`` over the runs of one side: each run's fastest sustained level
    (``fast``), then the median over the runs (the run nearest it, and the median itself); None when no run
    has the metric. A median, not the most favourable run: a figure that can only improve as runs are added
    would let a side measured more often (the current one, confirming) win by its number of draws."""
    have = sorted(((r, v) for r, v in ((r, fast(r, m)) for r in rows) if v is not None), key=lambda rv: rv[1])
    if not have:
        return None
    n = len(have)
    mid = have[n // 2][1] if n % 2 else (have[n // 2 - 1][1] + have[n // 2][1]) / 2
    return min(have, key=lambda rv: abs(rv[1] - mid))[0], mid


def _calibration_ms(rows: Iterable[RunRecord]) -> float | None:
    ms = [float(c["ms"]) for c in (((r.extra or {}).get("calibration") or {}) for r in rows) if c.get("ms")]
    return min(ms) if ms else None


def machine_factor(pairs: Sequence[tuple[Sequence[RunRecord], Sequence[RunRecord]]], m: Metric) -> \
        tuple[float | None, str]:
    """(factor, note): how much slower the machine ran the current runs than the baseline runs, or None
    when it did not move beyond MACHINE_SHIFT in both witnesses. ``pairs``: per row, (baseline rows,
    current rows), quiet ones only."""
    ratios, base_rows, cur_rows = [], [], []
    for bases, curs in pairs:
        a, b = best(bases, m), best(curs, m)
        if a is None or b is None or not a[1]:
            continue
        ratios.append((b[1] / a[1]) ** m.worse)  # > 1: slower now
        base_rows += bases
        cur_rows += curs
    ca, cb = _calibration_ms(base_rows), _calibration_ms(cur_rows)
    if len(ratios) < 3 or not (ca and cb):
        return None, ""
    ratios.sort()
    # the change that three quarters of the rows share: a runner slower on its own (one row in three
    # slower on a 6-row run) does not move it, a machine slower for every row does
    slow_q, fast_q = ratios[len(ratios) // 4], ratios[-1 - len(ratios) // 4]
    cal = cb / ca
    hi, lo = 1 + MACHINE_SHIFT, 1 / (1 + MACHINE_SHIFT)
    for shared, word in ((slow_q, "slower"), (fast_q, "faster")):
        if (shared > hi and cal > hi) if word == "slower" else (shared < lo and cal < lo):
            return shared, (f"the machine ran {word} than for the baseline: three quarters of the rows "
                            f"changed by {(shared - 1) * 100:+.0f} % or more and the calibration workload by "
                            f"{(cal - 1) * 100:+.0f} %; timings are judged relative to that run-wide change")
    return None, ""


def conditions(r: RunRecord) -> dict[str, object]:
    """What a row was measured under, beyond its label: threads and the runner's threading, stream,
    precision, optimization, provider and device options (scalar values only)."""
    out: dict[str, object] = {"threads": r.threads}
    for k, v in (r.options or {}).items():
        if isinstance(v, (str, int, float, bool)) and any(w in k.lower() for w in CONDITION_KEYS):
            out[k] = v
    return out


def conditions_changed(bases: Sequence[RunRecord], cur: RunRecord) -> str:
    """'' when ``cur`` ran under the conditions of some baseline run; else what changed, e.g.
    'threads 2 -> 1, intra_op_threads 2 -> 1'."""
    now = conditions(cur)
    then = [conditions(a) for a in bases]
    if not then or any(c == now for c in then):
        return ""
    ref = then[0]
    diffs = [f"{k} {ref.get(k, '-')} -> {now.get(k, '-')}" for k in dict.fromkeys([*ref, *now])
             if ref.get(k) != now.get(k)]
    return ", ".join(diffs)
