"""The tool's TFLite p50 against LiteRT's own benchmark and a bare invoke() loop.

ai-edge-litert 2.3.0 ships no ``benchmark_model`` binary; it ships a Python tool,
``ai_edge_litert/tools/benchmark_litert_model.py`` (the CompiledModel API, its own
timing). This script compares on the same .tflite file and thread count:

1. infer-compare's row (isolated child, harness clock around set_tensor/invoke/get_tensor);
2. a bare ``Interpreter.invoke()`` loop (same interpreter API, input set once);
3. the shipped ``benchmark_litert_model.py`` (CompiledModel API), when it runs.

Goal: (1) within 3 % of (2). Usage:
    python benchmarks/tflite_vs_litert_benchmark.py --model mobilenet_v2 --precision int8 --threads 2
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def bare_loop(path: str, threads: int, iters: int, warmup: int) -> dict:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=path, num_threads=threads)
    it.allocate_tensors()
    inp = it.get_input_details()[0]
    out = it.get_output_details()[0]
    rng = np.random.default_rng(0)
    if np.dtype(inp["dtype"]).kind == "i":
        x = rng.integers(-128, 127, size=inp["shape"], dtype=np.int8).astype(inp["dtype"])
    else:
        x = rng.standard_normal(inp["shape"]).astype(inp["dtype"])
    it.set_tensor(inp["index"], x)
    for _ in range(warmup):
        it.invoke()
    samples = []
    for _ in range(iters):
        t = time.perf_counter_ns()
        it.invoke()
        samples.append(time.perf_counter_ns() - t)
    it.get_tensor(out["index"])
    a = np.asarray(samples) / 1e6
    return {"p50_ms": float(np.median(a)), "mean_ms": float(a.mean()), "n": len(a)}


def litert_tool(path: str, threads: int, iters: int, warmup: int) -> dict | None:
    spec = importlib.util.find_spec("ai_edge_litert")
    tool = Path(spec.origin).parent / "tools" / "benchmark_litert_model.py" if spec and spec.origin else None
    if tool is None or not tool.exists():
        return {"error": "ai_edge_litert/tools/benchmark_litert_model.py not found"}
    with tempfile.TemporaryDirectory() as d:
        res = Path(d) / "r.json"
        p = subprocess.run([sys.executable, str(tool), f"--model={path}", f"--num_threads={threads}",
                            f"--num_runs={iters}", f"--warmup_runs={warmup}", f"--result_json={res}"],
                           capture_output=True, text=True)
        if p.returncode != 0 or not res.exists():
            tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or [""]
            return {"error": f"exit {p.returncode}: {tail[0][:200]}"}
        return json.loads(res.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--precision", default="int8", choices=["fp32", "fp16", "int8"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--cache-dir", default=None)
    a = ap.parse_args()

    from infer_compare import compare

    rep = compare(a.model, formats=["tflite"], precisions=[a.precision], batch_sizes=[1], threads=a.threads,
                  warmup_iters=a.warmup, min_iters=a.iters, min_time_s=0.0, cache_dir=a.cache_dir)
    row = next(r for r in rep.rows if r.backend == "tflite")
    if row.status != "ok" or row.latency is None:
        print(f"tool row: {row.status}: {row.reason}")
        return 1
    path = row.export.path
    bare = bare_loop(path, a.threads, a.iters, a.warmup)
    tool = litert_tool(path, a.threads, a.iters, a.warmup)
    print(f"model {a.model} {a.precision}, {os.path.basename(path)} ({row.export.size_bytes / 1e6:.2f} MB), "
          f"threads {a.threads}, batch 1, {a.iters} timed calls")
    print(f"  infer-compare row p50      : {row.latency.p50_ms:8.3f} ms  (mean {row.latency.mean_ms:.3f})")
    print(f"  bare Interpreter.invoke p50: {bare['p50_ms']:8.3f} ms  (mean {bare['mean_ms']:.3f})")
    ratio = row.latency.p50_ms / bare["p50_ms"]
    print(f"  tool / bare                : {ratio:8.3f}  ({(ratio - 1) * 100:+.1f} %, goal within 3 %)")
    if tool and "error" not in tool:
        lat = tool.get("latency", {})
        med = lat.get("median_ms") if isinstance(lat, dict) else None
        print(f"  benchmark_litert_model p50 : {med if med is not None else json.dumps(tool)[:200]} ms "
              "(CompiledModel API, its own clock)")
    else:
        print(f"  benchmark_litert_model     : not run ({(tool or {}).get('error')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
