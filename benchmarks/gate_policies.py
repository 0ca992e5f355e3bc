"""Which timing statistic should the gate use? Judge the runs that benchmarks/gate_quality.py kept (its
``--work`` directory) under several statistics, p50 rule alone (+15 %), without running anything.

For each row: the baseline figure is the best (min), median or most favourable (max) p50 of the pooled
baseline runs; the current figure is the run's p50, or with ``confirm`` the best of that run and the next
run of the same kind (what ``--confirm 1`` adds when the first run failed on timing alone). p50 taken
as measured (abs), over the run's PyTorch fp32 row (ref), or over the calibration workload (cal). Rows
measured while other processes took more than 0.25 cores are left out, as the gate does.

    python benchmarks/gate_policies.py GQ_WORK/lenet5
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import sys

REF = "pytorch/pytorch/fp32"
THRESHOLD = 0.15


def load(d: str) -> dict | None:
    try:
        rows = json.load(open(f"{d}/results.json"))["rows"]
    except (OSError, ValueError, KeyError):
        return None
    out = {}
    for r in rows:
        if r["status"] != "ok" or not r.get("latency"):
            continue
        c = (r.get("extra") or {}).get("calibration") or {}
        quiet = (c.get("other_cores") or 0) + (c.get("steal_cores") or 0) <= 0.25
        out[f"{r['backend']}/{r['format']}/{r['precision']}"] = (r["latency"]["p50_ms"], quiet, c.get("ms"))
    return out


def value(run: dict, lab: str, mode: str) -> float | None:
    v, quiet, cal = run[lab]
    if not quiet:
        return None
    if mode == "cal":
        return v / cal if cal else None
    if mode == "ref" and lab != REF:
        return v / run[REF][0] if REF in run and run[REF][1] else None
    return v


def worst_change(bases: list[dict], currents: list[dict], mode: str, base_stat: str) -> float | None:
    worst = None
    for lab in bases[0]:
        bv = [x for x in (value(b, lab, mode) for b in bases if lab in b) if x is not None]
        cv = [x for x in (value(c, lab, mode) for c in currents if c and lab in c) if x is not None]
        if bv and cv:
            b = {"min": min, "median": statistics.median, "max": max}[base_stat](bv)
            ch = min(cv) / b - 1
            worst = ch if worst is None else max(worst, ch)
    return worst


def main(root: str) -> None:
    bases = [b for b in (load(d) for d in sorted(glob.glob(f"{root}/baseline/run*"))) if b]
    kinds: dict[str, list] = {}
    for d in sorted(glob.glob(f"{root}/*[0-9]"), key=lambda p: (p.rstrip("0123456789"),
                                                                int(p[len(p.rstrip("0123456789")):]))):
        kinds.setdefault(os.path.basename(d).rstrip("0123456789"), []).append(load(d))
    kinds.pop("killed", None)
    print("| p50 | baselines | current | "
          + " | ".join(f"{k}: {'pass' if k in ('unchanged', 'loaded') else 'caught'}"
                       for k in kinds) + " |")
    print("|---" * (3 + len(kinds)) + "|")
    for mode in ("abs", "ref", "cal"):
        for base_stat in ("min", "median", "max"):
            for confirm in (False, True):
                cells = []
                for k, runs in kinds.items():
                    n = 0
                    for i, r in enumerate(runs):
                        w = worst_change(bases, [r], mode, base_stat)
                        fail = w is not None and w > THRESHOLD
                        if fail and confirm:
                            w = worst_change(bases, [r, runs[(i + 1) % len(runs)]], mode, base_stat)
                            fail = w is not None and w > THRESHOLD
                        n += fail if k not in ("unchanged", "loaded") else not fail
                    cells.append(f"{n}/{len(runs)}")
                print(f"| {mode} | {base_stat} | {'best of 2 (confirm)' if confirm else 'one run'} | "
                      + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
