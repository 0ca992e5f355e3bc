#!/usr/bin/env python3
"""Does a row hold on a rerun? The same comparison run several times, warm, one after the other; per row,
how far its p50 moves from the runs' median, whether each run's stated interval holds that median, and
whether the verdict's lines name the same rows (or the same ties) every time.

    benchmarks/reproducibility.py --runs 5 --work /tmp/repro --out /tmp/repro.json -- --model resnet50

Everything after ``--`` is passed to ``infer-compare`` unchanged (default: ``--model resnet50``). One cold
run first (``--no-cold`` to leave it out) fills the artifact cache; it is recorded, not counted. Each run's
report stays under ``--work``/runN; the JSON is rewritten after every run, so an interrupted benchmark
keeps what it measured (``--analyze`` re-reads the folders of an earlier one without running anything).
``--hog`` starts a CPU-bound process of another user for the middle of each run (a busy machine): then
the question is whether every row measured during it says so.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

WITHIN = 0.05  # the issue's bar: within 5 % of the runs' median (batch >= LARGE: 3 %)
WITHIN_LARGE, LARGE = 0.03, 32


def row_key(r: dict[str, Any]) -> str:
    return f"{r['backend']}|{r['format']}|{r['precision']}|{r['device']}|b{r['batch_size']}"


def measured(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for r in report.get("rows", []):
        lat = r.get("latency") or {}
        if lat.get("p50_ms") is None:
            continue
        out[row_key(r)] = {"p50": lat["p50_ms"], "lo": lat.get("median_ci_low_ms"),
                           "hi": lat.get("median_ci_high_ms"), "status": r.get("status"),
                           "unstable": bool(lat.get("unstable")), "disturbed": bool(lat.get("disturbed")),
                           "windows": lat.get("windows"), "processes": lat.get("processes")}
    return out


def verdict_lines(md: str) -> list[str]:
    """The verdict's lines from results.md, numbers stripped (which rows and ties they name)."""
    import re
    lines, on = [], False
    for line in md.splitlines():
        if line.strip().lower().strip("#* ") == "verdict":
            on = True
            continue
        if on and (line.startswith("#") or line.startswith("**") or line.startswith("Latency")):
            break
        if on and line.strip().startswith(("-", "*")):
            text = re.split(r",? \(?p50 |, [0-9]| \([0-9]", line.strip().lstrip("-* "))[0]
            text = re.sub(r"\s+", " ", text)
            head, tie, rest = text.partition("tie within the noise: ")
            if tie:  # a tie names its rows by their estimates' order: the same tie in any order is the same
                text = head + tie + " | ".join(sorted(rest.split(" and ")))
            lines.append(text)
    return lines


def analyze(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = sorted({k for r in runs for k in r["rows"]})
    per_row, inside, covered, judged_cover, flagged = [], 0, 0, 0, 0
    for k in keys:
        vals = [r["rows"][k] for r in runs if k in r["rows"]]
        if len(vals) < 2:
            continue
        med = statistics.median(v["p50"] for v in vals)
        bar = WITHIN_LARGE if int(k.rsplit("|b", 1)[1]) >= LARGE else WITHIN
        devs = [v["p50"] / med - 1 for v in vals]
        ok = all(abs(d) <= bar for d in devs)
        cov = [v["lo"] is not None and v["hi"] is not None and v["lo"] <= med <= v["hi"] for v in vals]
        said = [v["unstable"] or v["disturbed"] for v in vals]
        inside += ok
        covered += sum(cov)
        judged_cover += len(cov)
        flagged += sum(1 for c, s in zip(cov, said, strict=True) if not c and s)
        per_row.append({"row": k, "median_ms": round(med, 4), "runs": len(vals),
                        "p50_ms": [round(v["p50"], 4) for v in vals],
                        "largest_over_smallest": round(max(v["p50"] for v in vals)
                                                       / min(v["p50"] for v in vals), 3),
                        "within_bar": ok, "bar": bar, "interval_holds_median": cov,
                        "unstable_or_disturbed": said,
                        "windows": [v["windows"] for v in vals], "processes": [v["processes"] for v in vals]})
    verdicts = [r["verdict"] for r in runs]
    same = all(v == verdicts[0] for v in verdicts) if verdicts else False
    n = len(per_row)
    return {"rows": n, "rows_within_bar": inside, "share_within_bar": round(inside / n, 3) if n else None,
            "intervals_holding_median": covered, "intervals": judged_cover,
            "share_intervals_holding": round(covered / judged_cover, 3) if judged_cover else None,
            "missed_but_said_unstable_or_disturbed": flagged,
            "verdict_same_in_every_run": same, "verdicts": verdicts, "per_row": per_row}


BARE_ROWS = {"eager-fp32": "pytorch|pytorch|fp32|cuda:0|b1", "eager-fp16": "pytorch|pytorch|fp16|cuda:0|b1",
             "compile-fp16": "pytorch-compile|pytorch|fp16|cuda:0|b1",
             "ort-cuda-fp32": "onnxruntime|onnx|fp32|cuda:0|b1"}


def against_bare(summary: dict[str, Any], bare: dict[str, Any]) -> dict[str, Any]:
    """Each batch-1 GPU row's 5-run median over the bare loop's (benchmarks/gpu/bare_b1.py)."""
    rows = {r["row"]: r for r in summary["per_row"]}
    out = {}
    for config, key in BARE_ROWS.items():
        loop = (bare.get("configs") or {}).get(config) or {}
        if key in rows and loop.get("median_ms"):
            out[key] = {"row_median_ms": rows[key]["median_ms"], "bare_median_ms": loop["median_ms"],
                        "ratio": round(rows[key]["median_ms"] / loop["median_ms"], 3)}
    return out


def conditions(args: list[str], code_given: str | None = None) -> dict[str, Any]:
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).parent)
    return {"machine": platform.node(), "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(), "python": platform.python_version(),
            "code": code_given or code.stdout.strip() or None, "command": ["infer-compare", *args],
            "date": time.strftime("%Y-%m-%d")}


def one_run(exe: str, args: list[str], folder: Path, hog: bool) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([exe, *args, "-o", str(folder), "--overwrite"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    hog_proc = None
    if hog:
        time.sleep(15)
        spin = "import time\nt = time.time() + 20\nwhile time.time() < t: pass"
        hog_proc = subprocess.Popen([sys.executable, "-c", spin])
    rc = proc.wait()
    if hog_proc is not None:
        hog_proc.wait()
    return {"rc": rc, "wall_s": round(time.perf_counter() - t0, 1), **read(folder)}


def read(folder: Path) -> dict[str, Any]:
    try:
        report = json.loads((folder / "results.json").read_text())
        md = (folder / "results.md").read_text()
    except (OSError, ValueError):
        return {"rows": {}, "verdict": [], "elapsed_s": None}
    return {"rows": measured(report), "verdict": verdict_lines(md), "elapsed_s": report.get("elapsed_s"),
            "environment": report.get("environment")}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--no-cold", action="store_true", help="no cold run first")
    p.add_argument("--hog", action="store_true", help="a CPU hog in the middle of each run")
    p.add_argument("--analyze", action="store_true", help="re-read --work's run folders, run nothing")
    p.add_argument("--exe", default="infer-compare")
    p.add_argument("--code", help="the commit the measured tree is (where it is no git checkout)")
    p.add_argument("--bare", type=Path, help="bare loops' JSON (benchmarks/gpu/bare_b1.py)")
    a = p.parse_args(argv[:split])
    ic_args = argv[split + 1:] or ["--model", "resnet50"]
    a.work.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"conditions": conditions(ic_args, a.code), "runs": []}
    if not a.analyze and not a.no_cold:
        cold = one_run(a.exe, ic_args, a.work / "cold", False)
        doc["cold"] = {"rc": cold["rc"], "wall_s": cold["wall_s"]}
    for i in range(1, a.runs + 1):
        folder = a.work / f"run{i}"
        run = read(folder) if a.analyze else one_run(a.exe, ic_args, folder, a.hog)
        doc["runs"].append(run)
        doc["summary"] = analyze(doc["runs"])
        if a.bare and a.bare.exists():
            bare = json.loads(a.bare.read_text())
            doc["summary"]["against_bare_loops"] = against_bare(doc["summary"], bare)
        a.out.write_text(json.dumps(doc, indent=1))
        s = doc["summary"]
        print(f"run {i}: rc={run.get('rc')} wall={run.get('wall_s')}s rows within bar {s['rows_within_bar']}"
              f"/{s['rows']}, intervals holding the median {s['intervals_holding_median']}/{s['intervals']}, "
              f"verdict same: {s['verdict_same_in_every_run']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
