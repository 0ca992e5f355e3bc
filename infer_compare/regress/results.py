"""What the gate found: one Check per rule and row, one RowDiff per row label, the RegressionResult."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any

from infer_compare.base.records import EXPORT_FAILED, OK, PARITY_FAILED, RUN_FAILED, SKIPPED, RunRecord
from infer_compare.regress.metrics import METRICS
from infer_compare.regress.rules import Rule

PASS = "pass"
REGRESSION = "regression"
NOISE = "within noise"
NA = "n/a"
DISTURBED = "disturbed"  # timings not judged: other processes took CPU time while the row was measured
# timings not judged: slower beyond the rule, but only in runs where the host itself ran slow (the calibration
# workload BUSY_HOST times its baseline time or more): measured again by --confirm, like a broken timing
BUSY = "host busy"
# A/B timings not judged: the measurement cannot tell (its one-sided 95 % upper bound reaches beyond the rule,
# so no pass, and no regression shown at the gate's family level), or too few pairs of blocks measured
TOO_NOISY = "too noisy"
FEW_PAIRS = "too few pairs"
NOT_JUDGED = (DISTURBED, BUSY, TOO_NOISY, FEW_PAIRS)


@dataclass(frozen=True)
class Check:
    """One rule applied to one row."""

    rule: Rule
    label: str
    baseline: float | None
    current: float | None
    change: float | None  # relative: current/baseline - 1; absolute: current - baseline (metric unit)
    ci: tuple[float, float] | None  # confidence interval of ``change``; None when compared as points
    verdict: str  # pass / regression / within noise / disturbed / host busy / n/a
    message: str = ""
    raw_change: float | None = None  # ``change`` without calibration (the absolute change of the timing)
    calibrated: bool = False  # ``change`` is a ratio to the calibration workload
    judged_change: float | None = None  # against the most favourable baseline run (what the verdict used)
    n_baselines: int = 1
    # within the rule only once divided by the whole machine's change (beyond it as measured): a slower
    # runner on a machine that ran slow too reads the same, so --confirm measures it again
    provisional: bool = False
    # A/B timing checks: the one-sided p-value of no change against B worse, the checks of the gate's family
    # (regress/family.py: Holm's step-down over them; 0 when this check is in none) and the level Holm
    # compared this one's p-value with
    p_value: float | None = None
    family: int = 0
    family_level: float | None = None
    # the end of ``message`` that gives the verdict's grounds (the family step rewrites it)
    grounds: str = ""

    @property
    def broken(self) -> bool:
        return self.verdict == REGRESSION


MEASURED = (OK, PARITY_FAILED)


@dataclass(frozen=True)
class RowDiff:
    label: str
    baseline: RunRecord | None  # the row in the first baseline run that has it
    current: RunRecord | None
    checks: tuple[Check, ...] = ()
    notes: tuple[str, ...] = ()
    baselines: tuple[RunRecord, ...] = ()  # the row in every baseline run that has it
    # the row in every current run that has it (the first is ``current``)
    currents: tuple[RunRecord, ...] = ()

    @property
    def _bases(self) -> tuple[RunRecord, ...]:
        return self.baselines or ((self.baseline,) if self.baseline is not None else ())

    @property
    def expected(self) -> bool:
        """Measured ok in every baseline run that has the row."""
        return bool(self._bases) and all(a.status == OK for a in self._bases)

    @property
    def measured_in_both(self) -> bool:
        return (self.current is not None and self.current.status in MEASURED
                and any(a.status in MEASURED for a in self._bases))

    @property
    def measured_in_either(self) -> bool:
        return self.measured_in_both or (self.current is not None and self.current.status in MEASURED) or any(
            a.status in MEASURED for a in self._bases)

    @property
    def status_change(self) -> str:
        a = self.baseline.status if self.baseline is not None else "absent"
        b = self.current.status if self.current is not None else "absent"
        return a if a == b else f"{a} -> {b}"

    @property
    def status_regressed(self) -> bool:
        """Ok in the baseline, failing now (always a violation)."""
        return (self.expected and self.current is not None
                and self.current.status in (RUN_FAILED, EXPORT_FAILED, PARITY_FAILED))

    @property
    def vanished(self) -> bool:
        """Ok in the baseline, absent or skipped now (a violation unless allow_missing)."""
        return self.expected and (self.current is None or self.current.status == SKIPPED)

    @property
    def precision_changed(self) -> str:
        """'' or what changed: the current row executed a precision no baseline run executed."""
        b = self.current
        if b is None or b.status not in MEASURED or not self.expected:
            return ""
        seen = {a.exec_precision for a in self._bases}
        if b.exec_precision in seen:
            return ""
        return f"executed precision {' / '.join(sorted(x or '?' for x in seen))} -> {b.exec_precision or '?'}"

    @property
    def conditions_changed(self) -> str:
        """'' or what changed: the current row ran under other threads or runner options than every
        baseline run (pooling.CONDITION_KEYS)."""
        # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
        from infer_compare.regress.pooling import conditions_changed

        b = self.current
        if b is None or b.status not in MEASURED or not self.expected:
            return ""
        return conditions_changed(self._bases, b)

    def value(self, metric: str) -> tuple[float | None, float | None]:
        g = METRICS[metric].get
        return (g(self.baseline) if self.baseline is not None else None,
                g(self.current) if self.current is not None else None)


@dataclass(frozen=True)
class RegressionResult:
    """What check_regression found. ``passed`` is False when a rule is broken or an ok row now fails."""

    rules: tuple[Rule, ...]
    rows: tuple[RowDiff, ...]
    environment_differences: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    confidence: float = 0.95
    method: str = ""
    baseline_created: str = ""
    current_created: str = ""
    n_baselines: int = 1
    timing: str = "best"
    default_rules: bool = False  # no rule was given: the documented defaults were applied
    # True: every row ok in the baseline and missing or skipped now is accepted; a tuple: the rows whose
    # label matches one of its patterns (fnmatch), missing, skipped, or failed to build or load now
    allow_missing: bool | tuple[str, ...] = False
    allow_condition_change: bool = False
    n_currents: int = 1

    def missing_accepted(self, d: RowDiff) -> bool:
        """The row is ok in the baseline, gone or not built or loaded now, and the user accepted that."""
        if d.vanished:
            allowed = self.allow_missing
            return allowed is True or (bool(allowed) and _named(d.label, allowed))
        return (d.status_regressed and not isinstance(self.allow_missing, bool) and d.current is not None
                and d.current.status in (EXPORT_FAILED, RUN_FAILED) and _named(d.label, self.allow_missing))

    @property
    def accepted_missing(self) -> tuple[str, ...]:
        """One line per row ok in the baseline that is missing, skipped or failed now, accepted by name."""
        return tuple(f"{d.label}: {_gone(d.current)}" for d in self.rows if self.missing_accepted(d))

    @property
    def violations(self) -> tuple[str, ...]:
        out = []
        for d in self.rows:
            cur = d.current
            if self.missing_accepted(d):
                pass
            elif d.status_regressed and cur is not None:
                out.append(f"{d.label}: was ok, now {cur.status}" + (f" ({cur.reason})" if cur.reason else "")
                           + (f" (--allow-missing {d.label} accepts it)"
                              if cur.status in (EXPORT_FAILED, RUN_FAILED) else ""))
            elif d.vanished:
                out.append(f"{d.label}: was ok, now {_gone(cur)} (--allow-missing {d.label} accepts it)")
            if d.precision_changed:
                out.append(f"{d.label}: {d.precision_changed}")
            if d.conditions_changed and not self.allow_condition_change:
                out.append(f"{d.label}: measured under other conditions: {d.conditions_changed} "
                           "(--allow-condition-change accepts it)")
            for c in d.checks:
                if c.broken:
                    out.append(f"{d.label}: {c.message}")
        return tuple(out)

    @property
    def timing_only(self) -> bool:
        """Broken, and only by latency or throughput rules (what another run may not confirm)."""
        timed = [c for c in self.checks if c.broken and METRICS[c.rule.metric].samples]
        return bool(timed) and len(timed) == len(self.violations)

    @property
    def checks(self) -> tuple[Check, ...]:
        return tuple(c for d in self.rows for c in d.checks)

    @property
    def passed(self) -> bool:
        return not self.violations

    def __bool__(self) -> bool:
        return self.passed

    @property
    def matched(self) -> tuple[RowDiff, ...]:
        """The rows measured (ok or parity_failed) in the current run and in a baseline run."""
        return tuple(d for d in self.rows if d.measured_in_both)

    @property
    def disturbed(self) -> tuple[str, ...]:
        """Rows whose timings were not judged (measured while other processes took CPU time, or on a busy
        host)."""
        return tuple(dict.fromkeys(c.label for c in self.checks if c.verdict in (DISTURBED, BUSY)))

    @property
    def provisional(self) -> tuple[str, ...]:
        """Rows within the timing rules only once normalized by the machine's change (--confirm measures them
        again)."""
        return tuple(dict.fromkeys(c.label for c in self.checks if c.provisional))

    @property
    def unjudged(self) -> tuple[str, ...]:
        """One line per row (and rule) the gate could not judge and so did not pass: timings disturbed, on a
        busy host, too noisy or too few pairs; within the rules only once normalized; a baseline row that
        did not run while the current one did."""
        out = [f"{c.label}: {c.rule.metric} {c.verdict}: {c.message}" for c in self.checks
               if c.verdict in NOT_JUDGED]
        out += [f"{c.label}: {c.rule.metric} passed only once normalized by the machine's change: {c.message}"
                for c in self.checks if c.provisional]
        out += [f"{d.label}: the baseline did not run it ({d.baseline.status}: {d.baseline.reason}), the "
                "current run did: nothing to judge it against" for d in self.rows
                if d.baseline is not None and d.baseline.status not in (*MEASURED, SKIPPED)
                and d.current is not None and d.current.status in MEASURED]
        return tuple(out)

    @property
    def busy(self) -> tuple[str, ...]:
        """Rows slower beyond a timing rule in runs on a busy host only (what --confirm measures again)."""
        return tuple(dict.fromkeys(c.label for c in self.checks if c.verdict == BUSY))

    @property
    def rules_text(self) -> str:
        return (", ".join(map(str, self.rules)) or "none") + (" (the defaults)" if self.default_rules else "")

    @property
    def only_in_baseline(self) -> tuple[str, ...]:
        return tuple(d.label for d in self.rows if d.current is None)

    @property
    def only_in_current(self) -> tuple[str, ...]:
        return tuple(d.label for d in self.rows if d.baseline is None)

    def summary(self) -> str:
        """Plain text: verdict, violations, changes within noise, notes. Good for assertion messages."""
        lines = [("PASSED" if self.passed else "FAILED") + f": {len(self.matched)} rows compared, "
                 f"{self.n_baselines} baseline run(s), {self.n_currents} current run(s), timings "
                 f"{self.timing}, rules: {self.rules_text}"]
        lines += [f"  REGRESSION {v}" for v in self.violations]
        lines += [f"  accepted missing (--allow-missing) {v}" for v in self.accepted_missing]
        for c in self.checks:
            if c.verdict in (NOISE, *NOT_JUDGED):
                lines.append(f"  {c.verdict} {c.label}: {c.message}")
        if self.only_in_baseline:
            lines.append(f"  only in the baseline: {', '.join(self.only_in_baseline)}")
        if self.only_in_current:
            lines.append(f"  only in the current run: {', '.join(self.only_in_current)}")
        if self.environment_differences:
            lines.append(f"  environment changed (allowed): {'; '.join(self.environment_differences)}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "rules": [str(r) for r in self.rules],
            "default_rules": self.default_rules,
            "n_baselines": self.n_baselines,
            "n_currents": self.n_currents,
            "timing": self.timing,
            "rows_compared": len(self.matched),
            "timings_not_judged": list(self.disturbed),
            "unjudged": list(self.unjudged),
            "host_busy": list(self.busy),
            "passed_once_normalized": list(self.provisional),
            "violations": list(self.violations),
            "timing_only": self.timing_only,
            "confidence": self.confidence,
            "method": self.method,
            "environment_differences": list(self.environment_differences),
            "notes": list(self.notes),
            "only_in_baseline": list(self.only_in_baseline),
            "only_in_current": list(self.only_in_current),
            "accepted_missing": list(self.accepted_missing),
            "rows": [
                {"label": d.label, "status": d.status_change,
                 "values": {m: dict(zip(("baseline", "current"), d.value(m), strict=True))
                            for m in ("p50", "p99", "throughput", "cosine", "accuracy")},
                 "checks": [{"rule": str(c.rule), "baseline": c.baseline, "current": c.current,
                             "change": c.change, "raw_change": c.raw_change, "calibrated": c.calibrated,
                             "judged_change": c.judged_change, "n_baselines": c.n_baselines,
                             "ci": list(c.ci) if c.ci else None, "verdict": c.verdict, "message": c.message,
                             "p_value": c.p_value, "family": c.family, "family_level": c.family_level}
                            for c in d.checks],
                 "notes": list(d.notes)}
                for d in self.rows
            ],
        }


def _named(label: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(label, p) for p in patterns)


def _gone(cur: RunRecord | None) -> str:
    if cur is None:
        return "missing from the current run"
    return f"{cur.status}" + (f" ({cur.reason})" if cur.reason else "")
