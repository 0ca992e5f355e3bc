"""What an A/B gate run costs against a plain run of the same selection, and where the gate's time goes, on
the machine as it is now.

For each model: one bundle (``infer-compare export``, as benchmarks/gate_ab_quality.py makes it), then
``--rounds`` rounds, each a plain ``run BUNDLE`` and an unchanged ``gate BUNDLE BUNDLE`` in an order drawn at
random. Recorded per round: both wall times, the load average before it, the plain rows' timed calls (a plain
run's loop stops once its median is within the CI target: few calls on a quiet machine, many on a noisy one),
and the gate rows' process pairs, pairs of blocks and seconds by phase (``extra.ab.wall_s``: start, open,
load, pilot, blocks, parity, close). Saved after every round (``--out``); ``--resume`` continues. Timings
only: the verdicts' error rates are benchmarks/gate_ab_quality.py's.

    python benchmarks/gate_ab_cost.py --models mobilenet_v2,lenet5 --rounds 8 --out OUT.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate_ab_quality import SELECTION, _ic, common_options, ensure_bundle, run_models  # noqa: E402

PHASES = ("start", "open", "load", "pilot", "blocks", "parity", "close")


def _rows(path: Path) -> list[dict]:
    try:
        return [r for r in json.loads(path.read_text()).get("rows", []) if r.get("status") == "ok"]
    except (OSError, ValueError):
        return []


def plain_facts(out: Path) -> dict:
    """Each plain row's timed calls and its median's CI half-width (relative)."""
    return {f"{r['backend']}/{r['format']}":
            {"n": (r.get("loop") or {}).get("n") or len(r.get("samples_ns") or ()),
             "loop_wall_s": round(((r.get("loop") or {}).get("wall_ns") or 0) / 1e9, 3)}
            for r in _rows(out / "results.json")}


def gate_facts(out: Path) -> dict:
    """Each gate row's process pairs, pairs of blocks and seconds by phase (side B's row holds the pair's
    own)."""
    facts = {}
    for r in _rows(out / "results.json"):
        ab = (r.get("extra") or {}).get("ab") or {}
        if ab:
            facts[f"{r['backend']}/{r['format']}"] = {"replicates": ab.get("replicates"),
                                                      "pairs": ab.get("pairs"),
                                                     "calls_per_block": ab.get("calls_per_block"),
                                                     "wall_s": ab.get("wall_s") or {}}
    return facts


def one_round(bundle: Path, work: Path, rng: random.Random, extra: list[str]) -> dict:
    got: dict = {"loadavg_before": round(os.getloadavg()[0], 2)}
    kinds = ["plain", "gate"]
    rng.shuffle(kinds)
    got["order"] = kinds
    for kind in kinds:
        out = work / kind
        args = ("run", str(bundle)) if kind == "plain" else ("gate", str(bundle), str(bundle))
        code, wall, tail = _ic(*args, *SELECTION, *extra, "-o", str(out))
        got[kind] = {"exit": code, "wall_s": round(wall, 2),
                     "rows": plain_facts(out) if kind == "plain" else gate_facts(out),
                     **({"tail": tail[-1500:]} if code not in (0, 1, 3) else {})}
    got["ratio"] = (round(got["gate"]["wall_s"] / got["plain"]["wall_s"], 3) if got["plain"]["wall_s"]
                    else None)
    return got


def _median(xs: list[float]) -> float | None:
    xs = sorted(xs)
    return None if not xs else (xs[len(xs) // 2] if len(xs) % 2
                                else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2)


def summary(rounds: list[dict]) -> dict:
    """Medians over the rounds: the walls, their ratio, and the gate's seconds by phase (summed over its
    rows)."""
    plain = [r["plain"]["wall_s"] for r in rounds]
    gate = [r["gate"]["wall_s"] for r in rounds]
    phases = {p: _median([sum((f.get("wall_s") or {}).get(p, 0.0) for f in r["gate"]["rows"].values())
                          for r in rounds])
              for p in PHASES}
    calls = {}
    for r in rounds:
        for label, f in r["plain"]["rows"].items():
            calls.setdefault(label, []).append(f["n"])
    med_p, med_g = _median(plain), _median(gate)
    return {"rounds": len(rounds), "plain_wall_s_median": med_p, "gate_wall_s_median": med_g,
            "gate_over_plain": round(med_g / med_p, 3) if med_p and med_g else None,
            "per_round_ratio": [r["ratio"] for r in rounds],
            "gate_seconds_by_phase_median": {p: round(v, 2) for p, v in phases.items() if v is not None},
            "plain_timed_calls_median": {k: _median(v) for k, v in calls.items()}}


def bench_model(model: str, args, root: Path, save) -> None:
    res = save.state.setdefault(model, {"rounds": []})
    bundle = ensure_bundle(model, root)
    extra = ["--threads", str(args.threads)] if args.threads else []
    rng = random.Random(f"{model}:{args.seed}:{len(res['rounds'])}")
    for k in range(len(res["rounds"]), args.rounds):
        res["rounds"].append({"round": k, **one_round(bundle, root / model / f"round{k}", rng, extra)})
        res["summary"] = summary(res["rounds"])
        save()
        s = res["summary"]
        print(f"{model} round {k + 1}/{args.rounds}: plain {res['rounds'][-1]['plain']['wall_s']} s, gate "
              f"{res['rounds'][-1]['gate']['wall_s']} s; medians {s['plain_wall_s_median']} / "
              f"{s['gate_wall_s_median']} s = {s['gate_over_plain']}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mobilenet_v2,lenet5")
    ap.add_argument("--rounds", type=int, default=8)
    return run_models(common_options(ap).parse_args(), "gate-ab-cost-", bench_model)


if __name__ == "__main__":
    sys.exit(main())
