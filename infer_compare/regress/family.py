"""The A/B gate's timing checks as one family: how often unchanged code fails a gate run, whatever its size.

Each timing check (every row under every timing rule) is a one-sided test of "no change" against "B is
slower", with its p-value from Student's t of the estimate over its standard error (regress/paired.py). Taken
each at 5 %, a gate of 18 such checks would fail unchanged code in up to 1 - 0.95^18 = 60 % of runs (33 % of
simulated 18-row gates at the noise of MobileNet v2's PyTorch row, tests/test_ab_rates.py). So a regression is
taken with Holm's step-down at a family level of 5 %: the checks' p-values in ascending order, the k-th of m
compared with 5 % / (m - k + 1), the first one above its level ending the steps. A check is a regression when
Holm rejects its "no change" and its estimate is beyond its rule, so unchanged code fails the gate in at most
5 % of runs (for any dependence between the checks). The test is against no change, not against the rule's
threshold: a change beyond the rule by its estimate and shown to be real is taken as material, which keeps the
gate's power to catch twice its threshold; the price is that a true change at the threshold fails about half
the time (a rule says where failing starts, not where it is certain), and that the 5 % holds for unchanged
code, not for a real change within the rule (a row 4 % slower at p50:+5% fails more often than one unchanged).

Passes need no correction: "every check within its rule" is an intersection of one-sided equivalence tests
(intersection-union), each at 5 %, so a change beyond a rule passes the gate in at most 5 % of runs.

The family: the checks that were judged (pass, regression, cannot tell). A check not judged for a reason of
its own (disturbed, too few pairs, no paired samples) cannot fail the gate, and is left out.
"""

from __future__ import annotations

from dataclasses import replace

from infer_compare.regress.results import PASS, REGRESSION, TOO_NOISY, Check, RowDiff

FAMILY_ALPHA = 0.05  # unchanged code fails a gate run in at most this share of runs
JUDGED = (PASS, REGRESSION, TOO_NOISY)


def holm_levels(ps: list[float], alpha: float = FAMILY_ALPHA) -> list[tuple[bool, float]]:
    """(rejected, level compared with) for each p-value of ``ps`` by Holm's step-down at family level
    ``alpha``: ties in input order; once one is kept, every larger one is kept too."""
    m = len(ps)
    order = sorted(range(m), key=lambda i: (ps[i], i))
    out: list[tuple[bool, float]] = [(False, alpha)] * m
    going = True
    for k, i in enumerate(order):
        level = alpha / (m - k)
        going = going and ps[i] <= level
        out[i] = (going, level)
    return out


def in_family(c: Check) -> bool:
    return c.p_value is not None and c.verdict in JUDGED


def judge_family(rows: tuple[RowDiff, ...], alpha: float = FAMILY_ALPHA) -> tuple[RowDiff, ...]:
    """The rows with their timing checks' regressions taken at the family level: a check that is a
    regression on its own (5 %) and not by Holm over the whole family cannot tell."""
    members = [c for d in rows for c in d.checks if in_family(c)]
    if not members:
        return rows
    m = len(members)
    got = {id(c): r for c, r in zip(members, holm_levels([c.p_value or 0.0 for c in members], alpha),
                                    strict=True)}

    def one(c: Check) -> Check:
        if id(c) not in got:
            return c
        rejected, level = got[id(c)]
        c = replace(c, family=m, family_level=level)
        return _demoted(c, m, level) if c.verdict == REGRESSION and not rejected else \
            _confirmed(c, m, level) if c.verdict == REGRESSION else c

    return tuple(replace(d, checks=tuple(one(c) for c in d.checks)) for d in rows)


def _with_grounds(c: Check, grounds: str, verdict: str) -> Check:
    head = c.message[:len(c.message) - len(c.grounds)] if c.grounds and c.message.endswith(c.grounds) \
        else c.message + ": "
    return replace(c, verdict=verdict, message=head + grounds, grounds=grounds)


def _confirmed(c: Check, m: int, level: float) -> Check:
    if m == 1:  # its own 5 % is the family's
        return c
    return _with_grounds(c, f"{c.grounds}, within Holm's level {_pc(level)} for its rank among the gate's "
                            f"{m} timing checks", REGRESSION)


def _demoted(c: Check, m: int, level: float) -> Check:
    return _with_grounds(c, f"cannot tell: beyond the rule by its estimate, and {p_text(c.p_value)} "
                            f"against no change, but not within Holm's level {_pc(level)} for its rank among "
                            f"the gate's {m} timing checks (unchanged code fails a gate run in at most "
                            f"{_pc(FAMILY_ALPHA)}): not judged: more --replicates would tell", TOO_NOISY)


def _pc(x: float) -> str:
    return f"{x * 100:.2g} %"


def p_text(p: float | None) -> str:
    """A p-value as the messages give it."""
    return "p = ?" if p is None else "p < 0.0001" if p < 1e-4 else f"p = {p:.2g}"


def family_size(checks: tuple[Check, ...] | list[Check]) -> int:
    return max((c.family for c in checks), default=0)


def family_text(m: int, alpha: float = FAMILY_ALPHA) -> str:
    """The gate's false-failure rate, with the number of checks it holds for ('' without any)."""
    if m <= 0:
        return ""
    what = "this timing check" if m == 1 else f"this {m}-check gate"
    return (f"unchanged code fails {what} in at most {_pc(alpha)} of runs (Holm over {m} "
            f"check{'s' if m != 1 else ''})")
