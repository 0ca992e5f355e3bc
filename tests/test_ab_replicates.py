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
