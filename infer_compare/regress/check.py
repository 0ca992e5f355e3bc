"""check_regression: match the rows of two reports and apply the rules to each pair."""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..errors import UsageError
from ..records import OK, PARITY_FAILED, SKIPPED, Report, RunRecord
from .environment import check_environment
from .metrics import METRICS, fmt_value
from .noise import bootstrap_ratio_ci, sample_blocks, stat_fn
from .results import NA, NOISE, PASS, REGRESSION, Check, RegressionResult, RowDiff
from .rules import Rule, parse_rules


def _as_report(x, what: str) -> Report:
    if isinstance(x, Report):
        return x
    if isinstance(x, (str, os.PathLike)):
        from ..records import load_report

        return load_report(x)
    raise UsageError(f"{what} must be a Report or the path of a results.json, got {type(x).__name__}")


def _incompleteness(rep: Report, what: str) -> str:
    """'' for a complete report, else what is missing, in a few words."""
    if rep.complete:
        return ""
    why = rep.incomplete_reason or "the run stopped early"
    n = len(rep.not_run)
    return f"{what} is incomplete ({why}; {n} cell{'s' if n != 1 else ''} did not run)"


def check_complete(current: Report | None, baseline: Report, allow: bool = False,
                   names: tuple[str, str] = ("", "")) -> list[str]:
    """Raise UsageError when either report is incomplete and ``allow`` is False; else notes about it.

    ``current`` None checks the baseline alone (before measuring). ``names`` are how to call the
    current and the baseline file in the message (their paths).
    """
    found = [x for x in (_incompleteness(baseline, f"the baseline{names[1] and ' ' + names[1]}"),
                         current and _incompleteness(current, f"the current run{names[0] and ' ' + names[0]}"))
             if x]
    if found and not allow:
        raise UsageError("; ".join(found) + ": rows that did not run would be missing from the comparison; "
                         "re-measure, or pass --allow-incomplete (allow_incomplete=True) to compare anyway")
    notes = [f"{x}: its missing rows are listed, not judged" for x in found]
    for rep, what in ((baseline, "baseline"), (current, "current run")):
        if rep is not None and rep.not_run:
            more = len(rep.not_run) - 20
            notes.append(f"did not run in the {what}: {', '.join(rep.not_run[:20])}"
                         + (f" and {more} more" if more > 0 else ""))
    return notes


def _interval(rule: Rule, a: RunRecord, b: RunRecord, confidence: float, n_resamples: int,
              seed: int) -> tuple[tuple[float, float] | None, str]:
    """(confidence interval of the change, method) from the raw samples; (None, "") without them."""
    m = METRICS[rule.metric]
    if not (m.samples and a.samples_ns and b.samples_ns):
        return None, ""
    ba, bb = sample_blocks(a.samples_ns), sample_blocks(b.samples_ns)
    if ba is None or bb is None:
        return None, ""
    lo, hi, method = bootstrap_ratio_ci(ba, bb, m.samples, confidence, n_resamples, seed)
    va, vb = m.get(a), m.get(b)
    if m.samples == "throughput":
        # throughput ~ batch / mean latency: invert the latency-ratio interval and anchor it to
        # the observed throughput ratio (which also carries the loop's own overhead).
        obs = vb / va
        point = float(stat_fn("mean")(bb.reshape(-1)) / stat_fn("mean")(ba.reshape(-1)))
        lo, hi = obs * point / hi, obs * point / lo
    return ((lo - 1.0, hi - 1.0) if rule.relative else (va * lo - va, va * hi - va)), method


def _apply(rule: Rule, label: str, a: RunRecord, b: RunRecord, confidence: float, n_resamples: int,
           seed: int) -> tuple[Check, str]:
    m = METRICS[rule.metric]
    va, vb = m.get(a), m.get(b)
    if va is None or vb is None:
        return Check(rule, label, va, vb, None, None, NA, f"{m.title}: not measured in "
                     + ("either run" if va is None and vb is None else "the baseline" if va is None
                        else "the current run")), ""
    if rule.relative and va == 0:
        return Check(rule, label, va, vb, None, None, NA, f"{m.title}: baseline is 0, no relative change"), ""
    change = vb / va - 1.0 if rule.relative else vb - va
    t = rule.threshold
    ci, method = _interval(rule, a, b, confidence, n_resamples, seed)
    beyond = change > t if m.worse > 0 else change < -t
    if not beyond:
        verdict = PASS
    elif ci is None:
        verdict = REGRESSION
    else:
        sure = ci[0] > t if m.worse > 0 else ci[1] < -t
        verdict = REGRESSION if sure else NOISE
    chg = f"{change * 100:+.1f} %" if rule.relative else f"{change:+.4g} {m.unit}".rstrip()
    ci_txt = ""
    if ci is not None:
        ci_txt = (f", {confidence:.0%} CI [{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}] %" if rule.relative
                  else f", {confidence:.0%} CI [{ci[0]:+.4g}, {ci[1]:+.4g}] {m.unit}".rstrip())
    msg = f"{m.title} {fmt_value(va, m.unit)} -> {fmt_value(vb, m.unit)} ({chg}{ci_txt}); rule {rule}"
    if verdict == NOISE:
        msg += ": beyond the threshold, but not by more than the measured spread"
    elif verdict == REGRESSION and ci is None and m.samples:
        msg += " (no raw samples: compared as points, no noise allowance)"
    return Check(rule, label, va, vb, change, ci, verdict, msg), method


def _run_notes(base: Report, cur: Report) -> list[str]:
    """Differences of weights and settings: not refused, but said."""
    notes: list[str] = []
    if base.model.weights_hash != cur.model.weights_hash:
        notes.append(f"model weights differ (hash {base.model.weights_hash} -> {cur.model.weights_hash})")
    sa, sb = base.settings, cur.settings
    for attr in ("threads", "warmup_iters", "min_iters", "min_time_s", "parity_samples", "seed"):
        if getattr(sa, attr) != getattr(sb, attr):
            notes.append(f"setting {attr}: {getattr(sa, attr)} -> {getattr(sb, attr)}")
    if sa.parity_samples != sb.parity_samples or sa.seed != sb.seed:
        notes.append("parity and accuracy were computed on different inputs: their changes are not comparable")
    return notes


def key_rows(rep: Report) -> dict[str, RunRecord]:
    """Rows by label; a skipped placeholder (batch None) never hides a measured row of the same label."""
    out: dict[str, RunRecord] = {}
    for r in rep.rows:
        prev = out.get(r.label)
        if prev is None or (prev.status == SKIPPED and r.status != SKIPPED):
            out[r.label] = r
    return out


def _diff_row(lab: str, a: RunRecord, b: RunRecord, rules: tuple[Rule, ...], methods: set[str],
              **stats) -> RowDiff:
    row_notes = []
    if a.threads != b.threads:
        row_notes.append(f"threads {a.threads} -> {b.threads}")
    if a.exec_precision != b.exec_precision:
        row_notes.append(f"executed precision {a.exec_precision or '?'} -> {b.exec_precision or '?'}")
    checks: list[Check] = []
    if a.status in (OK, PARITY_FAILED) and b.status in (OK, PARITY_FAILED):
        for rule in rules:
            c, method = _apply(rule, lab, a, b, **stats)
            checks.append(c)
            if method:
                methods.add(method)
    elif b.status == SKIPPED and a.status != SKIPPED:
        row_notes.append(f"now skipped: {b.reason}")
    return RowDiff(lab, a, b, tuple(checks), tuple(row_notes))


def check_regression(current: Report | str | os.PathLike, baseline: Report | str | os.PathLike,
                     rules: Iterable[str | Rule] | str | None = (), *, allow_environment_change: bool = False,
                     allow_incomplete: bool = False, confidence: float = 0.95, n_resamples: int = 1000,
                     seed: int = 0) -> RegressionResult:
    """Compare ``current`` with ``baseline`` row by row under ``rules`` (e.g. ``["p50:+10%"]``).

    Returns a RegressionResult (``.passed``, ``.violations``, ``.summary()``).
    Raises EnvironmentMismatch (a UsageError) when the baseline comes from another
    machine or library versions and ``allow_environment_change`` is False; UsageError
    when either report is incomplete (an interrupted run) and ``allow_incomplete`` is
    False, for bad rules, and for baselines of another model.
    """
    cur = _as_report(current, "current")
    base = _as_report(baseline, "baseline")
    rule_t = parse_rules(rules)
    if not 0.5 <= confidence < 1:
        raise UsageError(f"confidence must be in [0.5, 1), got {confidence}")
    if n_resamples < 100:
        raise UsageError(f"n_resamples must be >= 100, got {n_resamples}")
    if base.model.name != cur.model.name:
        raise UsageError(f"the baseline is of model {base.model.name!r} and the current run of "
                         f"{cur.model.name!r}: nothing to compare")
    names = tuple(f"({os.fspath(x)})" if isinstance(x, (str, os.PathLike)) else "" for x in (current, baseline))
    notes = check_complete(cur, base, allow_incomplete, names)
    env_diffs = check_environment(base.environment, cur.environment, allow_environment_change)
    notes += _run_notes(base, cur)
    ra, rb = key_rows(base), key_rows(cur)
    diffs: list[RowDiff] = []
    methods: set[str] = set()
    for lab in list(ra) + [k for k in rb if k not in ra]:
        a, b = ra.get(lab), rb.get(lab)
        if a is None or b is None:
            diffs.append(RowDiff(lab, a, b))
        else:
            diffs.append(_diff_row(lab, a, b, rule_t, methods, confidence=confidence, n_resamples=n_resamples,
                                   seed=seed))
    if rule_t and not any(c.verdict != NA for d in diffs for c in d.checks):
        notes.append("no rule could be applied: no measured row appears in both runs")
    return RegressionResult(rule_t, tuple(diffs), tuple(env_diffs), tuple(notes), confidence,
                            "; ".join(sorted(methods)), base.created, cur.created)
