"""The A/B gate's estimate over process pairs, balanced over the order in which each pair loaded its sides.

A process pair forks and loads one side first (measure/ab.py: A, B, A, B ... over the process pairs, recorded
as ``extra["ab"]["loaded_first"]``). Whatever going first leaves for a process's whole life (where its memory
landed, the page cache or the runtime's files the other's load warmed) falls on the side that went first. With
as many process pairs of either order it cancels in any mean over them; with an odd count (5: three A first,
two B first) a plain trimmed mean takes in a fifth to a third of it (simulated: tests/test_ab_tails.py).

Balanced here as a crossover is, but after the trimming: the 20 %-trimmed mean sets aside the same process
pairs as ever (the g highest and the g lowest: a process slow all its life among them), then the kept ones of
each order are averaged apart and the two averages averaged. An order with too few process pairs of its own
(two of five) cannot be trimmed apart without losing the trimming's protection, which is why the orders are
not averaged before it. Where the kept ones are all of one order (the other order's were the extremes: both
of B's two, the one B's load order slowed and the one a slow process pushed further), the other order's
nearer one to the kept ones stands for it: the farther, a process slow all its life, stays set aside.

Weighting the orders equally makes the mean's variance (k / 4) (1 / k_a + 1 / k_b) times that of the plain
mean of the k kept ones (1.125 for 2 and 1, 1 for as many of each): the standard error is widened by its
square root. The spread itself is taken as the trimmed mean takes it (winsorized, the order effect in it):
wider where going first matters, never narrower.

No import of the other regress modules: paired.py calls this from ``replicated`` and builds its Paired.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

SIDES = "ab"


def balanced(xs: Sequence[float], loaded_first: str, trim: float = 0.2) -> tuple[float, float] | None:
    """(estimate, standard error factor) of the process pairs' figures ``xs`` (one per process pair, in the
    order measured; log ratios B over A) balanced over ``loaded_first`` (which side each process pair loaded
    first, "a" or "b", one letter per process pair): the kept ones of the trimmed mean averaged within each
    order, the two averages averaged; the factor multiplies the trimmed mean's standard error. None where the
    orders are not recorded (or not one per figure) or all alike: the plain trimmed mean then."""
    n = len(xs)
    if n < 2 or len(loaded_first) != n or set(loaded_first) - set(SIDES):
        return None
    if set(loaded_first) != set(SIDES):
        return None
    g = int(math.floor(trim * n))
    kept = sorted(range(n), key=lambda i: (xs[i], i))[g:n - g]
    by = {s: [float(xs[i]) for i in kept if loaded_first[i] == s] for s in SIDES}
    centre = sum(xs[i] for i in kept) / len(kept)
    for s, v in by.items():
        if not v:  # its process pairs all set aside: the one nearer the kept ones stands for its order
            v.append(min((float(x) for x, f in zip(xs, loaded_first, strict=True) if f == s),
                         key=lambda x: abs(x - centre)))
    est = sum(sum(v) / len(v) for v in by.values()) / 2
    factor = math.sqrt(sum(map(len, by.values())) / 4 * (1 / len(by["a"]) + 1 / len(by["b"])))
    return est, factor
