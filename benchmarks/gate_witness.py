"""Is the calibration workload a witness of a busy host? Over the runs a gate_quality.py benchmark kept.

For every row of unchanged code (baseline, unchanged and confirming runs, and the rows of injected runs
that the injection did not touch; rows measured under other processes' load left out): how much slower
its fastest block of 20 is than the fastest block of the baseline runs, against how much longer the
calibration workload its child timed before the loop took than the baselines' median. Prints, per band
of the workload's ratio, how many rows were more than ``--threshold`` slower.

    python benchmarks/gate_witness.py WORK/mobilenet_v2 [--threshold 0.12]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

BANDS = ((0.0, 1.1), (1.1, 1.2), (1.2, 1.3), (1.3, 1.5), (1.5, 99.0))


def fast(r: dict) -> float:
    """The row's fastest block, cut as the gate cuts it (regress/noise.py), in ms."""
    import numpy as np

    from infer_compare.regress.noise import sample_blocks

    return float(np.median(sample_blocks(r["samples_ns"]), axis=1).min())


def label(r: dict) -> str:
    return f"{r['backend']}/{r['format']}/{r['precision']}/b{r['batch_size']}"


def rows(path: Path):
    for r in json.loads(path.read_text())["rows"]:
        cal = (r.get("extra") or {}).get("calibration") or {}
        if (r["status"] == "ok" and len(r.get("samples_ns") or ()) >= 2 and cal.get("ms")
                and (cal.get("other_cores") or 0) <= 0.25):
            yield r, float(cal["ms"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("work", help="a model's directory of a gate_quality.py --work")
    ap.add_argument("--threshold", type=float, default=0.12)
    a = ap.parse_args()
    root = Path(a.work)
    base: dict[str, float] = {}
    cals = []
    for f in root.glob("baseline/*/results.json"):
        for r, cal in rows(f):
            base[label(r)] = min(base.get(label(r), float("inf")), fast(r))
            cals.append(cal)
    ref = statistics.median(cals)
    pts = []
    for f in root.glob("*/**/results.json"):
        kind = f.relative_to(root).parts[0]
        if kind.startswith(("baseline", "threads", "loaded", "killed")):
            continue
        for r, cal in rows(f):
            if label(r) in base and not (kind.startswith(("slow", "precision"))
                                         and r["backend"] == "onnxruntime"):
                pts.append((cal / ref, fast(r) / base[label(r)]))
    out = {"work": str(root), "baseline_calibration_ms": round(ref, 3), "threshold": a.threshold, "bands": []}
    for lo, hi in BANDS:
        g = [x for c, x in pts if lo <= c < hi]
        if g:
            out["bands"].append({"workload_ratio": [lo, hi], "rows": len(g),
                                 "slower_than_threshold": sum(x > 1 + a.threshold for x in g),
                                 "median_row_ratio": round(statistics.median(g), 3)})
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
