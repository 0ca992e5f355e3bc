"""Judge the samples a gate_ab_quality.py run stored again, with this checkout's statistic
(regress/ab_judge.py), without measuring anything: for a change of the statistic alone, on the same measured
blocks. The process pairs are those measured (a statistic that would have asked for more of them,
regress/ab.py's second stage, is judged on those that were measured), so the figures say "re-judged", never
"measured with".

    python benchmarks/gate_ab_rejudge.py RESULT.json --out REJUDGED.json

RESULT.json: gate_ab_quality.py's --out (its "work" folder holds each round's results); scored as that script
scores (a change caught only when a violation names the changed row and its p50 rule).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from infer_compare.base.records import load_report
from infer_compare.regress.ab_judge import AB_RULES, judge_ab

TARGET_ROWS = {"onnxruntime": "onnxruntime/onnx/fp32/cpu/b1", "openvino": "openvino/openvino/fp32/cpu/b1",
               "pytorch": "pytorch/pytorch/fp32/cpu/b1"}


def rejudge(folder: Path, target: str | None) -> dict:
    """One stored gate run judged again: its exit as the gate would give it and whether it caught the
    change."""
    res = judge_ab(load_report(folder / "baseline" / "results.json"), load_report(folder / "results.json"),
                   AB_RULES)
    viol = [str(v) for v in res.violations]
    changed = TARGET_ROWS.get(target or "")
    caught = bool(changed) and any(v.startswith(f"{changed}: p50") for v in viol)
    other = [v for v in viol if not (changed and v.startswith(f"{changed}: p50"))]
    exit_code = 1 if viol else (3 if res.unjudged else 0)
    return {"exit": exit_code, "caught": caught, "false_failures": other,
            "unjudged": [str(u) for u in res.unjudged]}


def rates(outcomes: list[dict]) -> dict:
    out: dict = {}
    for kind in ("unchanged", "slow5", "slow10", "slow20"):
        xs = [o for o in outcomes if o["kind"] == kind]
        if not xs:
            continue
        out[kind] = {"n": len(xs), "pass": sum(o["exit"] == 0 for o in xs),
                     "caught_on_changed_row": sum(o["caught"] for o in xs),
                     "failing_another_row": sum(bool(o["false_failures"]) for o in xs),
                     "not_judged": sum(o["exit"] == 3 for o in xs)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("result", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    got = json.loads(args.result.read_text())
    work = Path(got["work"])
    commit = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent),
                             "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip()
    out = {"rejudged_from": str(args.result), "measured_with": got.get("conditions", {}).get("code"),
           "judged_with": commit, "command": " ".join(["benchmarks/gate_ab_rejudge.py", *sys.argv[1:]])}
    for model, res in got.items():
        if not isinstance(res, dict) or "outcomes" not in res:
            continue
        outcomes = []
        for o in res["outcomes"]:
            folder = work / model / f"round{o['round']}" / o["kind"]
            if o["kind"] in ("unchanged", "slow5", "slow10", "slow20") and (folder / "results.json").exists():
                outcomes.append({"round": o["round"], "kind": o["kind"], "target": o.get("target"),
                                 **rejudge(folder, o.get("target")), "measured_exit": o["exit"]})
        out[model] = {"outcomes": outcomes, "rates": rates(outcomes), "measured_rates": res.get("rates")}
        print(model, json.dumps(out[model]["rates"]))
    args.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
