"""Each configuration measured in several processes, a whole pass of the plan apart (``--passes``, default 2),
and each row's interval from how far those processes moved.

Why: on the hosts this tool was measured on, a row's speed changes on a scale of seconds and from one process
to the next (benchmarks/results/reproducibility.md): batch-1 GPU rows moved 1.6-2x between windows 0.4 s
apart inside one process; on a 2-core VM, one process of ONNX Runtime ran ResNet-50 at 76 ms while the
processes before and after it ran 44-46 ms, its own windows within 2 % of each other. The windows of one
process, measured one after the other for a second, cannot show that; a second process a pass later can.

How: the plan is measured once (parity included), then every configuration that gave a timed row is measured
again in a fresh process (the same loop, no parity: the outputs were judged in the first pass), the passes
sharing the run's --min-time and --max-time. A row then keeps the samples of both, and its interval is

    exp(mean_p log m_p  ±  t(0.975, df) · s / sqrt(P))

where m_p are its P processes' medians and s the log-scale spread of one process's median about its row's
mean, pooled over every row of the same device and batch band (batch 1, 2-31, 32 and more: launch-bound and
throughput-bound rows move differently) that has P >= 2 (df = the pooled rows' P - 1 summed; a band of fewer
than MIN_POOLED rows pools over the device). A configuration whose first process took longer than
REVISIT_MAX_START_S to start (a TensorRT engine build) is measured once, and its rows take the same interval
with P = 1 from the widest of their device's bands' pools. Pooled, because a host that slows
one row down on one rerun slows another down on the next: two processes of one row alone would give an
interval of one degree of freedom. The interval is never narrower than the range of the row's own process
medians, nor than the within-process interval of its samples. A row whose interval is wider than the target is
``unstable``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from infer_compare.base.latency import LatencyStats
from infer_compare.base.records import RunRecord
from infer_compare.base.statistics import t_quantile
from infer_compare.measure.cells import CellResult, CellSpec
from infer_compare.measure.rows import load_text, window_notes

MIN_POOLED = 3  # rows a batch band needs to pool on its own; fewer: the device's rows together
# a configuration whose first process took longer than this to start (loading and cold first calls: a TensorRT
# engine build) is not measured again; its rows borrow the pooled spread. A warm torch.compile (5-8 s a
# configuration on an H200) is measured again: with a threshold of 5 s, its batch-32 rows, which move like
# launch-bound ones, borrowed the steady batch-256 rows' spread and held the 4-run median in 0 of 12
# (benchmarks/results/reproducibility/)
REVISIT_MAX_START_S = 30.0


def start_cost(results: list[Any]) -> float:
    """Seconds a configuration's process took to start its rows: loading and the cold first calls."""
    return sum(float(r.load_s or 0.0) + float(r.first_infer_ms or 0.0) / 1e3 for r in results)


def share(value: float | None, passes: int) -> float | None:
    """One pass's part of a budget the passes share (--min-time, --max-time)."""
    return None if value is None else float(value) / max(1, passes)


def again(spec: CellSpec) -> CellSpec:
    """The spec of a configuration's later pass: the same loop, no parity outputs (judged in the first)."""
    return spec.replace(parity_inputs=None, outputs="", parity_limit={})


def row_key(rec: Any) -> tuple:
    return (rec.backend, rec.format, rec.precision, rec.device, rec.batch_size,
            getattr(rec, "scenario", ""), getattr(rec, "variant", ""))


def _used(loop: dict[str, Any]) -> list[dict[str, Any]]:
    return [w for w in loop.get("windows") or () if w.get("used")]


def _pass_entry(p50: float, loop: dict[str, Any], n: int, wall_s: float, lo: Any, hi: Any) -> dict[str, Any]:
    return {"p50_ms": p50, "n": n, "wall_s": round(wall_s, 6), "windows": len(_used(loop)) or None,
            "ci_low_ms": lo, "ci_high_ms": hi, "disturbed": bool(loop.get("disturbed"))}


def first_pass(rec: RunRecord) -> dict[str, Any]:
    """The first pass of ``rec`` as an entry of ``extra["passes"]``."""
    lat = rec.latency
    assert lat is not None
    return _pass_entry(lat.p50_ms, rec.extra.get("loop") or {}, lat.count, rec.measured_wall_s or 0.0,
                       lat.median_ci_low_ms, lat.median_ci_high_ms)


def merge(rec: RunRecord, res: CellResult) -> RunRecord:
    """``rec`` with a later pass ``res`` of its configuration added: the samples of both, the windows of both,
    the passes' own figures in ``extra["passes"]``; the interval is set by :func:`finalize`."""
    if rec.latency is None or not res.ok or not res.samples_ns:
        why, k = res.error or "no samples", max(1, len(passes_of(rec))) + 1
        return rec.replace(notes=rec.notes + (f"its pass {k} failed ({why}): the figures are its first "
                                              "process's",))
    extra = dict(rec.extra)
    loops = list(extra.get("loops") or [extra.get("loop") or {}])
    done = list(extra.get("passes") or [first_pass(rec)])
    new = tuple(int(s) for s in res.samples_ns)
    one = LatencyStats.from_samples_ns(new, windows=_sizes(res.loop, len(new)))
    done.append(_pass_entry(one.p50_ms, res.loop, len(new), res.wall_ns / 1e9, one.median_ci_low_ms,
                            one.median_ci_high_ms))
    loops.append(dict(res.loop))
    extra.update(passes=done, loops=loops)
    samples = tuple(rec.samples_ns) + new
    sizes = [_sizes(lp, e["n"]) for lp, e in zip(loops, done, strict=True)]
    flat = None if any(s is None for s in sizes) else tuple(v for s in sizes for v in (s or ()))
    lat = LatencyStats.from_samples_ns(samples, target_ci=rec.latency.target_ci,
                                       stopped_by=rec.latency.stopped_by, windows=flat,
                                       disturbed=any(bool(lp.get("disturbed")) for lp in loops))
    wall = (rec.measured_wall_s or 0.0) + res.wall_ns / 1e9
    images = (rec.throughput or 0.0) * (rec.measured_wall_s or 0.0) + (
        res.images if res.images else (rec.batch_size or 1) * len(new))
    kept = tuple(n for n in rec.notes if n not in window_notes(rec.latency, rec.extra.get("loop") or {}))
    peak = max((v for v in (rec.peak_rss_mb, res.peak_rss_mb) if v is not None), default=None)
    return rec.replace(latency=lat, samples_ns=samples, measured_wall_s=wall, notes=kept, extra=extra,
                       throughput=images / wall if wall > 0 else rec.throughput, peak_rss_mb=peak)


def _sizes(loop: dict[str, Any], n: int) -> tuple[int, ...] | None:
    sizes = tuple(int(w["n"]) for w in _used(loop))
    return sizes if sizes and sum(sizes) == n else None


def passes_of(rec: Any) -> list[dict[str, Any]]:
    return list((getattr(rec, "extra", None) or {}).get("passes") or ())


def band(batch: int | None) -> str:
    b = int(batch or 1)
    return "b1" if b == 1 else ("b2-31" if b < 32 else "b32+")


def _logs(rec: Any) -> list[float]:
    return [math.log(p["p50_ms"]) for p in passes_of(rec) if p.get("p50_ms") and p["p50_ms"] > 0]


def pooled(rows: list[Any]) -> tuple[float, int] | None:
    """(s, df): the log-scale sd of one process's median about its row's mean, pooled over ``rows`` (those
    with two passes or more); None without any. Every row counts, the one whose processes moved 2x too: left
    out as an outlier (its scale over 3-5x the median row's), the interval held the 5-run median in 81-86 %
    of GPU rows instead of 91 % (benchmarks/results/reproducibility/), where a process in the slow mode is
    the norm, not the exception."""
    ss, df = 0.0, 0
    for r in rows:
        v = _logs(r)
        if len(v) < 2:
            continue
        m = sum(v) / len(v)
        ss += sum((x - m) ** 2 for x in v)
        df += len(v) - 1
    return (math.sqrt(ss / df), df) if df else None


def _pool(r: Any, multi: list[Any]) -> list[Any]:
    """Row ``r``'s pool among the rows of several passes ``multi``: those of its device, scenario and batch
    band, or of its device and scenario where the band has fewer than MIN_POOLED."""
    mine = [m for m in multi if (m.device, m.scenario) == (r.device, r.scenario)]
    same = [m for m in mine if band(m.batch_size) == band(r.batch_size)]
    return same if len(same) >= MIN_POOLED else mine


def _widest(r: Any, multi: list[Any], got: tuple[float, int],
            pool: list[Any]) -> tuple[tuple[float, int], list[Any]]:
    """The widest pooled spread among the batch bands of ``r``'s device (each pooled on its own) and its
    rows, where wider than ``got``."""
    mine = [m for m in multi if (m.device, m.scenario) == (r.device, r.scenario)]
    for b in {band(m.batch_size) for m in mine}:
        rows_b = [m for m in mine if band(m.batch_size) == b]
        other = pooled(rows_b)
        if other is not None and other[0] > got[0]:
            got, pool = other, rows_b
    return got, pool


def finalize(rows: list[RunRecord]) -> list[RunRecord]:
    """Every timed row with its interval from the pooled spread of its band (see the module's doc): those of
    several passes, and those of one whose band has a pool; the others as they are."""
    multi = [r for r in rows if len(_logs(r)) >= 2]
    out = []
    for r in rows:
        logs = _logs(r) or ([math.log(r.latency.p50_ms)] if r.latency is not None and r.latency.p50_ms > 0
                            else [])
        pool = _pool(r, multi) if logs else []
        got = pooled(pool)
        if len(logs) == 1 and got is not None:  # not measured again: the widest of its device's bands'
            got, pool = _widest(r, multi, got, pool)
        if got is None or r.latency is None:
            out.append(r)
            continue
        out.append(_with_interval(r, logs, got, len(pool)))
    return out


def _with_interval(r: RunRecord, logs: list[float], spread: tuple[float, int], n_rows: int) -> RunRecord:
    lat = r.latency
    assert lat is not None
    s, df = spread
    centre = sum(logs) / len(logs)
    half = t_quantile(0.975, df) * s / math.sqrt(len(logs))
    meds = [math.exp(v) for v in logs]
    lo = min(x for x in (math.exp(centre - half), *meds, lat.p50_ms, lat.within_ci_low_ms) if x is not None)
    hi = max(x for x in (math.exp(centre + half), *meds, lat.p50_ms, lat.within_ci_high_ms) if x is not None)
    limit = lat.target_ci or 0.02
    rel = max(hi - lat.p50_ms, lat.p50_ms - lo) / lat.p50_ms
    new = replace(lat, median_ci_low_ms=lo, median_ci_high_ms=hi, processes=len(logs),
                  process_min_ms=min(meds), process_max_ms=max(meds), pooled_sd=round(s, 5),
                  pooled_rows=n_rows, unstable=rel > limit)
    # a row of one process still carries its pass's window notes: the notes below replace them
    old = set(window_notes(lat, r.extra.get("loop") or {})) if len(logs) == 1 else set()
    return r.replace(latency=new, notes=tuple(n for n in r.notes if n not in old) + tuple(_notes(new, r)))


def _notes(lat: LatencyStats, r: RunRecord) -> list[str]:
    loops = list(r.extra.get("loops") or [r.extra.get("loop") or {}])
    kept = [w for lp in loops for w in _used(lp)]
    meds = ", ".join(f"{p['p50_ms']:.3g}" for p in passes_of(r))
    beside = load_text(kept)
    many = (lat.processes or 0) > 1
    how = f"{lat.processes} processes a pass apart: p50 {meds} ms" if many else \
        str(r.extra.get("single_pass") or "one process (its later pass failed)")
    out = [f"{how}; interval from the spread of {lat.pooled_rows} rows' processes on {r.device} "
           f"({100 * (lat.pooled_sd or 0):.1f} % a process)"]
    if lat.unstable:
        aim = f"±{100 * lat.target_ci:g} %" if lat.target_ci else "±2 %"
        out.append(f"unstable: its interval is wider than the {aim} target (p50 ±"
                   f"{100 * (lat.median_ci_rel or 0):.1f} %); a rerun may differ by as much"
                   + (f" ({beside})" if beside else ""))
    merged = {"windows": [w for lp in loops for w in lp.get("windows") or ()]}
    out += [n for n in window_notes(replace(lat, unstable=False), merged) if not n.startswith("windows ")]
    return out
