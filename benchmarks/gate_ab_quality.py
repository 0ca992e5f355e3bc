"""Measured quality of the A/B gate (``infer-compare gate A B``) and, beside it, of the cross-run gate.

For each model: one bundle (``infer-compare export``), then ``--pairs`` rounds. Each round runs, in an order
drawn at random:

* ``unchanged``: ``gate BUNDLE BUNDLE`` (the gate must pass: exit 0);
* ``slow5``, ``slow10``, ``slow20``: the same with side B's processes made slower for one runtime's row only
  (an injected ``sitecustomize`` that spins after each call of that runner for 5, 10 or 20 % of the call's own
  time, in side B's processes only: both sides under one interpreter, as a gate without ``--python-b``; the
  runtime changes from round to round: onnxruntime, openvino, pytorch, in turn);
* ``plain``: ``run BUNDLE`` of the same selection, once: the wall time a gate run is compared with;
* a gate run whose only unjudged rows were "disturbed" is run again (RETRIES_DISTURBED, counted);
* ``cross``: the cross-run gate measured the same way: ``run`` of the bundle with the injection of the round's
  ``slow10`` into its own folder, judged by ``diff`` against the ``--baselines`` plain runs made first (exit 0
  pass, 1 regression, 3 not judged).

A change counts as caught only when a violation names the changed row and the p50 rule; a failure on another
row counts as a false failure. Saved after every gate run (``--out``), resumable (``--resume``). The figures
are the conditions of the run: the machine, the threads, the selection below.

    python benchmarks/gate_ab_quality.py --models lenet5,mobilenet_v2 --pairs 20 \\
        --out benchmarks/results/gate-ab-quality-<machine>.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SELECTION = ["--backends", "pytorch,onnxruntime,openvino", "--formats", "pytorch,onnx,openvino",
             "--precisions", "fp32", "--device", "cpu", "-b", "1", "-q"]
KINDS = ("unchanged", "slow5", "slow10", "slow20")
SLOW = {"slow5": 0.05, "slow10": 0.10, "slow20": 0.20}
# a gate run whose only unjudged rows were disturbed (other processes took CPU time while they were timed) is
# run again, whole, at most this many times: the decision depends on the machine's load, never on the verdict;
# each repeat is recorded with the run (disturbed_runs_repeated) and counted in the rates
RETRIES_DISTURBED = 2
TARGETS = {"onnxruntime": ("onnxruntime.run", "OnnxRuntimeRunner", "onnxruntime/onnx/fp32/cpu/b1"),
           "openvino": ("openvino.run", "OpenVinoRunner", "openvino/openvino/fp32/cpu/b1"),
           "pytorch": ("pytorch.run", "PyTorchRunner", "pytorch/pytorch/fp32/cpu/b1")}
# the injection, a sitecustomize on the path of the gate and of both sides' processes (one interpreter: both
# sides' children come from one fork server, as in a user's gate without --python-b): the named runner's calls
# made ``1 + k`` times as long by a busy wait, in side B's processes only (a child whose arguments name a
# side-B spec, measure/ab.py's "<tag>-b.spec.json"); a side-A process puts the runner's own method back at its
# first call, so A runs unwrapped. GATE_AB_INJECT_ALL=1: in every process (a plain run, for the cross-run
# gate). The side is decided at a process's first call: at 7c8688b-35683cb it was looked up in sys.argv at
# every call, about 1-2 us, which made LeNet-5's 30-50 us calls slower by several per cent more than the
# injection said (the rows' estimates show it: +10.7 % for "+5 %"); MobileNet v2's calls (4-25 ms) did not
# notice.
SITE = '''
import os, sys, time
_t = os.environ.get("GATE_AB_INJECT", "")
if _t:
    import importlib
    _mod, _cls, _f = _t.split(":")
    _R = getattr(importlib.import_module("infer_compare.backends." + _mod), _cls)
    _orig, _k = _R.run, float(_f)
    _all = os.environ.get("GATE_AB_INJECT_ALL") == "1"
    _side = []
    def run(self, prepared):
        if not _side:  # decided at the first call: the side is the process's (later calls pay nothing for it)
            _side.append(_all or any(str(a).endswith("-b.spec.json") for a in sys.argv))
            if not _side[0]:
                _R.run = _orig
                return _orig(self, prepared)
        t0 = time.perf_counter()
        out = _orig(self, prepared)
        end = t0 + (1 + _k) * (time.perf_counter() - t0)
        while time.perf_counter() < end:
            pass
        return out
    _R.run = run
'''


def _site(root: Path) -> Path:
    """The folder of the injecting sitecustomize."""
    site = root / "site"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(SITE)
    return site


PAUSE = Path(os.environ.get("GATE_AB_PAUSE", "/nonexistent"))


def _wait_while_paused() -> None:
    """Between runs only: while the folder GATE_AB_PAUSE holds a file, wait, with ``PAUSE/../paused`` present
    (other work on the machine waits for that file, then runs between gate runs, never inside one)."""
    ack = PAUSE.parent / "paused"
    while PAUSE.is_dir() and any(PAUSE.iterdir()):
        ack.touch()
        time.sleep(1)
    ack.unlink(missing_ok=True)


def _ic(*args: str, env: dict | None = None, timeout: int = 1800) -> tuple[int, float, str]:
    _wait_while_paused()
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "infer_compare", *args], capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, **(env or {}), "COLUMNS": "200"})
    return r.returncode, time.perf_counter() - t0, (r.stdout + r.stderr)[-4000:]


def _judged(gate_json: Path, changed: str | None) -> dict:
    g = json.loads(gate_json.read_text()) if gate_json.exists() else {}
    viol = g.get("violations") or []
    rows = {}
    for r in g.get("rows") or []:
        for c in r.get("checks") or []:
            if c.get("rule", "").startswith("p50") and c.get("change") is not None:
                rows[r["label"]] = {"change": c["change"], "ci": c.get("ci"), "verdict": c.get("verdict"),
                                    "message": c.get("message", "")}
    caught = bool(changed) and any(v.startswith(f"{changed}: p50") for v in viol)
    other = [v for v in viol if not (changed and v.startswith(f"{changed}: p50"))]
    return {"violations": viol, "caught": caught, "false_failures": other,
            "unjudged": g.get("unjudged") or [], "rows": rows}


def gate_round(model: str, bundle: Path, kind: str, target: str, work: Path, site: Path,
               extra: list[str]) -> dict:
    out = work / f"{kind}"
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))}
    changed = None
    if kind in SLOW:
        mod, cls, changed = TARGETS[target]
        env["GATE_AB_INJECT"] = f"{mod}:{cls}:{SLOW[kind]}"
    disturbed = []
    for _ in range(1 + RETRIES_DISTURBED):
        code, wall, tail = _ic("gate", str(bundle), str(bundle), *SELECTION, *extra, "-o", str(out), env=env)
        judged = _judged(out / "gate.json", changed)
        if not (code == 3 and judged["unjudged"] and all(" disturbed: " in u for u in judged["unjudged"])):
            break
        disturbed.append(judged["unjudged"])
    return {"kind": kind, "target": target if kind in SLOW else None, "exit": code, "wall_s": round(wall, 1),
            **judged, "disturbed_runs_repeated": disturbed,
            **({"tail": tail} if code not in (0, 1, 3) else {})}


def cross_round(bundle: Path, target: str, work: Path, bases: list[Path], extra: list[str],
                site: Path) -> dict:
    """The round's +10 % change judged the cross-run way: a plain run of the changed code, then ``diff``."""
    mod, cls, changed = TARGETS[target]
    out = work / "cross"
    _ic("run", str(bundle), *SELECTION, *extra, "-o", str(out),
        env={"GATE_AB_INJECT": f"{mod}:{cls}:0.10", "GATE_AB_INJECT_ALL": "1",
             "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))})
    r = subprocess.run([sys.executable, "-m", "infer_compare", "diff", *map(str, bases),
                        str(out / "results.json"), "--json"], capture_output=True, text=True)
    (out / "gate.json").write_text(r.stdout if r.stdout.strip().startswith("{") else "{}")
    return {"kind": "cross10", "target": target, "exit": r.returncode, **_judged(out / "gate.json", changed)}


def _rates(outcomes: list[dict]) -> dict:
    out = {}
    for kind in (*KINDS, "cross10"):
        xs = [o for o in outcomes if o["kind"] == kind]
        if not xs:
            continue
        if kind == "unchanged":
            out[kind] = {"n": len(xs), "passed": sum(o["exit"] == 0 for o in xs),
                         "false_failures": sum(o["exit"] == 1 for o in xs),
                         "not_judged": sum(o["exit"] == 3 for o in xs)}
        else:
            out[kind] = {"n": len(xs), "caught_on_changed_row": sum(o["caught"] for o in xs),
                         "false_failures_other_rows": sum(bool(o["false_failures"]) for o in xs),
                         "not_judged": sum(o["exit"] == 3 for o in xs)}
        out[kind]["disturbed_runs_repeated"] = sum(len(o.get("disturbed_runs_repeated") or ()) for o in xs)
    return out


def _mdc(outcomes: list[dict]) -> dict:
    """Per row, the detectable change the unchanged rounds printed (median over them)."""
    per: dict[str, list[float]] = {}
    for o in outcomes:
        if o["kind"] != "unchanged":
            continue
        for label, r in o["rows"].items():
            m = r["message"].split("sees a change of ")[-1].split(" %")[0]
            try:
                per.setdefault(label, []).append(float(m))
            except ValueError:
                pass
    return {k: sorted(v)[len(v) // 2] for k, v in per.items()}


def ensure_bundle(model: str, root: Path) -> Path:
    """``root/MODEL-bundle``: ``infer-compare export`` of the model's PyTorch, ONNX and OpenVINO fp32 files,
    made once."""
    bundle = root / f"{model}-bundle"
    if not (bundle / "manifest.json").exists():
        code, _, tail = _ic("export", "--model", model, "--formats", "pytorch,onnx,openvino", "--precisions",
                            "fp32", "-o", str(bundle), "-q")
        if code:
            raise SystemExit(f"export of {model} failed: {tail}")
    return bundle


def bench_model(model: str, args, root: Path, save) -> dict:
    res = save.state.setdefault(model, {"outcomes": [], "plain_wall_s": []})
    bundle = ensure_bundle(model, root)
    site = _site(root)
    extra = ["--threads", str(args.threads)] if args.threads else []
    bases = []
    for i in range(args.baselines):
        b = root / f"{model}-base{i}"
        if not (b / "results.json").exists():
            _ic("run", str(bundle), *SELECTION, *extra, "-o", str(b))
        bases.append(b / "results.json")
    rng = random.Random(f"{model}:{args.seed}")
    for k in range(len(res["plain_wall_s"]), args.pairs):
        target = sorted(TARGETS)[k % len(TARGETS)]
        work = root / model / f"round{k}"
        kinds = list(KINDS) + ["plain", "cross"]
        rng.shuffle(kinds)
        for kind in kinds:
            if kind == "plain":
                _, wall, _ = _ic("run", str(bundle), *SELECTION, *extra, "-o", str(work / "plain"))
                res["plain_wall_s"].append(round(wall, 1))
            elif kind == "cross":
                res["outcomes"].append({"round": k, **cross_round(bundle, target, work, bases, extra, site)})
            else:
                res["outcomes"].append({"round": k,
                                        **gate_round(model, bundle, kind, target, work, site, extra)})
            res["rates"], res["mdc_percent"] = _rates(res["outcomes"]), _mdc(res["outcomes"])
            gates = [o["wall_s"] for o in res["outcomes"] if o["kind"] in KINDS]
            if gates and res["plain_wall_s"]:
                res["gate_over_plain_wall"] = round(
                    sorted(gates)[len(gates) // 2]
                    / sorted(res["plain_wall_s"])[len(res["plain_wall_s"]) // 2], 2)
            save()
        print(f"{model} round {k + 1}/{args.pairs}: {json.dumps(res['rates'])}", flush=True)
    return res


def _code() -> str:
    """The commit of infer-compare that this benchmark measures (the checkout it runs from)."""
    r = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "describe", "--always", "--dirty"],
                       capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


class _Saver:
    def __init__(self, path: Path, state: dict):
        self.path, self.state = path, state

    def __call__(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=1))
        tmp.replace(self.path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="lenet5,mobilenet_v2")
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--baselines", type=int, default=3, help="plain runs stored for the cross-run gate")
    return run_models(common_options(ap).parse_args(), "gate-ab-quality-", bench_model)


def common_options(ap: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options every gate benchmark takes: threads, seed, work folder, output, resume."""
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default="", help="working folder (kept: bundles, runs); default a fresh "
                    "temporary one")
    ap.add_argument("--out", required=True)
    ap.add_argument("--resume", action="store_true", help="continue the rounds already in --out")
    return ap


def run_models(args, prefix: str, bench) -> int:
    """``bench(model, args, root, save)`` for each of ``--models``, saving after each round and at the end."""
    root, save = open_state(args, prefix)
    for model in args.models.split(","):
        bench(model, args, root, save)
    save()
    return 0


def open_state(args, prefix: str) -> tuple[Path, _Saver]:
    """The work folder and the saver of ``--out`` (continued with ``--resume``), its conditions recorded once:
    the machine, the selection, the threads, the command and the code measured."""
    out = Path(args.out)
    state = json.loads(out.read_text()) if args.resume and out.exists() else {}
    state.setdefault("conditions", {"machine": platform.processor() or platform.machine(),
                                    "cpus": os.cpu_count(), "python": platform.python_version(),
                                    "selection": SELECTION, "threads": args.threads or "default",
                                    "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                    "command": " ".join(sys.argv), "code": _code()})
    root = Path(args.work or state.get("work") or tempfile.mkdtemp(prefix=prefix))
    state["work"] = str(root)
    return root, _Saver(out, state)


if __name__ == "__main__":
    sys.exit(main())
