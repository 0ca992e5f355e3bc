"""How many process pairs the A/B gate measures (regress/paired.py ``replicates_needed``, measure/ab.py
``measure_pair``): decided once from the first stage's spread, as many as let an unchanged row's one-sided
95 % upper bound fall within the rule with 95 % probability; where no number up to the most reaches that, the
one whose projected width is smallest, never simply the most."""

from __future__ import annotations

import math

import numpy as np

from infer_compare.regress.paired import equivalence_width, projected, replicated, replicates_needed

RULE = 0.05  # p50:+5%
TAU = math.log1p(RULE)


def _first_stage(sd_between: float, seed: int, reps: int = 5, per: int = 2) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(x) for r in range(reps) for x in rng.normal(rng.normal(0, sd_between), 0.01, per)]


def _width(xs: list[float], reps: int, n: int) -> float:
    return equivalence_width(projected(replicated(xs, reps), n))


def test_a_row_no_number_of_pairs_can_make_gets_the_best_projected_not_the_most():
    xs = _first_stage(0.12, seed=3)  # processes 12 % apart: not even 10 pairs let an unchanged row pass
    widths = {n: _width(xs, 5, n) for n in range(5, 11)}
    assert min(widths.values()) > TAU, widths  # the premise: no number up to 10 reaches it
    got = replicates_needed(xs, 5, RULE, 10)
    assert got == min(widths, key=lambda n: (widths[n], n)), (got, widths)
    assert got == 9 and widths[9] < widths[10], widths  # of 10 the trimmed mean keeps 6, of 9 it keeps 7


def test_a_row_some_number_of_pairs_can_make_gets_the_fewest_that_do():
    xs = _first_stage(0.03, seed=1)
    got = replicates_needed(xs, 5, RULE, 10)
    assert 5 < got < 10 and _width(xs, 5, got) <= TAU < _width(xs, 5, got - 1), got
    quiet = _first_stage(0.002, seed=5)
    assert replicates_needed(quiet, 5, RULE, 10) == 5


def test_the_number_is_taken_from_the_spread_alone():
    """B 10 % slower in every pair of the first stage: the same number of process pairs (no look at the
    change, so the verdict's error rates hold)."""
    for seed in range(20):
        xs = _first_stage(0.02, seed=seed)
        assert replicates_needed(xs, 5, RULE, 10) == replicates_needed([x + 0.1 for x in xs], 5, RULE, 10)


def test_the_width_is_that_of_an_equivalence_test():
    """(t_.95 + t_.95) times the standard error on the projected degrees of freedom: where it is within the
    rule, an unchanged row's upper bound falls within it with 95 % probability (measured in
    tests/test_ab_rates.py)."""
    p = projected(replicated(_first_stage(0.02, seed=1), 5), 9)
    from infer_compare.regress.paired import t_quantile

    assert p.groups == 9 and p.df == 9 - 2 - 1
    assert math.isclose(equivalence_width(p), 2 * t_quantile(0.95, 6) * p.se)


def test_the_gate_plans_each_check_for_all_of_them_to_pass():
    """Each of a gate's checks is planned to pass unchanged code with 1 - 5 % / checks: a noisy row of an
    18-check gate asks for more process pairs than the same row alone."""
    from infer_compare.regress.ab_needs import check_goal, plan_text

    assert check_goal(1) == 0.95 and abs(check_goal(18) - (1 - 0.05 / 18)) < 1e-12
    xs = _first_stage(0.03, seed=5)
    alone, of18 = (replicates_needed(xs, 5, RULE, 30, check_goal(k), k) for k in (1, 18))
    assert 5 <= alone < of18 <= 30, (alone, of18)
    said = plan_text(18, 5, 30, 300)
    assert "each timing check with 99.7 %, all 18 in 95 % of runs" in said and "300 s" in said, said
    assert plan_text(0, 5, 30, 300) == ""


def test_the_budget_bounds_the_pairs_added_never_the_planned_ones():
    from dataclasses import replace

    from infer_compare.measure.ab import PairPlan, _most

    plan = replace(PairPlan(), max_replicates=30, budget_s=20.0)
    assert _most(plan, 5, 5.0) == 20  # 1 s a process pair: 15 more fit in the 15 s left
    assert _most(plan, 5, 19.0) == 5  # nothing fits: the 5 measured stand
    assert _most(plan, 5, 40.0) == 5  # over the budget already: never fewer than measured
    assert _most(replace(plan, budget_s=1000.0), 5, 5.0) == 30  # the most a row may have
    assert _most(replace(plan, budget_s=0.0), 5, 500.0) == 30  # 0: no bound


def test_the_budget_is_shared_among_the_configurations_left(monkeypatch):
    from infer_compare.regress import ab_needs

    clock = iter([0.0, 10.0, 10.0, 100.0, 100.0, 100.0])
    monkeypatch.setattr(ab_needs.time, "perf_counter", lambda: next(clock))
    b = ab_needs.Budget(90.0, configurations=3)
    assert b.share() == 30.0
    b.done()  # took 10 s: 80 s left for 2
    assert b.share() == 40.0
    b.done()  # took 90 s: over, the last one still gets its planned pairs
    assert b.share() == 1e-3
    assert ab_needs.Budget(0.0, 3).share() == 0.0
