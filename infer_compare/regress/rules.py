"""``--fail-on`` rules: ``METRIC:[+|-]NUMBER[%]``, parsed and validated."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from infer_compare.base.errors import UsageError
from infer_compare.regress.metrics import _ALIASES, METRICS

# Applied when no rule is given (the gate's documented defaults; docs/gate.md says how
# they were chosen): each row's timings at its fastest sustained level on either side (--timing best).
DEFAULT_RULES = ("p50:+12%", "throughput:-12%", "accuracy:-0.5")
# --confirm's default: how many more times the rows the first run could not pass are measured, every time
# (no stopping at a pass), judged on the median over the runs; None: as many as make the current side's
# runs as many as the baseline's (equal draws)
CONFIRM = None
# seconds from the start of one run to the start of the first confirming run, each later gap CONFIRM_GROWTH
# times the one before (8, 12, 18 ... 91 s: the seven reach 4.3 min). A speed level of a shared machine
# lasts from a tenth of a second to minutes: a run right after the last one would often measure the same
# level, and runs a few seconds apart all fell inside one slow level of 3 minutes (the same docs).
CONFIRM_SPACING_S = 8.0
CONFIRM_GROWTH = 1.5


def confirm_wait(k: int) -> float:
    """Seconds between the start of the run before confirming run ``k`` (1, 2, ...) and the start of ``k``."""
    return CONFIRM_SPACING_S * CONFIRM_GROWTH ** (k - 1)


@dataclass(frozen=True)
class Rule:
    """Fail when ``metric`` gets worse by more than ``threshold`` (relative when ``relative``)."""

    metric: str
    threshold: float  # >= 0; a fraction for relative rules (0.1 = 10 %), else in the metric's unit
    relative: bool

    def __post_init__(self):
        if self.metric not in METRICS:
            raise UsageError(f"unknown metric {self.metric!r}")
        if not (math.isfinite(self.threshold) and self.threshold >= 0):
            raise UsageError(f"rule threshold must be a finite number >= 0, got {self.threshold!r}")

    def __str__(self) -> str:
        m = METRICS[self.metric]
        sign = "+" if m.worse > 0 else "-"
        if self.relative:
            return f"{self.metric}:{sign}{_g(self.threshold * 100)}%"
        return f"{self.metric}:{sign}{_g(self.threshold)}"

    def describe(self) -> str:
        m = METRICS[self.metric]
        how = "rises" if m.worse > 0 else "drops"
        amount = (f"{_g(self.threshold * 100)} %" if self.relative
                  else f"{_g(self.threshold)} {m.unit}".rstrip())
        return f"{m.title} {how} by more than {amount}"


def _g(v: float) -> str:
    return f"{v:.12g}"


_RULE_RE = re.compile(
    r"^\s*(?P<metric>[A-Za-z][A-Za-z0-9_/\-]*)\s*:\s*(?P<sign>[+-]?)\s*"
    r"(?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>%|[A-Za-z/]+)?\s*$"
)


def parse_rule(text: str) -> Rule:
    """``"p50:+10%"`` -> Rule("p50", 0.10, relative=True). Raises UsageError with the reason."""
    if not isinstance(text, str):
        raise UsageError(f"a rule must be text like 'p50:+10%', got {type(text).__name__}")
    m = _RULE_RE.match(text)
    if not m:
        raise UsageError(f"bad --fail-on rule {text!r}: expected METRIC:[+|-]NUMBER[%], e.g. p50:+10%, "
                         f"throughput:-5%, accuracy:-0.5 (metrics: {', '.join(METRICS)})")
    name = _ALIASES.get(m["metric"].lower())
    if name is None:
        import difflib

        close = difflib.get_close_matches(m["metric"].lower(), list(_ALIASES), n=1)
        raise UsageError(f"bad --fail-on rule {text!r}: unknown metric {m['metric']!r}"
                         + (f" (did you mean {close[0]!r}?)" if close else "")
                         + f"; metrics: {', '.join(METRICS)}")
    metric = METRICS[name]
    value = float(m["num"])
    if not math.isfinite(value):
        raise UsageError(f"bad --fail-on rule {text!r}: the threshold is not a finite number")
    sign = m["sign"]
    if sign and (1 if sign == "+" else -1) != metric.worse:
        worse = "an increase" if metric.worse > 0 else "a decrease"
        good = "+" if metric.worse > 0 else "-"
        raise UsageError(f"bad --fail-on rule {text!r}: for {metric.name}, a regression is {worse}; "
                         f"write {metric.name}:{good}{m['num']}{m['unit'] or ''}")
    unit = m["unit"] or ""
    relative = unit == "%"
    if unit and not relative and unit.lower() != metric.unit.lower():
        raise UsageError(f"bad --fail-on rule {text!r}: {metric.name} thresholds are in "
                         f"{metric.unit or 'its own unit (no suffix)'} or % of the baseline, not {unit!r}")
    if relative and metric.worse < 0 and value > 100:
        raise UsageError(f"bad --fail-on rule {text!r}: {metric.name} cannot drop by more than 100 %")
    return Rule(name, value / 100.0 if relative else value, relative)


def parse_rules(items: Iterable[str | Rule] | str | None) -> tuple[Rule, ...]:
    """Rules from strings (each may hold several, comma-separated) or Rule objects."""
    if items is None:
        return ()
    if isinstance(items, (str, Rule)):
        items = [items]
    out: list[Rule] = []
    for it in items:
        if isinstance(it, Rule):
            parts: list[Rule] = [it]
        else:
            if not isinstance(it, str):
                raise UsageError(f"a rule must be text like 'p50:+10%', got {type(it).__name__}")
            if not it.strip():
                raise UsageError("empty --fail-on rule")
            parts = [parse_rule(p) for p in it.split(",") if p.strip()]
            if not parts:
                raise UsageError(f"empty --fail-on rule {it!r}")
        for r in parts:
            if r not in out:
                out.append(r)
    return tuple(out)


def rules_help() -> str:
    return ("METRIC:[+|-]NUMBER[%]; metrics: " + ", ".join(
        f"{m.name} ({m.unit or 'no unit'})" for m in METRICS.values()))

