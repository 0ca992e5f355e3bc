"""Refusing a baseline measured on another machine or with other library versions."""

from __future__ import annotations

from infer_compare.base.errors import UsageError
from infer_compare.base.records import Environment


class EnvironmentMismatch(UsageError):
    """The baseline was measured on another machine or with other library versions."""



def environment_differences(baseline: Environment, current: Environment) -> list[str]:
    """What differs between the two fingerprints, one readable item each (empty when they match)."""
    a, b = baseline.fingerprint(), current.fingerprint()
    out: list[str] = []
    for k in sorted(set(a) | set(b)):
        if k == "libraries":
            continue
        if a.get(k) != b.get(k):
            out.append(f"{k}: {a.get(k)!r} -> {b.get(k)!r}")
    la, lb = a.get("libraries", {}) or {}, b.get("libraries", {}) or {}
    for lib in sorted(set(la) | set(lb)):
        if la.get(lib) != lb.get(lib):
            out.append(f"{lib}: {la.get(lib) or 'absent'} -> {lb.get(lib) or 'absent'}")
    return out


def check_environment(baseline: Environment, current: Environment, allow: bool = False) -> list[str]:
    """Raise EnvironmentMismatch when the environments differ and ``allow`` is False; else the differences."""
    diffs = environment_differences(baseline, current)
    if diffs and not allow:
        raise EnvironmentMismatch(
            "the baseline was measured in a different environment (" + "; ".join(diffs) + "): its timings "
            "are not comparable; re-measure the baseline here, or pass --allow-environment-change "
            "(allow_environment_change=True) to compare anyway")
    return diffs

