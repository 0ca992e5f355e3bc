"""Measured quality of the A/B gate (``infer-compare gate A B``), each gate run scored as a CI job gets it:
its exit status (0 pass, 1 regression, 3 not judged) as printed, once.

For each model: a bundle (``infer-compare export``: PyTorch, ONNX and OpenVINO fp32; for ``unchanged18`` a
second one with int8 too), then ``--rounds`` rounds, each running the ``--kinds`` in a seeded random order:

* ``unchanged``: ``gate BUNDLE BUNDLE`` under one interpreter (no ``--python-b``): the gate must pass;
* ``unchanged2``: the same with side B under its own interpreter (``--python-b``: a wrapper that execs this
  interpreter, nothing injected): the baseline of the changed kinds, which run that way;
* ``slow5``, ``slow10``, ``slow20``: side B's calls of one runtime made 5, 10 or 20 % slower (a busy wait
  after each call), default rules (p50:+5 %); the runtime goes onnxruntime, openvino, pytorch, round by round;
* ``stall99``: 5 % of B's calls of that runtime made 3 times as long (a seeded RNG), the p50 about unchanged,
  judged with ``--fail-on p50:+5% --fail-on p99:+10%``: caught when the changed row fails its p99 rule (a
  gate that refuses or does not judge p99 shows so in the exit and the unjudged lines);
* ``unchanged18``: unchanged, one interpreter, 18 rows: PyTorch fp32 (the CPU's only PyTorch precision), ONNX
  Runtime fp32 and int8, OpenVINO fp32, int8 and the ONNX int8 file (its second int8 route), at batch 1, 8
  and 32; the timing checks it judged are counted;
* ``plain``: ``run BUNDLE`` of the default selection, once: the wall time a gate run is compared with;
* ``cross10`` (only when named): the cross-run gate: a plain run with the round's +10 % in every process,
  judged by ``diff`` against ``--baselines`` plain runs.

``--inject runtime`` (the default) slows the runtime library's own call in side B's interpreter only,
``--inject runner`` the project's runner class (the older injection, one interpreter): gate_ab_injection.py
says how. Caught: a violation names the changed row and the kind's rule (p50; p99 for stall99); any other
violation is a false failure. No run is repeated unless ``--rerun-disturbed N`` (recorded in the
conditions): a run whose only unjudged rows were "disturbed" is run again up to N times, its repeats beside
it; the rates count the first run (``after_reruns``: the last repeat's).

Per gate run (``outcomes``): kind, model, target, exit, violations, unjudged lines, each check's estimate, CI
and verdict (gate.json rows[].checks[]), timing checks judged, gate.json's "method", wall time, the code
(commit, dirty flag, a digest of the uncommitted change), machine, interpreters. Rates per kind with Wilson
95 % intervals. Saved after every gate run (atomic replace), resumable (``--resume``). The figures are the
conditions of the run: the machine, its load, the threads, the selection.

    python benchmarks/gate_ab_quality.py --models lenet5,mobilenet_v2 --rounds 20 \\
        --out benchmarks/results/gate-ab-quality-<machine>-<commit>.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gate_ab_injection as inj  # noqa: E402
from gate_ab_scoring import KINDS, mdc, rates, score  # noqa: E402

SELECTION = ["--backends", "pytorch,onnxruntime,openvino", "--formats", "pytorch,onnx,openvino",
             "--precisions", "fp32", "--device", "cpu", "-b", "1", "-q"]
SELECTION18 = ["--backends", "pytorch,onnxruntime,openvino", "--formats", "pytorch,onnx,openvino",
               "--precisions", "fp32,int8", "--device", "cpu", "-b", "1,8,32", "-q"]
DEFAULT_KINDS = (*KINDS, "plain")
CHANGED = (*inj.SLOW, "stall99")
RULES = {"stall99": ["--fail-on", "p50:+5%", "--fail-on", "p99:+10%"]}
CAUGHT_BY = {"stall99": "p99"}  # the rule a kind's change must break to count as caught (else p50)
# the verdicts of a check that was judged (regress/results.py): every other verdict is a timing not judged


def _ic(*args: str, env: dict | None = None, timeout: int = 1800, python: str | None = None
        ) -> tuple[int, float, str]:
    """``infer-compare ARGS`` (under ``python``, default this interpreter): exit status (124: killed at
    ``timeout``), wall seconds, the output's tail."""
    _wait_while_paused()
    t0 = time.perf_counter()
    try:
        r = subprocess.run([python or sys.executable, "-m", "infer_compare", *args], capture_output=True,
                           text=True, timeout=timeout, env={**os.environ, **(env or {}), "COLUMNS": "200"})
        code, tail = r.returncode, (r.stdout + r.stderr)[-4000:]
    except subprocess.TimeoutExpired as e:
        code, tail = 124, f"killed after {timeout} s: {str(e.stdout or '')[-2000:]}"
    return code, time.perf_counter() - t0, tail


PAUSE = Path(os.environ.get("GATE_AB_PAUSE", "/nonexistent"))


def _wait_while_paused() -> None:
    """Between runs only: while the folder GATE_AB_PAUSE holds a file, wait, with ``PAUSE/../paused`` present
    (other work on the machine waits for that file, then runs between gate runs, never inside one)."""
    ack = PAUSE.parent / "paused"
    while PAUSE.is_dir() and any(PAUSE.iterdir()):
        ack.touch()
        time.sleep(1)
    ack.unlink(missing_ok=True)


def _only_disturbed(code: int, s: dict) -> bool:
    """Not judged only because other processes took CPU time (regress/results.py's unjudged lines)."""
    return code == 3 and bool(s["unjudged"]) and all(" disturbed: " in u for u in s["unjudged"])


def gate_run(ctx: dict, kind: str, target: str, work: Path, round_: int) -> dict:
    """One gate run of ``kind``, scored as printed; with ``--rerun-disturbed``, its repeats beside it."""
    out = work / kind
    changed = inj.TARGETS[target]["row"] if kind in CHANGED else None
    metric = CAUGHT_BY.get(kind, "p50")
    side = inj.side_for(kind, ctx["inject"] if changed else None, ctx["root"], out, target,
                        f"{ctx['seed']}:{round_}")
    if side is None:
        return {"kind": kind, "target": target, "exit": None,
                "skipped": f"--inject {ctx['inject']} has no {kind}"}
    bundle, sel = (ctx["bundle18"], SELECTION18) if kind == "unchanged18" else (ctx["bundle"], SELECTION)
    cmd = ["gate", str(bundle), str(bundle), *sel, *ctx["extra"], *RULES.get(kind, []),
           *(["--python-b", side["python_b"]] if side["python_b"] else [])]
    code, wall, tail = _ic(*cmd, "-o", str(out), env=side["env"], timeout=ctx["timeout"])
    s = score(out / "gate.json", changed, metric)
    rec = {"kind": kind, "model": ctx["model"], "target": target if changed else None, "changed_row": changed,
           "caught_by": metric if changed else None, "exit": code, "wall_s": round(wall, 1), **s,
           "interpreter": side["interpreter"], "injection": side["injection"],
           "processes_slowed": inj.slowed_processes(side), "code": code_state(), "machine": MACHINE,
           "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           **({"tail": tail} if code not in (0, 1, 3) else {})}
    reruns = []
    while _only_disturbed(code, s) and len(reruns) < ctx["rerun_disturbed"]:
        o2 = work / f"{kind}-rerun{len(reruns) + 1}"
        code, wall, _ = _ic(*cmd, "-o", str(o2), env=side["env"], timeout=ctx["timeout"])
        s = score(o2 / "gate.json", changed, metric)
        reruns.append({"exit": code, "wall_s": round(wall, 1), "caught": s["caught"],
                       "false_failures": s["false_failures"], "unjudged": s["unjudged"]})
    if reruns:
        rec["reruns"] = reruns
    return rec


def cross_run(ctx: dict, target: str, work: Path) -> dict:
    """The round's +10 % change judged the cross-run way: a plain run of the changed code (every process
    slowed), then ``diff`` against the stored plain runs."""
    out = work / "cross10"
    changed = inj.TARGETS[target]["row"]
    side = inj.side_for("slow10", ctx["inject"], ctx["root"], out, target, "")
    _ic("run", str(ctx["bundle"]), *SELECTION, *ctx["extra"], "-o", str(out), python=side["python_b"],
        env={**side["env"], "GATE_AB_INJECT_ALL": "1"})  # the runner injection: in every process
    r = subprocess.run([sys.executable, "-m", "infer_compare", "diff", *map(str, ctx["bases"]),
                        str(out / "results.json"), "--json"], capture_output=True, text=True)
    (out / "gate.json").write_text(r.stdout if r.stdout.strip().startswith("{") else "{}")
    return {"kind": "cross10", "model": ctx["model"], "target": target, "changed_row": changed,
            "exit": r.returncode, **score(out / "gate.json", changed, "p50"), "injection": side["injection"],
            "processes_slowed": inj.slowed_processes(side), "code": code_state()}


def ensure_bundle(model: str, root: Path, precisions: str = "fp32") -> Path:
    """``root/MODEL-bundle`` (``-PRECISIONS`` beyond fp32): ``infer-compare export`` of the model's PyTorch,
    ONNX and OpenVINO files, made once."""
    bundle = root / (f"{model}-bundle" + ("" if precisions == "fp32" else f"-{precisions.replace(',', '-')}"))
    if not (bundle / "manifest.json").exists():
        code, _, tail = _ic("export", "--model", model, "--formats", "pytorch,onnx,openvino", "--precisions",
                            precisions, "-o", str(bundle), "-q")
        if code:
            raise SystemExit(f"export of {model} failed: {tail}")
    return bundle


def _context(model: str, args, root: Path, kinds: list[str]) -> dict:
    """What every run of the model needs: bundles, threads, the stored plain runs of the cross-run gate."""
    ctx = {"model": model, "root": root, "bundle": ensure_bundle(model, root), "seed": args.seed,
           "extra": ["--threads", str(args.threads)] if args.threads else [], "inject": args.inject,
           "rerun_disturbed": args.rerun_disturbed, "timeout": args.timeout, "bases": []}
    if "unchanged18" in kinds:
        ctx["bundle18"] = ensure_bundle(model, root, "fp32,int8")
    for i in range(args.baselines if "cross10" in kinds else 0):
        b = root / f"{model}-base{i}"
        if not (b / "results.json").exists():
            _ic("run", str(ctx["bundle"]), *SELECTION, *ctx["extra"], "-o", str(b))
        ctx["bases"].append(b / "results.json")
    return ctx


def _summarize(res: dict) -> None:
    res["rates"], res["mdc_percent"] = rates(res["outcomes"]), mdc(res["outcomes"])
    gates = sorted(o["wall_s"] for o in res["outcomes"] if o["kind"] in ("unchanged", "unchanged2"))
    plain = sorted(o["wall_s"] for o in res["outcomes"] if o["kind"] == "plain")
    if gates and plain:
        res["gate_over_plain_wall"] = round(gates[len(gates) // 2] / plain[len(plain) // 2], 2)


def bench_model(model: str, args, root: Path, save) -> dict:
    res = save.state.setdefault(model, {"outcomes": []})
    kinds = args.kinds.split(",")
    ctx = _context(model, args, root, kinds)
    done = {(o["round"], o["kind"]) for o in res["outcomes"]}
    for k in range(args.rounds):
        target = sorted(inj.TARGETS)[k % len(inj.TARGETS)]
        work = root / model / f"round{k}"
        order = list(kinds)
        random.Random(f"{model}:{args.seed}:{k}").shuffle(order)
        for kind in (x for x in order if (k, x) not in done):
            if kind == "plain":
                _, wall, _ = _ic("run", str(ctx["bundle"]), *SELECTION, *ctx["extra"], "-o",
                                 str(work / "plain"))
                rec = {"kind": "plain", "model": model, "wall_s": round(wall, 1)}
            elif kind == "cross10":
                rec = cross_run(ctx, target, work)
            else:
                rec = gate_run(ctx, kind, target, work, k)
            res["outcomes"].append({"round": k, **rec})
            _summarize(res)
            save()
            print(f"{model} round {k + 1}/{args.rounds} {kind}: exit {rec.get('exit')} in {rec['wall_s']} s"
                  if "wall_s" in rec else f"{model} round {k + 1} {kind}: exit {rec.get('exit')}", flush=True)
    return res


def _git(*args: str) -> str:
    r = subprocess.run(["git", "-C", str(Path(__file__).resolve().parents[1]), *args], capture_output=True,
                       text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def code_state() -> dict:
    """The code this gate run measured: the commit, whether the checkout's code differs from it, and a digest
    of that difference (tracked changes and untracked files under infer_compare/), which tells two runs of
    different uncommitted code apart (other work may change the checkout during a long run)."""
    top = Path(__file__).resolve().parents[1]
    diff = _git("diff", "HEAD", "--", "infer_compare")
    new = _git("ls-files", "--others", "--exclude-standard", "--", "infer_compare").splitlines()
    h = hashlib.sha256(diff.encode())
    for name in new:
        f = top / name
        h.update(name.encode() + (f.read_bytes() if f.is_file() else b""))
    dirty = bool(diff or new)
    return {"commit": _git("rev-parse", "--short", "HEAD") or "unknown", "dirty": dirty,
            **({"dirty_digest": h.hexdigest()[:12]} if dirty else {})}


def _code() -> str:
    """The commit of infer-compare that this benchmark measures (the checkout it runs from)."""
    return _git("describe", "--always", "--dirty") or "unknown"


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(x.split(":", 1)[1].strip() for x in lines if x.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


MACHINE = {"platform": platform.platform(), "cpu": _cpu_model(), "cpus": os.cpu_count()}


class _Saver:
    def __init__(self, path: Path, state: dict):
        self.path, self.state = path, state

    def __call__(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.state, indent=1))
        tmp.replace(self.path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="lenet5,mobilenet_v2")
    ap.add_argument("--rounds", type=int, default=20, help="gate runs per kind and model (default 20)")
    ap.add_argument("--kinds", default=",".join(DEFAULT_KINDS),
                    help=f"comma-separated, of {', '.join((*KINDS, 'plain', 'cross10'))} (default: all but "
                         "cross10)")
    ap.add_argument("--inject", choices=("runtime", "runner"), default="runtime",
                    help="where the slowed kinds' change is made (default: the runtime's call, side B's "
                         "interpreter only)")
    ap.add_argument("--rerun-disturbed", type=int, default=0, metavar="N",
                    help="run a gate run whose only unjudged rows were disturbed again, up to N times "
                         "(default 0: never; the rates count the first run)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds one gate run may take (default 3600)")
    ap.add_argument("--baselines", type=int, default=3, help="plain runs stored for the cross-run gate")
    args = common_options(ap).parse_args()
    bad = set(args.kinds.split(",")) - {*KINDS, "plain", "cross10"}
    if bad:
        ap.error(f"unknown kinds: {', '.join(sorted(bad))}")
    own = {"kinds": args.kinds, "inject": args.inject, "rerun_disturbed": args.rerun_disturbed,
           "rounds": args.rounds, "selection18": SELECTION18}
    return run_models(args, "gate-ab-quality-", bench_model, own)


def common_options(ap: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options every gate benchmark takes: threads, seed, work folder, output, resume."""
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default="", help="working folder (kept: bundles, runs); default a fresh "
                    "temporary one")
    ap.add_argument("--out", required=True)
    ap.add_argument("--resume", action="store_true", help="continue the rounds already in --out")
    return ap


def run_models(args, prefix: str, bench, own: dict | None = None) -> int:
    """``bench(model, args, root, save)`` for each of ``--models``, saving after each round and at the end;
    ``own``: the benchmark's own options, recorded with the conditions."""
    root, save = open_state(args, prefix, own)
    for model in args.models.split(","):
        bench(model, args, root, save)
    save()
    return 0


def open_state(args, prefix: str, own: dict | None = None) -> tuple[Path, _Saver]:
    """The work folder and the saver of ``--out`` (continued with ``--resume``), its conditions recorded once:
    the machine, the selection, the threads, the command and the code measured, and ``own`` (with it, what an
    interpreter's start costs through the injection's wrapper)."""
    out = Path(args.out)
    resumed = args.resume and out.exists()
    state = json.loads(out.read_text()) if resumed else {}
    state.setdefault("conditions", {"machine": platform.processor() or platform.machine(), **MACHINE,
                                    "python": platform.python_version(), "selection": SELECTION,
                                    "threads": args.threads or "default",
                                    "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                    "command": " ".join(sys.argv), "code": _code(), **(own or {})})
    root = Path(args.work or state.get("work") or tempfile.mkdtemp(prefix=prefix))
    root.mkdir(parents=True, exist_ok=True)
    state["work"] = str(root)
    if own:
        state["conditions"].setdefault("interpreter_start_s", inj.start_cost(root))
    if resumed:  # what a resumed run continued with may differ from what it started with
        state.setdefault("resumed", []).append({"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "code": _code(),
                                                "command": " ".join(sys.argv), **(own or {})})
    return root, _Saver(out, state)


if __name__ == "__main__":
    sys.exit(main())
