"""The A/B gate's verdict per row: timing rules on the paired block ratios (paired.py), every other rule
(accuracy, parity, size...) and the row statuses as the cross-run gate judges them (check.py), A as the
baseline and B as the current run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from infer_compare.base.records import Report, RunRecord
from infer_compare.regress.check import NO_RULE_APPLIED, check_regression
from infer_compare.regress.judge import DISTURBED_CORES
from infer_compare.regress.metrics import METRICS
from infer_compare.regress.paired import (
    CONFIDENCE,
    MIN_PAIRS,
    PAIRED_METRICS,
    Paired,
    crossover,
    log_ratios,
    replicated,
    trimmed,
)
from infer_compare.regress.results import (
    DISTURBED,
    FEW_PAIRS,
    NA,
    PASS,
    REGRESSION,
    TOO_NOISY,
    Check,
    RegressionResult,
    RowDiff,
)
from infer_compare.regress.rules import Rule, parse_rules

# the A/B gate's default rules: both sides measured in one run, so a tighter threshold than across runs. The
# median per block (p50) is what is judged by default: a block's mean (mean, throughput) carries every burst
# of another process that falls into it, and is judged only when asked for.
AB_RULES = ("p50:+5%", "accuracy:-0.5")
METHOD = ("paired blocks, A and B alternating, half of each process pair's pairs with A first: per process "
          "pair, the median of the log ratios of adjacent blocks; their 20 %-trimmed mean over the process "
          "pairs, Tukey-McLaughlin standard error from their spread, Student's t (one process pair: "
          "20 %-trimmed means within each order, averaged, Tukey-McLaughlin standard error)")


def _pct(x: float) -> str:
    return f"{x * 100:+.1f} %"


def _threshold(rule: Rule, a_value: float | None) -> float | None:
    """The rule's threshold as a relative change (a rule in the metric's unit: over A's figure)."""
    if rule.relative:
        return rule.threshold
    return rule.threshold / a_value if a_value else None


def paired_check(rule: Rule, label: str, a: RunRecord, b: RunRecord) -> Check:
    """One timing rule on one row from the two sides' paired blocks."""
    m = METRICS[rule.metric]
    va, vb = m.get(a), m.get(b)
    ab_a, ab_b = (a.extra or {}).get("ab") or {}, (b.extra or {}).get("ab") or {}
    calls = int(ab_b.get("calls_per_block") or 0)
    if rule.metric not in PAIRED_METRICS:
        return Check(rule, label, va, vb, None, None, NA, f"{m.title}: the A/B gate judges "
                     f"{', '.join(PAIRED_METRICS)} on paired blocks; {rule.metric} is reported, not judged")
    if not calls or ab_a.get("calls_per_block") != calls or not (a.samples_ns and b.samples_ns):
        return Check(rule, label, va, vb, None, None, FEW_PAIRS, f"{m.title}: the two sides were not "
                     "measured in paired blocks (no A/B samples in one of them)")
    busy = _disturbed(ab_b.get("load") or {})
    if busy:
        return Check(rule, label, va, vb, None, None, DISTURBED, f"{m.title} not judged: {busy}")
    ratios = log_ratios(rule.metric, list(a.samples_ns), list(b.samples_ns), calls)
    if len(ratios) < MIN_PAIRS:
        return Check(rule, label, va, vb, None, None, FEW_PAIRS,
                     f"{m.title}: {len(ratios)} pairs of blocks, at least {MIN_PAIRS} needed (--pairs)")
    reps = (int(ab_a.get("replicates") or 1), int(ab_b.get("replicates") or 1))
    p, why = _statistic(ratios, str(ab_b.get("first") or ""), reps)
    if p is None:
        return Check(rule, label, va, vb, None, None, FEW_PAIRS, f"{m.title}: {why}")
    return _verdict(rule, label, m, p, (va, vb), len(ratios), calls)


def _statistic(ratios: list[float], first: str, reps: tuple[int, int]) -> tuple[Paired | None, str]:
    """The paired change over the process pairs (regress/paired.py), or None and why it cannot be taken."""
    if reps[0] != reps[1]:
        return None, (f"the two sides' rows come from different A/B runs ({reps[0]} and {reps[1]} process "
                      "pairs)")
    n = reps[1]
    if n <= 1:
        a_first = [c == "a" for c in first]
        return (crossover(ratios, a_first) if len(first) == len(ratios) else trimmed(ratios)), ""
    if len(ratios) % n or len(ratios) // n < 2:
        return None, (f"{len(ratios)} pairs of blocks cannot be split into {n} process pairs of at least 2 "
                      "(a row cut short)")
    return replicated(ratios, n), ""


def _disturbed(load: dict) -> str:
    """Why the blocks say nothing of the code ('' when they do): other processes or guests took CPU time
    while they ran, or the waiting side kept CPUs busy while the other side was timed."""
    others = float(load.get("other_cores") or 0) + float(load.get("steal_cores") or 0)
    if others > DISTURBED_CORES:
        return (f"other processes took {others:.2f} cores while the pairs were timed (a loaded machine, not "
                "the code: re-run when it is quiet)")
    waiting = float(load.get("waiting_side_cores") or 0)
    if waiting > DISTURBED_CORES:
        return (f"the waiting side kept {waiting:.2f} cores busy while the other side was timed (its "
                "runtime's threads spin after a call), so the two sides disturbed each other: fewer "
                "--threads, or make the runtime's threads sleep when idle (e.g. OMP_WAIT_POLICY=PASSIVE)")
    return ""


def _verdict(rule: Rule, label: str, m: Any, p: Paired, values: tuple, n: int, calls: int) -> Check:
    va, vb = values
    t = _threshold(rule, va)
    change = p.ratio() - 1  # worse direction positive
    lo, hi = (x - 1 for x in p.interval(CONFIDENCE))
    shown = change * m.worse  # as the metric moves (throughput: down is worse)
    ci = (lo * m.worse, hi * m.worse) if m.worse > 0 else (hi * m.worse, lo * m.worse)
    if t is None:
        return Check(rule, label, va, vb, shown, ci, NA, f"{m.title}: A's figure is 0, no relative threshold")
    mdc = p.mdc(t)
    if change <= t:
        verdict = PASS
    elif p.lower() > 1:
        verdict = REGRESSION
    else:
        verdict = TOO_NOISY
    over = f"{n} pairs of {calls}-call blocks" + (f" in {p.groups} process pairs" if p.groups > 1 else "")
    from_to = (f"{m.title} B/A {_pct(shown)} over {over}, {CONFIDENCE:.0%} CI "
               f"[{_pct(ci[0])}, {_pct(ci[1])}]; sees a change of {_pct(mdc * m.worse)} or more "
               f"(95 % power); rule {rule}")
    if p.groups <= 1:
        from_to += (" (one process pair: its interval does not cover a lasting difference between two "
                    "processes)")
    if verdict == TOO_NOISY:
        more = "--replicates" if p.groups > 1 else "--pairs"
        from_to += (": beyond the rule, but its one-sided 95 % bound reaches no change: not judged (measure "
                    f"with more {more})")
    return Check(rule, label, va, vb, shown, ci, verdict, from_to, raw_change=shown, judged_change=shown)


def _malloc(b: Report) -> str:
    """The malloc settings the rows' processes ran with (measure/ab.py), said once in the method."""
    got = sorted({str(((r.extra or {}).get("ab") or {}).get("malloc") or "") for r in b.rows} - {""})
    return f"; malloc in both sides' processes: {'; '.join(got)}" if got else ""


def _with_paired(d: RowDiff, rules: tuple[Rule, ...]) -> RowDiff:
    a, b = d.baseline, d.current
    if not d.measured_in_both or a is None or b is None:
        return d
    checks = tuple(paired_check(r, d.label, a, b) for r in rules)
    return replace(d, checks=tuple(d.checks) + checks)


def judge_ab(a: Report, b: Report, rules: Any, *, allow_missing: bool = False,
             allow_condition_change: bool = False) -> RegressionResult:
    """B (the candidate) against A (the baseline), both from one A/B run."""
    all_rules = parse_rules(rules)
    timed = tuple(r for r in all_rules if METRICS[r.metric].samples)
    other = tuple(r for r in all_rules if not METRICS[r.metric].samples)
    base = check_regression(b, a, other, allow_environment_change=True, allow_incomplete=True,
                            allow_missing=allow_missing, allow_condition_change=allow_condition_change,
                            timing="absolute")
    rows = tuple(_with_paired(d, timed) for d in base.rows)
    # the cross-run checks saw only the rules without samples (accuracy): whether any rule applied is decided
    # with the paired timing checks in
    applied = any(c.verdict != NA for d in rows for c in d.checks)
    notes = tuple(n for n in base.notes if not n.startswith("one baseline run")
                  and not (applied and n.startswith(NO_RULE_APPLIED)))
    return replace(base, rules=all_rules, rows=rows, timing="paired (A/B)", method=METHOD + _malloc(b),
                   notes=notes, default_rules=rules is AB_RULES)
