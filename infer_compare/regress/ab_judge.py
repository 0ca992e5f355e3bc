"""The A/B gate's verdict per row: timing rules on the paired block ratios (paired.py), every other rule
(accuracy, parity, size...) and the row statuses as the cross-run gate judges them (check.py), A as the
baseline and B as the current run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from infer_compare.base.records import Report, RunRecord
from infer_compare.regress.check import NO_RULE_APPLIED, check_regression
from infer_compare.regress.family import FAMILY_ALPHA, family_size, family_text, judge_family, p_text
from infer_compare.regress.judge import DISTURBED_CORES
from infer_compare.regress.metrics import METRICS
from infer_compare.regress.paired import (
    CONFIDENCE,
    MIN_PAIRS,
    ONE_SIDED,
    PAIRED_METRICS,
    Paired,
    crossover,
    log_ratios,
    pairs_to_tell,
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
          "20 %-trimmed means within each order, averaged, Tukey-McLaughlin standard error). A check "
          "passes when its one-sided 95 % upper bound is within its rule, is a regression when its "
          "estimate is beyond the rule and Holm's step-down over the gate's timing checks rejects no change "
          "(one-sided, from Student's t), and is not judged otherwise (cannot tell)")


def _pct(x: float) -> str:
    return f"{x * 100:+.1f} %"


def _threshold(rule: Rule, a_value: float | None) -> float | None:
    """The rule's threshold as a relative change (a rule in the metric's unit: over A's figure)."""
    if rule.relative:
        return rule.threshold
    return rule.threshold / a_value if a_value else None


def paired_check(rule: Rule, label: str, a: RunRecord, b: RunRecord) -> Check:
    """One timing rule on one row from the two sides' paired blocks."""
    from infer_compare.regress import tails  # tails, max, load time: judged per process pair, not per block

    if rule.metric in tails.PER_PROCESS_PAIR:
        return tails.tail_check(rule, label, a, b, verdict=_verdict, busy=_disturbed, marked=as_disturbed)
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
    ratios = log_ratios(rule.metric, list(a.samples_ns), list(b.samples_ns), calls)
    if len(ratios) < MIN_PAIRS:
        return Check(rule, label, va, vb, None, None, DISTURBED if busy else FEW_PAIRS,
                     f"{m.title} not judged: {busy}" if busy else
                     f"{m.title}: {len(ratios)} pairs of blocks, at least {MIN_PAIRS} needed (--pairs)")
    reps = (int(ab_a.get("replicates") or 1), int(ab_b.get("replicates") or 1))
    p, why = _statistic(ratios, str(ab_b.get("first") or ""), reps, str(ab_b.get("loaded_first") or ""))
    if p is None:
        return Check(rule, label, va, vb, None, None, DISTURBED if busy else FEW_PAIRS,
                     f"{m.title} not judged: {busy}" if busy else f"{m.title}: {why}")
    c = _verdict(rule, label, m, p, (va, vb), len(ratios), calls)
    most = int(ab_b.get("replicates_most") or 0)
    if c.verdict == TOO_NOISY and most < int(ab_b.get("replicates_max") or 0):
        said = (f"; the gate's --budget left this configuration time for {most} process "
                "pairs")
        c = replace(c, message=c.message + said, grounds=c.grounds + said)
    return as_disturbed(c, busy) if busy else c


def as_disturbed(c: Check, busy: str) -> Check:
    """``c`` not judged, as the load said (``busy``: why), its estimate and interval still shown: what the
    blocks measured, for the reader to weigh, never a verdict."""
    if c.verdict == NA:
        return c
    m = METRICS[c.rule.metric]
    return replace(c, verdict=DISTURBED, grounds="",
                   message=f"{m.title} not judged: {busy}; as measured (not a verdict): "
                           f"{c.message[:len(c.message) - len(c.grounds)].rstrip(': ')}")


def _statistic(ratios: list[float], first: str, reps: tuple[int, int],
               loaded_first: str = "") -> tuple[Paired | None, str]:
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
    return replicated(ratios, n, first if len(first) == len(ratios) else "",
                      loaded_first if len(loaded_first) == n else ""), ""


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
    """The check of ``rule`` from the change ``p``: a pass when its one-sided 95 % upper bound is within the
    rule, a regression when its estimate is beyond the rule and its one-sided 95 % lower bound above no
    change (taken again over the gate's family by ``judge_family``), else cannot tell (not judged)."""
    va, vb = values
    t = _threshold(rule, va)
    change = p.ratio() - 1  # worse direction positive
    lo, hi = (x - 1 for x in p.interval(CONFIDENCE))  # its ends: the one-sided 95 % bounds
    shown = change * m.worse  # as the metric moves (throughput: down is worse)
    ci = (lo * m.worse, hi * m.worse) if m.worse > 0 else (hi * m.worse, lo * m.worse)
    if t is None:
        return Check(rule, label, va, vb, shown, ci, NA, f"{m.title}: A's figure is 0, no relative threshold")
    over = f"{n} pairs of {calls}-call blocks" + (f" in {p.groups} process pairs" if p.groups > 1 else "")
    measured = (f"{m.title} B/A {_pct(shown)} over {over}, {CONFIDENCE:.0%} CI "
                f"[{_pct(ci[0])}, {_pct(ci[1])}]; rule {rule}")
    if p.groups <= 1:
        measured += (" (one process pair: its interval does not cover a lasting difference between two "
                     "processes)")
    pv = p.p_value()
    if hi <= t:
        verdict, grounds = PASS, (f"within the rule: its one-sided 95 % bound rules out a change worse than "
                                  f"{_pct(hi * m.worse)}")
    elif change > t and pv < 1 - ONE_SIDED:
        verdict, grounds = REGRESSION, (f"beyond the rule, and its one-sided 95 % bound {_pct(lo * m.worse)} "
                                        f"rules out no change ({p_text(pv)})")
    else:
        verdict, grounds = TOO_NOISY, _cannot_tell(p, t, m, pv)
    return Check(rule, label, va, vb, shown, ci, verdict, f"{measured}: {grounds}", raw_change=shown,
                 judged_change=shown, p_value=pv, grounds=grounds)


def _cannot_tell(p: Paired, t: float, m: Any, pv: float) -> str:
    """Why a check is neither a pass nor a regression, what it can see, and what would tell."""
    lo, hi = (x - 1 for x in p.interval(CONFIDENCE))
    if p.ratio() - 1 <= t:
        why = (f"within the rule by its estimate, but its one-sided 95 % bound {_pct(hi * m.worse)} is "
               "beyond it")
    else:
        why = (f"beyond the rule by its estimate, but its one-sided 95 % bound {_pct(lo * m.worse)} reaches "
               f"no change ({p_text(pv)})")
    k = pairs_to_tell(p, t)
    unit, flag = ("process pairs", "--replicates") if p.groups > 1 else ("pairs of blocks", "--pairs")
    have = p.groups if p.groups > 1 else p.n
    if k is None:
        more = (f"no number of {unit} within reach would let an unchanged row of this noise pass: its noise "
                "is beyond what this rule can tell")
    elif k <= have:
        more = (f"an unchanged row of this noise would pass in {have} {unit} (95 %): its estimate, not its "
                "noise, keeps it from a pass")
    else:
        more = f"an unchanged row of this noise would pass (95 %) in {k} {unit} ({flag} {k})"
    return (f"cannot tell: {why}; sees a change of {_pct(p.mdc(t) * m.worse)} or more (95 % power); not "
            f"judged: {more}")


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
    rows = judge_family(tuple(_with_paired(d, timed) for d in base.rows), FAMILY_ALPHA)
    family = family_text(family_size([c for d in rows for c in d.checks]))
    family = f"; {family}" if family else ""
    # the cross-run checks saw only the rules without samples (accuracy): whether any rule applied is decided
    # with the paired timing checks in
    applied = any(c.verdict != NA for d in rows for c in d.checks)
    notes = tuple(n for n in base.notes if not n.startswith("one baseline run")
                  and not (applied and n.startswith(NO_RULE_APPLIED)))
    return replace(base, rules=all_rules, rows=rows, timing="paired (A/B)", confidence=CONFIDENCE,
                   method=METHOD + family + _malloc(b), notes=notes, default_rules=rules is AB_RULES)
