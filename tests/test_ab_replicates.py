"""How many process pairs the A/B gate measures (regress/paired.py ``replicates_needed``, measure/ab.py
``measure_pair``): decided once from the first stage's spread; where no number up to the most reaches the
goal, the one whose projected detectable change is smallest, never simply the most."""

from __future__ import annotations

import math

import numpy as np

from infer_compare.regress.paired import TRIM, Paired, replicated, replicates_needed

RULE, GOAL = 0.05, 0.10  # p50:+5%, twice it


def _first_stage(sd_between: float, seed: int, reps: int = 5, per: int = 2) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(x) for r in range(reps) for x in rng.normal(rng.normal(0, sd_between), 0.01, per)]


def _projected_mdc(xs: list[float], reps: int, n: int) -> float:
    p = replicated(xs, reps)
    spread = p.se * (1 - 2 * math.floor(TRIM * reps) / reps) * math.sqrt(reps)
    g = math.floor(TRIM * n)
    return Paired(p.n, p.est, spread / ((1 - 2 * g / n) * math.sqrt(n)), max(1.0, n - 2 * g - 1), n).mdc(RULE)


def test_a_row_no_number_of_pairs_can_make_gets_the_best_projected_not_the_most():
    xs = _first_stage(0.12, seed=3)  # processes 12 % apart: not even 10 pairs see +10 %
    mdcs = {n: _projected_mdc(xs, 5, n) for n in range(5, 11)}
    assert min(mdcs.values()) > GOAL, mdcs  # the premise: no number up to 10 reaches the goal
    got = replicates_needed(xs, 5, RULE, GOAL, 10)
    assert got == min(mdcs, key=lambda n: (mdcs[n], n)), (got, mdcs)
    assert got == 9 and mdcs[9] < mdcs[10], mdcs  # of 10 the trimmed mean keeps 6, of 9 it keeps 7


def test_a_row_some_number_of_pairs_can_make_gets_the_fewest_that_do():
    xs = _first_stage(0.04, seed=5)
    got = replicates_needed(xs, 5, RULE, GOAL, 10)
    assert 5 < got < 10 and _projected_mdc(xs, 5, got) <= GOAL < _projected_mdc(xs, 5, got - 1), got
    quiet = _first_stage(0.002, seed=5)
    assert replicates_needed(quiet, 5, RULE, GOAL, 10) == 5
