"""The A/B gate quality benchmark's scoring (benchmarks/gate_ab_quality.py): what one gate run's gate.json
says of the change it was given, and the rates per kind of run, each with its Wilson 95 % interval."""

from __future__ import annotations

import json
import math
from pathlib import Path

import gate_ab_injection as inj

KINDS = ("unchanged", "unchanged2", "slow5", "slow10", "slow20", "stall99", "unchanged18")
UNCHANGED = ("unchanged", "unchanged2", "unchanged18")
JUDGED = ("pass", "regression", "within noise")
NOT_TIMING = ("accuracy", "cosine")


def _checks(g: dict) -> list[dict]:
    """Every check of gate.json, flat: row, rule, estimate (``change``), CI, verdict, message."""
    return [{"row": r.get("label"), "rule": c.get("rule", ""), "change": c.get("change"), "ci": c.get("ci"),
             "verdict": c.get("verdict"), "message": c.get("message", "")}
            for r in g.get("rows") or [] for c in r.get("checks") or []]


def score(gate_json: Path, changed: str | None, metric: str) -> dict:
    """What gate.json says, scored: caught (a violation names the changed row and ``metric``'s rule), the
    other violations (false failures), the unjudged lines, the checks, the timing checks judged."""
    try:
        g = json.loads(gate_json.read_text())
    except (OSError, ValueError):
        g = {}
    viol = g.get("violations") or []
    hit = f"{changed}: {metric}" if changed else None
    checks = _checks(g)
    # caught as the CI job reads it (a violation line); the check's own verdict beside it, in case the
    # violation's wording changes
    broke = any(c["row"] == changed and c["rule"].startswith(metric) and c["verdict"] == "regression"
                for c in checks)
    timing = [c for c in checks if c["rule"].split(":")[0] not in NOT_TIMING]
    verdicts: dict[str, int] = {}
    for c in timing:
        verdicts[str(c["verdict"])] = verdicts.get(str(c["verdict"]), 0) + 1
    return {"gate_json": bool(g), "violations": viol,
            "caught": bool(hit) and any(v.startswith(hit) for v in viol), "changed_check_broken": broke,
            "false_failures": [v for v in viol if not (hit and v.startswith(hit))],
            "unjudged": g.get("unjudged") or [], "rows_compared": g.get("rows_compared"),
            "timing_checks": len(timing), "timing_checks_judged": sum(c["verdict"] in JUDGED for c in timing),
            "timing_verdicts": verdicts, "checks": checks, "method": g.get("method"),
            # whatever the gate prints of its own per-gate false-failure rate (a field being added)
            "gate_fields": {k: v for k, v in g.items() if any(w in k.lower() for w in ("false", "family"))},
            "environment_differences": g.get("environment_differences") or []}


def wilson(k: int, n: int, z: float = 1.96) -> dict:
    """``k`` of ``n`` as a rate with its Wilson score interval (95 %)."""
    if not n:
        return {"k": k, "n": n, "rate": None, "ci95": None}
    p, d = k / n, 1 + z * z / n
    c, h = (p + z * z / (2 * n)) / d, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return {"k": k, "n": n, "rate": round(p, 4),
            "ci95": [round(max(0.0, c - h), 4), round(min(1.0, c + h), 4)]}


def _kind_rates(xs: list[dict], kind: str) -> dict:
    n = len(xs)
    if kind in UNCHANGED:
        out = {"passed": wilson(sum(o["exit"] == 0 for o in xs), n),
               "false_failures": wilson(sum(o["exit"] == 1 for o in xs), n)}
    else:
        out = {"caught_on_changed_row": wilson(sum(o["caught"] for o in xs), n),
               "false_failures_other_rows": wilson(sum(bool(o["false_failures"]) for o in xs), n),
               "missed_passed": wilson(sum(o["exit"] == 0 for o in xs), n),
               "by_target": {t: wilson(sum(o["caught"] for o in xs if o["target"] == t),
                                       sum(o["target"] == t for o in xs)) for t in sorted(inj.TARGETS)}}
    out["not_judged"] = wilson(sum(o["exit"] == 3 for o in xs), n)
    out["errors"] = wilson(sum(o["exit"] not in (0, 1, 3) for o in xs), n)
    checks = sum(o.get("timing_checks_judged") or 0 for o in xs)
    out["timing_checks_judged_per_run"] = round(checks / n, 2)
    # per judged timing check: how often one failed with nothing changed (a check per row and rule)
    if kind in UNCHANGED:
        out["false_failures_per_judged_check"] = wilson(
            sum(c["verdict"] == "regression" for o in xs for c in o.get("checks") or ()
                if c["rule"].split(":")[0] not in NOT_TIMING), checks)
    reruns = [o for o in xs if o.get("reruns")]
    if reruns:
        last = [o["reruns"][-1]["exit"] if o.get("reruns") else o["exit"] for o in xs]
        out["after_reruns"] = {"runs_repeated": len(reruns), "passed": wilson(last.count(0), n),
                               "failed": wilson(last.count(1), n), "not_judged": wilson(last.count(3), n)}
    return out


def rates(outcomes: list[dict]) -> dict:
    """Per kind, the first run of each gate run counted: rates with their Wilson 95 % intervals."""
    out = {}
    for kind in (*KINDS, "cross10"):
        xs = [o for o in outcomes if o["kind"] == kind and o.get("exit") is not None]
        if xs:
            out[kind] = {"n": len(xs), **_kind_rates(xs, kind)}
    return out


def mdc(outcomes: list[dict]) -> dict:
    """Per row and rule, the detectable change the unchanged runs printed ("sees a change of X %"), the
    median over them."""
    per: dict[str, list[float]] = {}
    for c in (c for o in outcomes if o["kind"] in UNCHANGED for c in o.get("checks") or ()):
        if "sees a change of " not in c["message"]:
            continue
        try:  # parsed before it is filed: a message worded otherwise leaves no empty entry
            v = float(c["message"].split("sees a change of ")[-1].split(" %")[0])
        except ValueError:
            continue
        per.setdefault(f"{c['row']} {c['rule']}", []).append(v)
    return {k: sorted(v)[len(v) // 2] for k, v in per.items()}
