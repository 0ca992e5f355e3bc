"""What the gate found: one Check per rule and row, one RowDiff per row label, the RegressionResult."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..records import EXPORT_FAILED, OK, PARITY_FAILED, RUN_FAILED, RunRecord
from .metrics import METRICS
from .rules import Rule

PASS = "pass"
REGRESSION = "regression"
NOISE = "within noise"
NA = "n/a"


@dataclass(frozen=True)
class Check:
    """One rule applied to one row."""

    rule: Rule
    label: str
    baseline: float | None
    current: float | None
    change: float | None  # relative: current/baseline - 1; absolute: current - baseline (metric unit)
    ci: tuple[float, float] | None  # confidence interval of ``change``; None when compared as points
    verdict: str  # pass / regression / within noise / n/a
    message: str = ""

    @property
    def broken(self) -> bool:
        return self.verdict == REGRESSION


@dataclass(frozen=True)
class RowDiff:
    label: str
    baseline: RunRecord | None
    current: RunRecord | None
    checks: tuple[Check, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def status_change(self) -> str:
        a = self.baseline.status if self.baseline is not None else "absent"
        b = self.current.status if self.current is not None else "absent"
        return a if a == b else f"{a} -> {b}"

    @property
    def status_regressed(self) -> bool:
        return (self.baseline is not None and self.current is not None and self.baseline.status == OK
                and self.current.status in (RUN_FAILED, EXPORT_FAILED, PARITY_FAILED))

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

    @property
    def violations(self) -> tuple[str, ...]:
        out = []
        for d in self.rows:
            if d.status_regressed:
                cur = d.current
                out.append(f"{d.label}: was ok, now {cur.status if cur else '?'}"
                           + (f" ({cur.reason})" if cur is not None and cur.reason else ""))
            for c in d.checks:
                if c.broken:
                    out.append(f"{d.label}: {c.message}")
        return tuple(out)

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
        return tuple(d for d in self.rows if d.baseline is not None and d.current is not None)

    @property
    def only_in_baseline(self) -> tuple[str, ...]:
        return tuple(d.label for d in self.rows if d.current is None)

    @property
    def only_in_current(self) -> tuple[str, ...]:
        return tuple(d.label for d in self.rows if d.baseline is None)

    def summary(self) -> str:
        """Plain text: verdict, violations, changes within noise, notes. Good for assertion messages."""
        lines = [("PASSED" if self.passed else "FAILED") + f": {len(self.matched)} rows compared, "
                 f"{len(self.rules)} rule(s): {', '.join(map(str, self.rules)) or 'none'}"]
        lines += [f"  REGRESSION {v}" for v in self.violations]
        for c in self.checks:
            if c.verdict == NOISE:
                lines.append(f"  within noise {c.label}: {c.message}")
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
            "violations": list(self.violations),
            "confidence": self.confidence,
            "method": self.method,
            "environment_differences": list(self.environment_differences),
            "notes": list(self.notes),
            "only_in_baseline": list(self.only_in_baseline),
            "only_in_current": list(self.only_in_current),
            "rows": [
                {"label": d.label, "status": d.status_change,
                 "values": {m: dict(zip(("baseline", "current"), d.value(m), strict=True))
                            for m in ("p50", "p99", "throughput", "cosine", "accuracy")},
                 "checks": [{"rule": str(c.rule), "baseline": c.baseline, "current": c.current, "change": c.change,
                             "ci": list(c.ci) if c.ci else None, "verdict": c.verdict, "message": c.message}
                            for c in d.checks],
                 "notes": list(d.notes)}
                for d in self.rows
            ],
        }

