"""Which timing statistic can the gate trust on a shared machine? Runs of unchanged code, judged by
resampling.

Measures ``--runs`` runs of the same command one after another (or reads them from ``--work``), then
draws, ``--trials`` times, ``B`` of them as the pooled baseline and up to ``K`` others as the current
side, one at a time until the gate passes (what ``--confirm`` does), and counts how often unchanged code
passes. The same draws with ONNX Runtime's rows made 20 % slower (every call's time x 1.2: what the
``slow`` injection of gate_quality.py does to the runner) count how often a real change is caught. Each
row's figure is taken two ways: its p50 as measured, and the median of its fastest block of consecutive
calls (20 blocks; ``fast``); the baselines' spread (median absolute deviation) added to the threshold or
not. The draws are of whole runs measured minutes apart; ``--confirm``'s runs follow each other within
seconds, so these rates are an upper bound for it (gate_quality.py measures the real thing).

    python benchmarks/gate_levels.py --work /tmp/levels --runs 20 --out benchmarks/results/gate-levels.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
from pathlib import Path

COMMAND = ["--model", "lenet5", "--backends", "pytorch,onnxruntime,openvino", "--precisions", "fp32,int8",
           "--device", "cpu", "-b", "1", "--max-time", "3", "-q", "--threads", "2"]


def figures(path: Path, slow: float = 1.0) -> dict[str, dict[str, float]]:
    """Row label -> {"p50": as measured, "fast": the fastest block's median}, in µs; quiet rows only."""
    import numpy as np

    out = {}
    for r in json.loads(path.read_text())["rows"]:
        cal = (r.get("extra") or {}).get("calibration") or {}
        if r["status"] != "ok" or not r.get("samples_ns") or (cal.get("other_cores") or 0) + (
                cal.get("steal_cores") or 0) > 0.25:
            continue
        s = np.asarray(r["samples_ns"], dtype=float) / 1e3 * (slow if r["backend"] == "onnxruntime" else 1.0)
        n = len(s) // 20
        if n < 3:
            continue
        blocks = np.median(s[: 20 * n].reshape(20, n), axis=1)
        out[f"{r['backend']}/{r['format']}/{r['precision']}"] = {"p50": float(np.median(s)),
                                                                 "fast": float(blocks.min())}
    return out


def fails(bases: list[dict], curs: list[dict], stat: str, threshold: float, spread: bool) -> bool:
    for lab in bases[0]:
        bv = [b[lab][stat] for b in bases if lab in b]
        cv = [c[lab][stat] for c in curs if lab in c]
        if not bv or not cv:
            continue
        med = statistics.median(bv)
        mad = statistics.median(abs(v - med) for v in bv) / med if spread and len(bv) > 1 else 0.0
        if min(cv) / min(bv) > 1 + threshold + mad:
            return True
    return False


def rate(runs: list[dict], slow: list[dict], draws: list[tuple[list[int], list[int]]], k: int, **how) -> dict:
    passed = caught = 0
    for b, rest in draws:
        for side, count_fail in ((runs, False), (slow, True)):
            curs: list[dict] = []
            for i in rest[:k]:
                curs.append(side[i])
                if not fails([runs[j] for j in b], curs, **how):
                    break
            failed = fails([runs[j] for j in b], curs, **how)
            passed += (not failed) and not count_fail
            caught += failed and count_fail
    return {"unchanged_passed": round(passed / len(draws), 3), "slow_caught": round(caught / len(draws), 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True, help="the runs' directory (r01, r02, ...); measured when absent")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    work = Path(a.work)
    for i in range(1, a.runs + 1):
        if not (work / f"r{i:02d}" / "results.json").exists():
            subprocess.run([sys.executable, "-m", "infer_compare", *COMMAND, "-o", str(work / f"r{i:02d}")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    files = sorted(work.glob("r*/results.json"))
    runs, slow = [figures(f) for f in files], [figures(f, 1.2) for f in files]
    rng = random.Random(0)
    res: dict = {"runs": len(files), "command": " ".join(sys.argv), "table": []}
    for n_base in (3, 5):
        draws = [(idx[:n_base], idx[n_base:]) for idx in (rng.sample(range(len(files)), len(files))
                                                         for _ in range(a.trials))]
        for stat in ("p50", "fast"):
            for spread in (True, False):
                for threshold in (0.10, 0.12, 0.15):
                    how = {"stat": stat, "threshold": threshold, "spread": spread}
                    row = {"baselines": n_base, **how, "by_runs": {k: rate(runs, slow, draws, k, **how)
                                                                   for k in (1, 2, 4, 6, 8)}}
                    res["table"].append(row)
                    print(json.dumps(row), flush=True)
    Path(a.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
