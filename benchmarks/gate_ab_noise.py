"""The A/B gate's verdict on simulated rows of a given noise: how often unchanged code fails, how often a
change is caught, and the detectable change printed, as the gate takes them (regress/paired.py,
regress/ab_judge.py): ``--replicates`` process pairs, then as many more as ``replicates_needed`` asks for (up
to ``--most``), each process pair timing ``--pairs-each`` pairs of blocks; every pair's log ratio drawn as
change + N(0, block_sd).

This is the statistic alone, on Gaussian noise with no difference between processes: where a row's measured
false failures are above it, the machine's noise has more in it than the block-to-block spread (heavier tails,
lasting process differences). PyTorch's MobileNet v2 row on the 2-core VM: adjacent 3-call blocks about 10.7 %
apart (sd of their log ratios), 2 pairs of blocks per process pair, 9 process pairs in most gate runs.

    python benchmarks/gate_ab_noise.py --block-sd 0.02,0.04,0.06,0.08,0.107,0.14 --draws 4000 --out OUT.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infer_compare.regress.ab_judge import _verdict  # noqa: E402
from infer_compare.regress.ab_needs import GATE_GOAL as GOAL  # noqa: E402
from infer_compare.regress.metrics import METRICS  # noqa: E402
from infer_compare.regress.paired import replicated, replicates_needed  # noqa: E402
from infer_compare.regress.results import PASS, REGRESSION  # noqa: E402
from infer_compare.regress.rules import parse_rules  # noqa: E402


def one_gate(rng: random.Random, change: float, sd: float, args) -> tuple[str, float, int]:
    """(verdict, detectable change, process pairs) of one simulated row."""
    def pairs(n: int) -> list[float]:
        return [change + rng.gauss(0.0, sd) for _ in range(n * args.pairs_each)]

    xs = pairs(args.replicates)
    n = max(args.replicates, min(args.most, replicates_needed(xs, args.replicates, args.threshold, args.most,
                                                               power=GOAL)))
    xs += pairs(n - args.replicates)
    p = replicated(xs, n)
    # the gate's own verdict of one timing check (a one-check gate: Holm's level is the check's own)
    rule = parse_rules([f"p50:+{args.threshold * 100:g}%"])[0]
    c = _verdict(rule, "row", METRICS["p50"], p, (1.0, 1.0), len(xs), 3)
    verdict = {PASS: "pass", REGRESSION: "regression"}.get(c.verdict, "not judged")
    return verdict, p.mdc(args.threshold), n


def rates(change: float, sd: float, args, rng: random.Random) -> dict:
    got = [one_gate(rng, change, sd, args) for _ in range(args.draws)]
    mdcs = sorted(m for _, m, _ in got)
    return {"change": change, "block_sd": sd,
            "regression_percent": round(100 * sum(v == "regression" for v, _, _ in got) / len(got), 2),
            "not_judged_percent": round(100 * sum(v == "not judged" for v, _, _ in got) / len(got), 2),
            "median_mdc_percent": round(100 * mdcs[len(mdcs) // 2], 1),
            "mean_process_pairs": round(sum(n for _, _, n in got) / len(got), 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--block-sd", default="0.02,0.04,0.06,0.08,0.107,0.14",
                    help="sd of a pair of blocks' log ratio, comma-separated")
    ap.add_argument("--changes", default="0,0.05,0.10,0.20", help="true changes, comma-separated")
    ap.add_argument("--threshold", type=float, default=0.05, help="the rule (p50:+5%% is 0.05)")
    ap.add_argument("--replicates", type=int, default=5)
    ap.add_argument("--most", type=int, default=30, help="the most process pairs (PairPlan.max_replicates)")
    ap.add_argument("--pairs-each", type=int, default=2, help="pairs of blocks per process pair")
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    out = {"command": " ".join(sys.argv), "rows": []}
    for sd in (float(x) for x in args.block_sd.split(",")):
        for ch in (float(x) for x in args.changes.split(",")):
            r = rates(ch, sd, args, rng)
            out["rows"].append(r)
            print(f"block sd {sd:.3f} change {ch:+.0%}: regression {r['regression_percent']:.2f} %, "
                  f"not judged {r['not_judged_percent']:.2f} %, median detectable "
                  f"change {r['median_mdc_percent']} %, process pairs {r['mean_process_pairs']}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
