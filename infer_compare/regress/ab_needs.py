"""How many process pairs the A/B gate gives each configuration: planned for the whole gate, within a time
budget.

A row passes when its one-sided 95 % upper bound is within its rule (regress/ab_judge.py); an unchanged row
whose bound reaches past the rule is not judged, and one such row makes the whole gate "not judged" (exit 3).
So the chance that unchanged code is judged is planned for the gate, not for one row: each of the gate's
``checks`` timing checks (rows times timing rules) is planned to pass unchanged code with probability
1 - (1 - GATE_GOAL) / checks (Bonferroni: every one of them at once in at least GATE_GOAL of runs), 95 % for
one check, 99.7 % for each of 18. The number of process pairs is taken once, after the planned ones, from
their spread alone (regress/paired.py ``replicates_needed``: Stein's two stages), at most
PairPlan.max_replicates, and within the seconds the gate's budget leaves this configuration (``Budget``):
where the row's noise asks for more than that, the row is measured as far as allowed and, if it cannot
tell, says what it would need.
"""

from __future__ import annotations

import time
from typing import Any

from infer_compare.regress.paired import PAIRED_METRICS, log_ratios, replicates_needed
from infer_compare.regress.rules import parse_rules
from infer_compare.regress.tails import TAILS, process_figures

# unchanged code is judged in every timing check of a gate in at least this share of runs, where the rows'
# noise lets that be had within PairPlan.max_replicates process pairs and the gate's budget
GATE_GOAL = 0.95


def check_goal(checks: int) -> float:
    """The probability each of ``checks`` timing checks is planned to pass unchanged code with."""
    return 1 - (1 - GATE_GOAL) / max(1, checks)


def timing_rules(rules: Any) -> list:
    """The relative timing rules the process pairs are planned for."""
    return [r for r in parse_rules(rules)
            if r.metric in (*PAIRED_METRICS, *TAILS) and r.relative and r.threshold > 0]


def needed(rules: Any, checks: int = 1) -> Any:
    """How many process pairs a configuration needs (measure_pair asks once, after the planned ones): as many
    as let an unchanged row pass each relative timing rule with probability ``check_goal(checks)`` (its
    one-sided 95 % upper bound within the rule) and flag a change of twice the rule with 95 % probability at
    the first of Holm's levels over the gate's ``checks`` timing checks, projected from the planned process
    pairs' spread alone, never from the change they show (regress/paired.py ``replicates_needed``: Stein's
    two stages, so the verdict's error rates hold). None without such a rule."""
    timing = timing_rules(rules)
    if not timing:
        return None
    goal = check_goal(checks)

    def need(series: list[tuple[list[int], list[int], int]], reps: int, most: int) -> int:
        n = reps
        for a, b, calls in series:
            for rule in timing:
                if rule.metric in TAILS:  # one figure per process pair: their spread alone
                    xs = process_figures(rule.metric, a, b, calls, reps) if reps >= 3 else None
                else:
                    xs = log_ratios(rule.metric, a, b, calls)
                    xs = xs if reps >= 3 and len(xs) >= 2 * reps and len(xs) % reps == 0 else None
                if xs:
                    n = max(n, replicates_needed(xs, reps, rule.threshold, most, goal, checks))
        return n

    return need


class Budget:
    """The gate's measuring time shared among its configurations: each gets an equal share of what is left
    when it starts (a quiet configuration that needs few process pairs leaves its unused share to the ones
    after it). Its planned process pairs are always measured; the share bounds only the ones added."""

    def __init__(self, seconds: float, configurations: int = 1):
        self.seconds, self.left = float(seconds), max(1, configurations)
        self.spent = 0.0
        self._t0: float | None = None

    def share(self) -> float:
        """Seconds for the configuration about to be measured (0: no bound)."""
        self._t0 = time.perf_counter()
        if self.seconds <= 0:
            return 0.0
        return max(1e-3, (self.seconds - self.spent) / self.left)

    def done(self) -> None:
        if self._t0 is not None:
            self.spent += time.perf_counter() - self._t0
            self._t0 = None
        self.left = max(1, self.left - 1)


def plan_text(checks: int, first: int, most: int, budget_s: float) -> str:
    """What the process pairs were planned for, in the gate's method ('' without timing checks)."""
    if checks <= 0:
        return ""
    each = f"{check_goal(checks) * 100:.3g} %"
    gate = "" if checks == 1 else f", all {checks} in {GATE_GOAL * 100:.0f} % of runs"
    within = f" and {budget_s:g} s of measuring for the gate" if budget_s > 0 else ""
    return (f"process pairs planned so that unchanged code passes each timing check with {each}{gate} "
            f"(from the first {first} process pairs' spread; at most {most} a configuration{within})")
