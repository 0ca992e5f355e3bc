"""One rule on one row: the change against the baseline runs, and the verdict.

Timings (latency and throughput), by ``timing``:

* ``best`` (the default): the row's fastest sustained level in each run (pooling.py: the fastest block of
  consecutive calls), the median over each side's runs, as measured unless the whole machine moved (both the
  change three quarters of the rows share and the calibration workload); current runs on a busy host
  (BUSY_HOST) are left out while a run on a quiet one remains, and a row beyond a rule whose every current
  run was measured on a busy host is not judged;
* ``reference``: each row as a ratio to its run's PyTorch fp32 row (the reference row as measured);
* ``calibrated``: as a ratio to the calibration workload each row's child timed before its loop;
* ``absolute``: as measured.

In the last three, with several runs the rule is judged on the pair of runs most favourable to
the current code (for latency, the slowest baseline against the fastest current run). The
interval each pair's own samples give (a block bootstrap) decides between a regression and noise.
"""

from __future__ import annotations

from dataclasses import dataclass

from infer_compare.base.records import RunRecord
from infer_compare.regress.metrics import METRICS, Metric, fmt_value
from infer_compare.regress.noise import bootstrap_ratio_ci, sample_blocks, stat_fn
from infer_compare.regress.results import BUSY, DISTURBED, NA, NOISE, PASS, REGRESSION, Check
from infer_compare.regress.rules import Rule

BEST = "best"
CALIBRATED = "calibrated"
REFERENCE = "reference"
ABSOLUTE = "absolute"
TIMINGS = (BEST, REFERENCE, CALIBRATED, ABSOLUTE)
# other processes' CPU use while a row's loop ran, in cores, beyond which its timings are not judged
DISTURBED_CORES = 0.25
# a row's run on a busy host: its child timed the calibration workload at this many times the median of the
# baseline runs of the row or more. On the 2-core EPYC VM, 83 % of such rows of unchanged code were more than
# 12 % slower than the baselines' fastest, against 21 % below it (benchmarks/gate_witness.py; the docs). A
# timing beyond a rule in such runs only is not judged (BUSY), and --confirm measures the row again.
BUSY_HOST = 1.2


def disturbance(r: RunRecord) -> float:
    """Cores other processes and other guests (steal) took while the row's loop ran (0 when unknown)."""
    c = (r.extra or {}).get("calibration") or {}
    return float(c.get("other_cores") or 0.0) + float(c.get("steal_cores") or 0.0)


@dataclass(frozen=True)
class Stats:
    confidence: float = 0.95
    n_resamples: int = 1000
    seed: int = 0
    timing: str = BEST
    # id(row) -> its run's reference row (PyTorch fp32, same device, batch, scenario)
    refs: dict | None = None
    # best: how much slower the whole machine ran the current runs (None: it did not)
    machine: float | None = None


def host_slowdown(b: RunRecord, bases: list[RunRecord]) -> float | None:
    """How many times its baseline runs' median time the calibration workload took before ``b``'s loop
    (None without the figures)."""
    cb = (b.extra or {}).get("calibration") or {}
    ms = [float(c["ms"]) for c in ((a.extra or {}).get("calibration") or {} for a in bases)
          if c.get("ms") and c.get("workload") == cb.get("workload")]
    if not (cb.get("ms") and ms):
        return None
    ms.sort()
    return float(cb["ms"]) / ms[len(ms) // 2]


def calibration_factor(a: RunRecord, b: RunRecord) -> float | None:
    """How much slower the calibration workload ran around ``b`` than around ``a`` (None without it)."""
    ca, cb = (a.extra or {}).get("calibration") or {}, (b.extra or {}).get("calibration") or {}
    if not (ca.get("ms") and cb.get("ms")) or ca.get("workload") != cb.get("workload"):
        return None
    return float(cb["ms"]) / float(ca["ms"])


def reference_factor(a: RunRecord, b: RunRecord, refs: dict[int, RunRecord]) -> float | None:
    """How much slower each run's reference row (PyTorch fp32, same device, batch and scenario) ran in the
    current run than in the baseline run; None for the reference row itself or without one."""
    ra, rb = refs.get(id(a)), refs.get(id(b))
    if ra is None or rb is None or a.backend == ra.backend and a.precision == ra.precision:
        return None
    # a reference measured under load says nothing
    if max(disturbance(ra), disturbance(rb)) > DISTURBED_CORES:
        return None
    pa = ra.latency.p50_ms if ra.latency else None
    pb = rb.latency.p50_ms if rb.latency else None
    return pb / pa if pa and pb else None


def _ratio_ci(m: Metric, a: RunRecord, b: RunRecord, st: Stats) -> tuple[tuple[float, float] | None, str]:
    """Confidence interval of the raw ratio m(b) / m(a) from the raw samples; (None, "") without them."""
    if not (m.samples and a.samples_ns and b.samples_ns):
        return None, ""
    ba, bb = sample_blocks(a.samples_ns), sample_blocks(b.samples_ns)
    if ba is None or bb is None:
        return None, ""
    lo, hi, method = bootstrap_ratio_ci(ba, bb, m.samples, st.confidence, st.n_resamples, st.seed)
    if m.samples == "throughput":
        # throughput ~ batch / mean latency: invert the latency-ratio interval and anchor it to
        # the observed throughput ratio (which also carries the loop's own overhead).
        va, vb = m.get(a), m.get(b)
        if not (va and vb):
            return None, ""
        point = float(stat_fn("mean")(bb.reshape(-1)) / stat_fn("mean")(ba.reshape(-1)))
        lo, hi = (vb / va) * point / hi, (vb / va) * point / lo
    return (lo, hi), method


@dataclass(frozen=True)
class Pair:
    """The current row against one baseline row, for one rule."""

    va: float
    vb: float
    change: float  # calibrated where it could be (relative: ratio - 1; absolute: metric unit)
    raw_change: float  # without calibration
    ci: tuple[float, float] | None
    factor: float | None  # the calibration workload's time ratio, current / baseline
    method: str

    def badness(self, m: Metric) -> float:
        return self.change * m.worse


def compare(rule: Rule, a: RunRecord, b: RunRecord, st: Stats,
            values: tuple[float | None, float | None] | None = None) -> Pair | None:
    """The current row ``b`` against the baseline row ``a``; ``values``: the figures to compare instead
    of the rows' own (best timing: each at its fastest level; then no within-run interval)."""
    m = METRICS[rule.metric]
    va, vb = values if values is not None else (m.get(a), m.get(b))
    if va is None or vb is None or (rule.relative and va == 0):
        return None
    f = None
    if m.samples and st.timing == BEST:
        f = st.machine
    elif m.samples and st.timing == CALIBRATED:
        f = calibration_factor(a, b)
    elif m.samples and st.timing == REFERENCE:  # the reference row itself: as measured
        f = reference_factor(a, b, st.refs or {})
    adj = 1.0 if f is None else f ** -m.worse  # latency / f, throughput * f

    def conv(ratio: float) -> float:
        return ratio - 1.0 if rule.relative else va * ratio - va

    ratio = vb / va
    ci, method = _ratio_ci(m, a, b, st) if values is None else (None, "")
    ci2 = (conv(ci[0] * adj), conv(ci[1] * adj)) if ci is not None else None
    return Pair(va, vb, conv(ratio * adj), conv(ratio), ci2, f, method)


def _fmt_change(x: float, rule: Rule, m: Metric) -> str:
    return f"{x * 100:+.1f} %" if rule.relative else f"{x:+.4g} {m.unit}".rstrip()


def _quiet(rule: Rule, label: str, m: Metric, bases: list[RunRecord], curs: list[RunRecord]) -> \
        tuple[list[RunRecord], list[RunRecord], Check | None]:
    """The runs whose timings can be judged (measured while no other process took CPU time), or the
    'not judged' Check when one side has none."""
    quiet_b = [b for b in curs if disturbance(b) <= DISTURBED_CORES]
    if not quiet_b:
        d = max(disturbance(b) for b in curs)
        return bases, curs, _disturbed(rule, label, m, bases, curs, f"other processes took {d:.2f} cores "
                                       "while the current run measured this row")
    quiet = [a for a in bases if disturbance(a) <= DISTURBED_CORES]
    if not quiet:
        return bases, curs, _disturbed(rule, label, m, bases, curs, "other processes took more than "
                                       f"{DISTURBED_CORES} cores while every baseline run measured this row")
    return quiet, quiet_b, None


def _pairs(rule: Rule, m: Metric, bases: list[RunRecord], curs: list[RunRecord], st: Stats) -> list[Pair]:
    """The pairs (baseline run, current run) compared, most favourable first: in ``best`` timing one
    pair, each side at its fastest level over its runs."""
    if m.samples and st.timing == BEST:
        # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
        from infer_compare.regress.pooling import best

        a, b = best(bases, m), best(curs, m)
        p = compare(rule, a[0], b[0], st, (a[1], b[1])) if a is not None and b is not None else None
        return [p] if p is not None else []
    pairs = [p for p in (compare(rule, a, b, st) for a in bases for b in curs) if p is not None]
    return sorted(pairs, key=lambda p: p.badness(m))


def judge(rule: Rule, label: str, bases: list[RunRecord], curs: list[RunRecord],
          st: Stats) -> tuple[Check, str]:
    """The rule on row ``label`` between the baseline runs and the current run(s) that measured it."""
    m = METRICS[rule.metric]
    if m.samples:
        bases, curs, not_judged = _quiet(rule, label, m, bases, curs)
        if not_judged is not None:
            return not_judged, ""
        if st.timing == BEST:  # runs on a busy host say nothing of the code while a run on a quiet one does
            calm = [b for b in curs if (h := host_slowdown(b, bases)) is None or h < BUSY_HOST]
            curs = calm or curs
    pairs = _pairs(rule, m, bases, curs, st)
    if not pairs:
        va = next((v for v in (m.get(a) for a in bases) if v is not None), None)
        vb = m.get(curs[0])
        why = ("baseline is 0, no relative change" if va == 0 and vb is not None else "not measured in "
               + ("either run" if va is None and vb is None
                  else "the baseline" if va is None else "the current run"))
        return Check(rule, label, va, vb, None, None, NA, f"{m.title}: {why}"), ""
    judged, mid = pairs[0], pairs[len(pairs) // 2]
    t = rule.threshold
    if judged.badness(m) <= t:
        verdict = PASS
    elif judged.ci is None:
        verdict = REGRESSION
    else:
        verdict = REGRESSION if min(x * m.worse for x in judged.ci) > t else NOISE
    msg = _message(rule, m, pairs, judged, mid, st, (len(bases), len(curs))) + _between_runs(m, bases, st)
    slow = ([host_slowdown(b, bases) for b in curs]
            if verdict == REGRESSION and m.samples and st.timing == BEST else [])
    if slow and all(x is not None and x >= BUSY_HOST for x in slow):
        verdict = BUSY
        msg += ("; not judged: the host ran slow in every current run of this row (a fixed workload at "
                f"{min(slow):.2f}x its baseline time or more: other guests, or a change loading the CPU "
                "before the loop); --confirm measures it again")
    provisional = (verdict == PASS and st.timing == BEST and judged.factor is not None
                   and judged.raw_change * m.worse > t)
    if provisional:
        msg += "; within the rule only once normalized: --confirm measures it again"
    if verdict == NOISE:
        msg += ": beyond the threshold, but not by more than the measured spread"
    elif verdict == REGRESSION and judged.ci is None and m.samples and st.timing != BEST:
        msg += " (no raw samples: compared as points, no within-run allowance)"
    return Check(rule, label, mid.va, mid.vb, mid.change, judged.ci, verdict, msg, raw_change=mid.raw_change,
                 calibrated=judged.factor is not None, judged_change=judged.change, n_baselines=len(bases),
                 provisional=provisional), \
        judged.method


def _between_runs(m: Metric, bases: list[RunRecord], st: Stats) -> str:
    """What the cross-run gate can see on this row: how far the baseline's own runs lie apart (its figure per
    run), a change smaller than which it does not tell from the machine."""
    if not (m.samples and st.timing == BEST and len(bases) >= 2):
        return ""
    # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
    from infer_compare.regress.pooling import fast

    vals = [v for v in (fast(a, m) for a in bases) if v]
    if len(vals) < 2:
        return ""
    return (f"; the baseline's own runs differ by {(max(vals) / min(vals) - 1) * 100:.1f} %: a smaller "
            "change is not told from the machine across runs (the A/B gate sees less)")


def _disturbed(rule: Rule, label: str, m: Metric, bases: list[RunRecord], curs: list[RunRecord],
               why: str) -> Check:
    """Not judged; the figures shown are the same statistic as a judged row's (each side's median run at its
    fastest sustained level), so that a row reads the same whatever its verdict."""
    # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
    from infer_compare.regress.pooling import best

    a, b = best(bases, m) if bases else None, best(curs, m)
    return Check(rule, label, a[1] if a else None, b[1] if b else None, None, None, DISTURBED,
                 f"{m.title} not judged: {why} (a loaded machine, not the code: re-run when it is quiet)")


def _message(rule: Rule, m: Metric, pairs: list[Pair], judged: Pair, mid: Pair, st: Stats,
             counts: tuple[int, int]) -> str:
    n_base, n_cur = counts
    msg = (f"{m.title} {fmt_value(mid.va, m.value_unit)} -> {fmt_value(mid.vb, m.value_unit)} "
           f"({_fmt_change(mid.raw_change, rule, m)}")
    if judged.factor is not None:
        msg += f"; normalized {_fmt_change(mid.change, rule, m)}"
    msg += ")"
    if m.samples and st.timing == BEST:
        # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
        from infer_compare.regress.pooling import FAST_METRICS

        where = "fastest block" if rule.metric in FAST_METRICS else "figure"
        msg += (f"; median run's {where}, {n_base} baseline run{'s' if n_base != 1 else ''} against {n_cur} "
                f"current run{'s' if n_cur != 1 else ''}")
    elif len(pairs) > 1:
        msg += (f"; against the most favourable of {len(pairs)} pairs of runs "
                f"{_fmt_change(judged.change, rule, m)}")
    if judged.ci is not None:
        msg += (f", {st.confidence:.0%} CI [{_fmt_change(judged.ci[0], rule, m)}, "
                f"{_fmt_change(judged.ci[1], rule, m)}]")
    return msg + f"; rule {rule}"
