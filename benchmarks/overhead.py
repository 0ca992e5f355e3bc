"""How much does the harness itself cost? Three figures, measured in one run:

1. per-call overhead of the harness, with the ``null`` runner (goal <= 5 us);
2. the tool's LeNet-5 ONNX Runtime p50 over a bare ``session.run`` loop with the same
   session options, threads and input (goal <= 1.05);
3. the tool's OpenVINO throughput over ``benchmark_app``'s (shipped with the openvino
   wheel) on the same IR, device, precision, threads and stream settings (goal >= 0.97).

Each comparison alternates tool and reference runs (ABAB...) and reports every pair,
so that drift on a shared machine shows. This is a benchmark, not a test: it prints
figures and never fails on them.

    python benchmarks/overhead.py [--ov-model mobilenet_v2] [--threads 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from infer_compare import compare
from infer_compare.bench import LoopSettings
from infer_compare.cells import CellSpec
from infer_compare.isolate import run_cell

BARE_ORT = r"""
import json, sys, time
import numpy as np, onnxruntime as ort
path, threads, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
so = ort.SessionOptions()
so.intra_op_num_threads = threads
so.inter_op_num_threads = 1
so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
x = np.load(sys.argv[4])[:1]
name = s.get_inputs()[0].name
for _ in range(3):
    s.run(None, {name: x})
t = []
end = time.perf_counter() + secs
while time.perf_counter() < end:
    t0 = time.perf_counter_ns(); s.run(None, {name: x}); t.append(time.perf_counter_ns() - t0)
print(json.dumps({"p50_ms": float(np.percentile(t, 50)) / 1e6, "n": len(t)}))
"""


def null_overhead(secs: float) -> dict:
    work = Path(tempfile.mkdtemp())
    np.save(work / "in.npy", np.zeros((1, 1, 32, 32), np.float32))
    spec = CellSpec(runner="null", artifact="none", batch_sizes=(1,), inputs=str(work / "in.npy"),
                    loop=LoopSettings(warmup_iters=100, min_iters=1000, min_time_s=secs, max_iters=10_000_000))
    res = run_cell(spec, 120, work, "null")[0]
    shutil.rmtree(work, ignore_errors=True)
    if not res.ok:
        raise SystemExit(f"null runner failed: {res.error}")
    s = np.asarray(res.samples_ns, dtype=np.float64)
    return {"calls": int(s.size), "p50_us": float(np.percentile(s, 50)) / 1e3, "mean_us": float(s.mean()) / 1e3,
            "p99_us": float(np.percentile(s, 99)) / 1e3}


def ort_vs_bare(threads: int, secs: float, rounds: int, cache: str | None) -> dict:
    pairs = []
    path = None
    for _ in range(rounds):
        rep = compare("lenet5", backends=["onnxruntime"], devices=["cpu"], batch_sizes=[1], threads=threads,
                      min_time_s=secs, min_iters=100, cache_dir=cache)
        row = next(r for r in rep.rows if r.status == "ok")
        path = row.export.path
        work = Path(tempfile.mkdtemp())
        from infer_compare.data import digit_sets

        np.save(work / "x.npy", digit_sets().eval[:1])
        out = subprocess.run([sys.executable, "-c", BARE_ORT, path, str(threads), str(secs), str(work / "x.npy")],
                             capture_output=True, text=True, check=True)
        bare = json.loads(out.stdout.strip().splitlines()[-1])
        shutil.rmtree(work, ignore_errors=True)
        pairs.append({"tool_p50_ms": row.latency.p50_ms, "bare_p50_ms": bare["p50_ms"],
                      "ratio": row.latency.p50_ms / bare["p50_ms"], "tool_n": row.latency.count, "bare_n": bare["n"]})
    return {"artifact": path, "pairs": pairs, "median_ratio": statistics.median(p["ratio"] for p in pairs)}


def ov_vs_benchmark_app(model: str, precision: str, threads: int, secs: float, rounds: int,
                        cache: str | None) -> dict:
    exe = shutil.which("benchmark_app") or str(Path(sys.executable).parent / "benchmark_app")
    if not os.path.exists(exe):
        return {"skipped": "benchmark_app not found (it ships with the openvino wheel)"}
    hint = {"fp32": "f32", "bf16": "bf16", "fp16": "f16"}[precision]
    pairs = []
    for _ in range(rounds):
        rep = compare(model, backends=["openvino"], devices=["cpu"], precisions=[precision], batch_sizes=[1],
                      threads=threads, min_time_s=secs, min_iters=20, cache_dir=cache)
        row = next(r for r in rep.rows if r.status == "ok")
        c, h, w = rep.model.input_shape
        args = [exe, "-m", row.export.path, "-d", "CPU", "-hint", "none", "-api", "sync", "-nireq", "1",
                "-nstreams", "1", "-nthreads", str(threads), "-infer_precision", hint, "-b", "1",
                "-shape", f"[1,{c},{h},{w}]", "-t", str(int(max(1, secs)))]
        out = subprocess.run(args, capture_output=True, text=True)
        m = re.search(r"Throughput:\s+([\d.]+)\s*FPS", out.stdout)
        if not m:
            return {"skipped": f"could not read benchmark_app's throughput: {out.stdout[-400:]} {out.stderr[-400:]}"}
        ba = float(m.group(1))
        pairs.append({"tool_img_s": row.throughput, "benchmark_app_img_s": ba, "ratio": row.throughput / ba,
                      "tool_exec_precision": row.exec_precision, "tool_settings": row.options})
    return {"model": model, "precision": precision, "benchmark_app_args": " ".join(args[1:]), "pairs": pairs,
            "median_ratio": statistics.median(p["ratio"] for p in pairs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seconds", type=float, default=5.0, help="measuring time per run")
    ap.add_argument("--rounds", type=int, default=3, help="alternating tool/reference pairs")
    ap.add_argument("--ov-model", default="mobilenet_v2")
    ap.add_argument("--ov-precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--cache-dir")
    ap.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()
    from infer_compare import env

    e = env.collect()
    res = {"machine": f"{e.cpu_model}, {e.cores_logical} logical cores", "threads": a.threads,
           "libraries": e.libraries}
    res["null"] = null_overhead(2.0)
    print(f"1. harness overhead (null runner): p50 {res['null']['p50_us']:.2f} us, mean {res['null']['mean_us']:.2f} us "
          f"per call over {res['null']['calls']:,} calls (goal <= 5 us)", flush=True)
    res["ort"] = ort_vs_bare(a.threads, a.seconds, a.rounds, a.cache_dir)
    for p in res["ort"]["pairs"]:
        print(f"   ORT LeNet-5 b1: tool p50 {p['tool_p50_ms'] * 1e3:.1f} us vs bare session.run "
              f"{p['bare_p50_ms'] * 1e3:.1f} us -> {p['ratio']:.3f}")
    print(f"2. tool / bare ONNX Runtime p50 (LeNet-5, batch 1, {a.threads} threads): median ratio "
          f"{res['ort']['median_ratio']:.3f} (goal <= 1.05)", flush=True)
    res["openvino"] = ov_vs_benchmark_app(a.ov_model, a.ov_precision, a.threads, a.seconds, a.rounds, a.cache_dir)
    if "skipped" in res["openvino"]:
        print(f"3. OpenVINO vs benchmark_app: skipped: {res['openvino']['skipped']}")
    else:
        for p in res["openvino"]["pairs"]:
            print(f"   OpenVINO {a.ov_model} {a.ov_precision} b1: tool {p['tool_img_s']:.1f} img/s vs benchmark_app "
                  f"{p['benchmark_app_img_s']:.1f} img/s -> {p['ratio']:.3f}")
        print(f"3. tool / benchmark_app OpenVINO throughput ({a.ov_model}, {a.ov_precision}, 1 stream, 1 request, "
              f"sync, {a.threads} threads, batch 1): median ratio {res['openvino']['median_ratio']:.3f} (goal >= 0.97)")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
