"""Measured quality of the regression gate: false failures on unchanged code, injected changes caught.

For each model: ``--baselines`` runs of the unchanged code (pooled, as a CI job keeps them), then
``--pairs`` rounds, each of which runs, interleaved so that the machine's load falls on all kinds alike:

* ``unchanged``: the same command again (the gate must pass);
* ``loaded``: the same command again while a neighbour keeps one core busy (a second Python process
  spinning): unchanged code on a loaded machine (the gate must pass);
* ``threads``: ``--threads 1`` instead of 2 (everything slower);
* ``precision``: ONNX Runtime's graph optimizations switched off by an injected ``sitecustomize``
  (its int8 QDQ graph then runs float kernels around Quantize/Dequantize: another precision executes);
* ``slow``: ONNX Runtime's runner made 20 % slower by an injected ``sitecustomize`` that spins after
  each call for a fifth of the call's own time (a runner regression; other backends unchanged);
* ``killed``: the run killed with SIGKILL (``kill -9`` of its process group, as an OOM killer does)
  once half of the baseline's rows are in its results.json.

A run with rows measured while other processes took CPU time (the gate does not judge their timings) is
measured again, up to ``--tries`` times, as a CI job would re-run it; the attempts are recorded.
Every run goes through the command line a user types. The verdict that counts is the CI recipe with the
defaults (``best`` timing, default rules, default ``--confirm``): the main command with ``--baseline
BASELINE_DIR``, which judges the run and, when only timings broke the rules, measures the rows that broke
them again (into RUN_DIR/confirm-K) until they pass or ``--confirm`` runs are spent (rows slower beyond a
rule only in runs on a busy host, not judged, too: counted under ``host_busy``); its verdict is read
from RUN_DIR/gate.json (the exit status also counts rows that did not run). A killed run has no verdict
of its own: ``infer-compare diff BASELINE_DIR RUN_DIR`` judges what it left (exit 0 = pass). Beside it,
each first run is judged alone by every timing (best, reference, calibrated, absolute) for comparison.
The output JSON has each run's exit status and violations, the pass and catch rates, and the spread
between runs of each row's p50 taken three ways: absolute, as a ratio to the calibration workload, and
as a ratio to the run's PyTorch fp32 row.

    python benchmarks/gate_quality.py --models lenet5,mobilenet_v2 --pairs 10 \\
        --out benchmarks/results/gate-quality-epyc-2core.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SELECTION = ["--backends", "pytorch,onnxruntime,openvino", "--precisions", "fp32,int8", "--device", "cpu",
             "-b", "1", "--min-time", "1", "--max-time", "1", "-q"]
KINDS = ("unchanged", "loaded", "threads", "precision", "slow", "killed")
PASSING = ("unchanged", "loaded")  # unchanged code: the gate must pass these
TIMINGS = ("best", "reference", "calibrated", "absolute")  # each run judged alone
RECIPE = "best+confirm"  # the CI recipe: the default gate, measuring again while only timings broke the rules
SITE = '''
import os
_kind = os.environ.get("GATE_QUALITY_INJECT", "")
if _kind:
    import time
    from infer_compare.backends.onnxruntime import run as _m
    _R = _m.OnnxRuntimeRunner
    if _kind == "slow":
        _orig_run = _R.run
        def run(self, prepared):
            t0 = time.perf_counter()
            out = _orig_run(self, prepared)
            end = t0 + 1.2 * (time.perf_counter() - t0)
            while time.perf_counter() < end:
                pass
            return out
        _R.run = run
    elif _kind == "precision":
        _orig_load = _R._load_cpu
        def _load_cpu(self, so):
            import onnxruntime as ort
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            return _orig_load(self, so)
        _R._load_cpu = _load_cpu
'''


MODEL_ARGS = {"mobilenet_v2": ["--parity-samples", "32"]}  # its PyTorch reference is 50x LeNet-5's per sample


def _cmd(model: str, out: Path, threads: int, cache: str | None, baseline: Path | None = None) -> list[str]:
    return [sys.executable, "-m", "infer_compare", "--model", model, *SELECTION, *MODEL_ARGS.get(model, []),
            "--threads", str(threads), "-o", str(out), *(["--cache-dir", cache] if cache else []),
            *(["--baseline", str(baseline)] if baseline else [])]


def _env(kind: str, site_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    if kind in ("slow", "precision"):
        env["PYTHONPATH"] = os.pathsep.join([str(site_dir), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env["GATE_QUALITY_INJECT"] = kind
    return env


def _disturbed(path: Path) -> int:
    """Rows of a results.json measured while other processes took CPU time (timings the gate cannot judge)."""
    from infer_compare.regress.judge import DISTURBED_CORES

    try:
        rows = json.loads(path.read_text())["rows"]
    except (OSError, ValueError, KeyError):
        return 0
    return sum(1 for r in rows if sum(((r.get("extra") or {}).get("calibration") or {}).get(k) or 0.0
                                      for k in ("other_cores", "steal_cores")) > DISTURBED_CORES)


def run_quiet(model: str, kind: str, out: Path, site_dir: Path, cache: str | None, half: int, tries: int,
              baseline: Path | None = None) -> dict:
    """run_once, again (up to ``tries`` times) while rows were measured under other processes' load:
    what a CI job does when the gate says it could not judge. Not for ``loaded`` (the load is the point)."""
    import shutil

    for attempt in range(1, tries + 1):
        r = run_once(model, kind, out, site_dir, cache, half, baseline)
        r["attempt"] = attempt
        n = _disturbed(out / "results.json")
        r["disturbed_rows"] = n
        if not n or kind in ("loaded", "killed") or attempt == tries:
            return r
        print(f"  {model} {kind}: {n} row(s) measured under load, measuring again", flush=True)
        shutil.rmtree(out, ignore_errors=True)
    return r


def _rows_in(path: Path) -> int:
    try:
        return len([r for r in json.loads(path.read_text())["rows"] if r["status"] != "skipped"])
    except (OSError, ValueError, KeyError):
        return 0


def run_once(model: str, kind: str, out: Path, site_dir: Path, cache: str | None, half: int,
             baseline: Path | None = None) -> dict:
    import shutil

    shutil.rmtree(out, ignore_errors=True)  # a --work used before keeps confirm-K folders a diff would pool
    cmd = _cmd(model, out, 1 if kind == "threads" else 2, cache, baseline)
    t0 = time.perf_counter()
    # the neighbour spins while its parent (this script) lives
    hog = subprocess.Popen([sys.executable, "-c", "import os\np = os.getppid()\nwhile "
                            "os.getppid() == p: pass"]) \
        if kind == "loaded" else None
    p = subprocess.Popen(cmd, env=_env(kind, site_dir), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True, text=True)
    killed_at = None
    if kind == "killed":
        while p.poll() is None:
            if _rows_in(out / "results.json") >= half:
                os.killpg(p.pid, signal.SIGKILL)
                killed_at = _rows_in(out / "results.json")
                break
            time.sleep(0.05)
    err = p.communicate()[1]
    if hog is not None:
        hog.kill()
        hog.wait()
    return {"kind": kind, "exit": p.returncode, "wall_s": round(time.perf_counter() - t0, 1),
            "killed_with_rows": killed_at,
            "stderr_tail": err.strip().splitlines()[-3:] if p.returncode else [],
            "command": " ".join(cmd[1:]) + (f"  [{kind} injected]" if kind in ("slow", "precision") else "")}


def gate_cli(base_dir: Path, current: Path) -> dict:
    """``infer-compare diff BASE CURRENT --json`` with the defaults, as a CI job runs it (its exit status)."""
    cmd = [sys.executable, "-m", "infer_compare", "diff", str(base_dir), str(current), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    out: dict = {"exit": p.returncode, "passed": p.returncode == 0}
    try:
        js = json.loads(p.stdout)
        out["violations"] = js["violations"]
        out["rows_compared"] = js["rows_compared"]
        out["timings_not_judged"] = js["timings_not_judged"]
        out["host_busy"] = js.get("host_busy", [])
        out["timing_only"] = js["timing_only"]
        out["n_currents"] = js["n_currents"]
    except ValueError:
        out["error"] = p.stderr.strip().splitlines()[-1:] if p.stderr.strip() else []
    return out


def gate(base_dir: Path, results: Path, timing: str) -> dict:
    from infer_compare.base.errors import UsageError
    from infer_compare.regress import check_regression

    try:
        r = check_regression(results, base_dir, timing=timing)
    except UsageError as e:
        return {"exit": 2, "passed": False, "error": [str(e)]}
    return {"exit": 1 if not r.passed else 3 if r.unjudged else 0, "passed": r.passed,
            "violations": list(r.violations), "rows_compared": len(r.matched),
            "timings_not_judged": list(r.disturbed), "host_busy": list(r.busy)}


def recipe(base_dir: Path, out: Path) -> dict:
    """The CI recipe's verdict: the main command's own (RUN_DIR/gate.json, written after its confirming
    runs); for a run that left none (killed), ``diff`` on what it left."""
    try:
        js = json.loads((out / "gate.json").read_text())
    except (OSError, ValueError):
        return {**gate_cli(base_dir, out / "results.json"), "confirm_runs": 0}
    return {"exit": 1 if not js["passed"] else 3 if js.get("unjudged") else 0, "passed": js["passed"],
            "violations": js["violations"],
            "rows_compared": js["rows_compared"], "timings_not_judged": js["timings_not_judged"],
            "host_busy": js.get("host_busy", []),
            "passed_once_normalized": js.get("passed_once_normalized", []),
            "timing_only": js["timing_only"], "n_currents": js["n_currents"],
            "confirm_runs": js["n_currents"] - 1}


def _p50(r: dict) -> float | None:
    return (r.get("latency") or {}).get("p50_ms") if r["status"] == "ok" else None


def spreads(files: list[Path]) -> dict:
    """Per row: (max / min - 1) over runs of unchanged code of p50 absolute, over the calibration
    workload, and over the run's PyTorch fp32 row of the same batch."""
    per: dict[str, dict[str, list[float]]] = {}
    for f in files:
        rows = json.loads(f.read_text())["rows"]
        ref = {r["batch_size"]: _p50(r) for r in rows if r["backend"] == "pytorch"
               and r["precision"] == "fp32"}
        for r in rows:
            v = _p50(r)
            if v is None:
                continue
            lab = f"{r['backend']}/{r['format']}/{r['precision']}/b{r['batch_size']}"
            d = per.setdefault(lab, {"absolute": [], "calibrated": [], "reference": []})
            d["absolute"].append(v)
            cal = (r.get("extra") or {}).get("calibration", {}).get("ms")
            if cal:
                d["calibrated"].append(v / cal)
            if ref.get(r["batch_size"]) and not (r["backend"] == "pytorch" and r["precision"] == "fp32"):
                d["reference"].append(v / ref[r["batch_size"]])
    return {lab: {k: round(max(v) / min(v) - 1, 4) for k, v in d.items() if len(v) > 1}
            for lab, d in per.items()}


# What counts as catching each injected change: a violation that names the changed row and the right rule
# (a failure on another row is a false failure, not a catch), and whether that is a timing or a metadata
# catch.
EXPECTED = {
    "slow": ("timing", lambda v: v.startswith("onnxruntime/") and (": p50 " in v or ": throughput " in v)),
    "precision": ("metadata", lambda v: v.startswith("onnxruntime/") and "executed precision" in v),
    "threads": ("metadata", lambda v: "measured under other conditions: threads" in v),
    "killed": ("metadata", lambda v: "was ok, now" in v),
}


def _caught(kind: str, g: dict) -> bool:
    if kind == "killed" and g.get("exit") == 2:  # an incomplete run refused: the kill was seen
        return True
    return any(EXPECTED[kind][1](v) for v in g.get("violations") or [])


def _rates(outcomes: list[dict], kinds: tuple[str, ...]) -> dict:
    rates: dict = {}
    for t in (RECIPE, *TIMINGS):
        for kind in kinds:
            got = [o["gate"][t] for o in outcomes if o["kind"] == kind]
            r = {"n": len(got), "not_judged": sum(g.get("exit") == 3 for g in got),
                 "host_busy": sum(bool(g.get("host_busy")) for g in got)}
            if kind in PASSING:  # a pass is exit 0: rows not judged (exit 3) are no pass
                r["passed"] = sum(g.get("exit") == 0 for g in got)
            else:
                r["caught_" + EXPECTED[kind][0]] = sum(_caught(kind, g) for g in got)
                r["failed_on_something_else"] = sum(g.get("exit") == 1 and not _caught(kind, g) for g in got)
            rates.setdefault(t, {})[kind] = r
    return rates


def bench_model(model: str, pairs: int, n_base: int, root: Path, site_dir: Path, cache: str | None,
                kinds: tuple[str, ...], regate: bool = False, tries: int = 3, save=None) -> dict:
    """The runs (or, with ``regate``, the runs kept in ``root`` by an earlier call), each gated several
    ways; ``save(partial)`` after every round, so that a benchmark stopped early keeps its complete rounds."""
    base_dir = root / model / "baseline"
    for i in range(n_base if not regate else 0):
        r = run_quiet(model, "unchanged", base_dir / f"run{i}", site_dir, cache, 0, tries)
        print(f"{model} baseline {i}: exit {r['exit']} in {r['wall_s']} s", flush=True)
    half = max(1, _rows_in(base_dir / "run0" / "results.json") // 2)
    outcomes = []
    for i in range(pairs):
        for kind in kinds:
            out = root / model / f"{kind}{i}"
            saved = root / model / f"{kind}{i}.run.json"
            if regate:
                r = json.loads(saved.read_text())
            else:
                r = run_quiet(model, kind, out, site_dir, cache, half, tries, base_dir)
                saved.write_text(json.dumps(r))
            r["gate"] = {t: gate(base_dir, out / "results.json", t) for t in TIMINGS}
            r["gate"][RECIPE] = recipe(base_dir, out) if not regate else gate_cli(base_dir, out)
            outcomes.append(r)
            print(f"{model} {kind} {i}: run exit {r['exit']}; gate " + ", ".join(
                f"{t} {'pass' if g['passed'] else 'FAIL'}" for t, g in r["gate"].items()), flush=True)
            for t, g in r["gate"].items():
                for v in (g.get("violations") or g.get("error") or [])[:2]:
                    print(f"    {t}: {v[:150]}", flush=True)
        if save is not None:
            save({"rates": _rates(outcomes, kinds), "outcomes": outcomes, "rounds_done": i + 1,
                  "baseline_runs": n_base})
    rates = _rates(outcomes, kinds)
    files = sorted(base_dir.glob("run*/results.json")) + [root / model / f"{k}{i}" / "results.json"
                                                          for i in range(pairs) for k in PASSING]
    return {"rates": rates, "outcomes": outcomes,
            "spread_unchanged_p50": spreads([f for f in files if f.exists()]),
            "baseline_runs": n_base, "rounds_done": pairs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="lenet5,mobilenet_v2")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--baselines", type=int, default=5)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--cache-dir")
    ap.add_argument("--work", help="keep the runs here (default: a temporary directory)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--regate", action="store_true", help="judge the runs kept in --work again (no new runs)")
    ap.add_argument("--tries", type=int, default=3, help="measure a run again while other processes "
                    "disturbed it")
    a = ap.parse_args()
    if a.regate and not a.work:
        ap.error("--regate needs --work (the directory of an earlier run)")
    root = Path(a.work or tempfile.mkdtemp(prefix="gate-quality-"))
    site_dir = root / "inject"
    site_dir.mkdir(parents=True, exist_ok=True)
    (site_dir / "sitecustomize.py").write_text(SITE)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from infer_compare.host import env as envmod

    e = envmod.collect()
    res = {"machine": {"cpu": e.cpu_model, "cores_logical": e.cores_logical, "libraries": e.libraries},
           "selection": " ".join(SELECTION), "model_args": MODEL_ARGS, "threads": 2, "rules": "the defaults",
           "command": " ".join(sys.argv), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "models": {}}
    for model in a.models.split(","):
        def save(partial: dict, model: str = model) -> None:
            res["models"][model] = partial
            Path(a.out).write_text(json.dumps(res, indent=1))

        save(bench_model(model, a.pairs, a.baselines, root, site_dir, a.cache_dir, tuple(a.kinds.split(",")),
                         a.regate, a.tries, save))
        print(json.dumps({model: res["models"][model]["rates"]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
