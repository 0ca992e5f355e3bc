"""Several runs of one side pooled: the best run of a row, the spread between runs, the machine's own speed.

On a shared machine, unchanged code measured twice differs by more than any one run's interval shows,
and in one direction: other tenants, frequency and cache contention only ever slow a run down. So
the figure of a row that best says what the code can do is its best run (the lowest latency, the
highest throughput), on either side; the spread between the baseline runs is the allowance the
comparison gets on top of its threshold. docs/reports-and-regression.md has the figures that chose it.

A machine that is uniformly slower (or faster) today shows in two witnesses that do not depend on
the code under test changing one runtime: the median change over all the run's rows, and the fixed
calibration workload timed before each row (calibration.py). Only when both moved the same way by
more than MACHINE_SHIFT are the timings divided by the run-wide median change, and the result says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from ..records import RunRecord
from .metrics import Metric

MACHINE_SHIFT = 0.10  # a run-wide change beyond this, in both witnesses, is the machine's, not the code's
CONDITION_KEYS = ("thread", "stream", "precision", "optimization", "provider", "hint", "device")


def best(rows: Sequence[RunRecord], m: Metric) -> RunRecord | None:
    """The row of the run most favourable on metric ``m`` (lowest latency, highest throughput)."""
    have = [r for r in rows if m.get(r) is not None]
    return min(have, key=lambda r: m.get(r) * m.worse) if have else None


def spread(rows: Sequence[RunRecord], m: Metric, relative: bool) -> float:
    """Between-run spread of ``m`` over the runs: the median absolute deviation (over the median when
    ``relative``); 0 for fewer than two runs. Robust to one run at another speed level."""
    vals = [float(v) for v in (m.get(r) for r in rows) if v is not None]
    if len(vals) < 2:
        return 0.0
    med = statistics.median(vals)
    mad = statistics.median(abs(v - med) for v in vals)
    return (mad / med if med else 0.0) if relative else mad


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
        if a is None or b is None or not m.get(a):
            continue
        ratios.append((m.get(b) / m.get(a)) ** m.worse)  # > 1: slower now
        base_rows += bases
        cur_rows += curs
    ca, cb = _calibration_ms(base_rows), _calibration_ms(cur_rows)
    if len(ratios) < 3 or not (ca and cb):
        return None, ""
    med, cal = statistics.median(ratios), cb / ca
    hi, lo = 1 + MACHINE_SHIFT, 1 / (1 + MACHINE_SHIFT)
    if (med > hi and cal > hi) or (med < lo and cal < lo):
        word = "slower" if med > 1 else "faster"
        return med, (f"the machine ran {word} than for the baseline: the median row changed by "
                     f"{(med - 1) * 100:+.0f} % and the calibration workload by {(cal - 1) * 100:+.0f} %; "
                     "timings are judged relative to that run-wide change")
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
