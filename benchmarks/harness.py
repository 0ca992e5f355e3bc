"""Is the harness sound? Four comparisons, printed in one run (a benchmark, not a test: it
never fails on a figure):

a. harness overhead per call: the ``null`` runner (returns a preallocated constant) through
   ``isolate.run_cell``, the path every cell takes (goal <= 5 us);
b. ONNX Runtime, LeNet-5, batch 1: the tool's p50 over a bare ``session.run`` loop with the
   same session options, threads and input (goal <= 1.05);
c. OpenVINO: the tool over ``benchmark_app`` (shipped with the openvino wheel) on the same IR,
   precision, device and input (the tool's timed image, given to benchmark_app with ``-i``:
   speed can depend on the data), for both scenarios: the latency scenario (tool p50 over
   ``benchmark_app -hint latency``'s Median) and the throughput scenario (tool img/s over
   ``benchmark_app -hint throughput``'s Throughput); goal within 3 % for both. Each pair also
   prints what the two sides timed in like terms (OpenVINO's own latency on both sides, wall per
   call on both sides, occupancy of the requests) and a *bridge*: benchmark_app run with the
   tool's own compile properties, which separates the configuration's effect from the rest
   (harness_openvino.py says exactly what each figure is);
d. PyTorch CUDA, eager fp16 channels_last: the tool's p50 over a bare loop with CUDA events
   (where a GPU is present; otherwise skipped, saying why).

Each comparison alternates tool and reference (ABAB...) for ``--rounds`` pairs and reports
every pair and the median ratio, so that drift on a shared machine shows.

    python benchmarks/harness.py [--model mobilenet_v2] [--seconds 5] [--rounds 3] [--json OUT]

benchmark_app refuses -nthreads/-nstreams together with a hint, so it runs with OpenVINO's
defaults; the tool runs with its own (INFERENCE_NUM_THREADS = the physical cores). Both
thread counts and stream counts are printed next to the ratios, with the compiled-model
properties that differ; the bridge runs benchmark_app on the tool's properties.
(This script replaces benchmarks/overhead.py; its figures a and b mean what that script's 1
and 2 meant; its 3, a sync 1-request comparison, is now c's latency scenario.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parent))

import harness_openvino  # noqa: E402

from infer_compare import compare  # noqa: E402
from infer_compare.measure.bench import LoopSettings  # noqa: E402
from infer_compare.measure.cells import CellSpec  # noqa: E402
from infer_compare.measure.isolate import run_cell  # noqa: E402

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

BARE_TORCH = r"""
import json, sys, time
import torch, torchvision
name, batch, secs, h, w = (sys.argv[1], int(sys.argv[2]), float(sys.argv[3]),
                           int(sys.argv[4]), int(sys.argv[5]))
torch.backends.cudnn.benchmark = True
dev = torch.device("cuda:0")
model = (getattr(torchvision.models, name)(weights=None).eval().to(dev).half()
         .to(memory_format=torch.channels_last))
x = torch.zeros((batch, 3, h, w), device=dev, dtype=torch.half).contiguous(memory_format=torch.channels_last)
ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(20000)]
for a, b in ev:  # torch creates an event at its first record: do it now, outside the timed loop
    a.record(); b.record()
torch.cuda.synchronize()
with torch.inference_mode():
    for _ in range(10):
        model(x)
    torch.cuda.synchronize()
    host, n = [], 0
    end = time.perf_counter() + secs
    t_start = time.perf_counter_ns()
    while time.perf_counter() < end and n < len(ev):
        t0 = time.perf_counter_ns()
        ev[n][0].record(); model(x); ev[n][1].record(); ev[n][1].synchronize()
        host.append(time.perf_counter_ns() - t0)
        n += 1
    wall = time.perf_counter_ns() - t_start
dev_ms = sorted(a.elapsed_time(b) for a, b in ev[:n])
host.sort()
print(json.dumps({"p50_ms": host[n // 2] / 1e6, "device_p50_ms": dev_ms[n // 2], "n": n,
                  "img_s": batch * n / (wall / 1e9)}))
"""


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def _pairs(pairs: list[dict], key: str = "ratio") -> dict:
    return {"pairs": pairs, "median_ratio": statistics.median(p[key] for p in pairs) if pairs else None}


# ------------------------------------------------------------------------------ a. null runner
def null_overhead(secs: float) -> dict:
    work = Path(tempfile.mkdtemp())
    np.save(work / "in.npy", np.zeros((1, 1, 32, 32), np.float32))
    spec = CellSpec(runner="null", artifact="none", batch_sizes=(1,), inputs=str(work / "in.npy"),
                    loop=LoopSettings(warmup_iters=100, min_iters=1000, min_time_s=secs, max_time_s=secs,
                                      max_iters=10_000_000, target_ci=None))
    res = run_cell(spec, 120, work, "null")[0]
    shutil.rmtree(work, ignore_errors=True)
    if not res.ok:
        raise SystemExit(f"null runner failed: {res.error}")
    s = np.asarray(res.samples_ns, dtype=np.float64)
    return {"calls": int(s.size), "p50_us": float(np.percentile(s, 50)) / 1e3,
            "mean_us": float(s.mean()) / 1e3, "p99_us": float(np.percentile(s, 99)) / 1e3}


# ------------------------------------------------------------------------------ b. ONNX Runtime
def ort_vs_bare(threads: int, secs: float, rounds: int, cache: str | None) -> dict:
    from infer_compare.backends.onnxruntime.run import OnnxRuntimeRunner
    from infer_compare.data.bundled import digit_sets

    av = OnnxRuntimeRunner.probe("cpu")
    if not av.available:
        return {"skipped": f"ONNX Runtime: {av.reason}"}

    work = Path(tempfile.mkdtemp())
    np.save(work / "x.npy", digit_sets().eval[:1])
    pairs, path = [], None
    for _ in range(rounds):
        rep = compare("lenet5", backends=["onnxruntime"], formats=["onnx"], devices=["cpu"], batch_sizes=[1],
                      threads=threads, min_time_s=secs, max_time_s=secs, min_iters=100, cache_dir=cache)
        row = next(r for r in rep.rows if r.status == "ok")
        path = row.export.path
        out = subprocess.run([sys.executable, "-c", BARE_ORT, path, str(threads),
                              str(secs), str(work / "x.npy")],
                             capture_output=True, text=True, check=True)
        bare = _last_json(out.stdout)
        pairs.append({"tool_p50_ms": row.latency.p50_ms, "bare_p50_ms": bare["p50_ms"],
                      "ratio": row.latency.p50_ms / bare["p50_ms"], "tool_n": row.latency.count,
                      "bare_n": bare["n"]})
    shutil.rmtree(work, ignore_errors=True)
    return {"artifact": path, "threads": threads, **_pairs(pairs)}


# ------------------------------------------------------------------------------ c. OpenVINO
def ov_vs_benchmark_app(model: str, precision: str, threads: int | None, secs: float, rounds: int,
                        cache: str | None) -> dict:
    """Part c (harness_openvino.py), where OpenVINO and its benchmark_app are installed."""
    from infer_compare.backends.openvino.run import OpenVinoRunner

    av = OpenVinoRunner.probe("cpu")
    if not av.available:
        return {"skipped": f"OpenVINO: {av.reason}"}
    exe = shutil.which("benchmark_app") or str(Path(sys.executable).parent / "benchmark_app")
    if not os.path.exists(exe):
        return {"skipped": "benchmark_app not found (it ships with the openvino wheel)"}
    return harness_openvino.ov_vs_benchmark_app(model, precision, threads, secs, rounds, cache, exe)


# ------------------------------------------------------------------------------ d. PyTorch CUDA
def cuda_vs_bare(model: str, batch: int, secs: float, rounds: int, cache: str | None) -> dict:
    from infer_compare.backends.pytorch.run import PyTorchRunner

    av = PyTorchRunner.probe("cuda:0")
    if not av.available:
        return {"skipped": f"no CUDA device: {av.reason}"}
    pairs = []
    for _ in range(rounds):
        rep = compare(model, backends=["pytorch"], formats=["pytorch"], devices=["cuda:0"],
                      precisions=["fp16"], batch_sizes=[batch], min_time_s=secs, max_time_s=secs,
                      min_iters=20, cache_dir=cache)
        row = next((r for r in rep.rows if r.batch_size == batch and r.status == "ok"), None)
        if row is None:
            return {"skipped": "the tool's PyTorch CUDA row did not "
                    f"run: {[(r.label, r.reason) for r in rep.rows]}"}
        _, h, w = rep.model.input_shape
        out = subprocess.run([sys.executable, "-c", BARE_TORCH, model, str(batch), str(secs), str(h), str(w)],
                             capture_output=True, text=True, check=True)
        bare = _last_json(out.stdout)
        pairs.append({"tool_p50_ms": row.latency.p50_ms, "bare_p50_ms": bare["p50_ms"],
                      "ratio": row.latency.p50_ms / bare["p50_ms"], "tool_img_s": row.throughput,
                      "bare_img_s": bare["img_s"], "tool_device_p50_ms": row.extra.get("device_ms_p50"),
                      "bare_device_p50_ms": bare["device_p50_ms"], "tool_io": row.options.get("io")})
    return {"model": model, "batch": batch, "precision": "fp16, channels_last, eager", **_pairs(pairs)}


# ------------------------------------------------------------------------------ printing
def _print_cuda(res: dict) -> None:
    if "skipped" in res:
        print(f"d. PyTorch CUDA vs a bare loop: skipped: {res['skipped']}")
        return
    for p in res["pairs"]:
        print(f"   tool p50 {p['tool_p50_ms']:.3f} ms ({p['tool_img_s']:,.0f} img/s, io {p['tool_io']}) "
              f"vs bare {p['bare_p50_ms']:.3f} ms ({p['bare_img_s']:,.0f} img/s) -> {p['ratio']:.3f}")
    print(f"d. tool / bare PyTorch CUDA p50 ({res['model']}, {res['precision']}, batch {res['batch']}): "
          f"median ratio {res['median_ratio']:.3f}", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="mobilenet_v2", help="model of parts c and d (default mobilenet_v2)")
    ap.add_argument("--seconds", type=float, default=5.0, help="measuring time of each run (default 5)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating tool/reference pairs (default 3)")
    ap.add_argument("--threads", type=int, help="CPU threads of parts b (default: the logical cores) and c "
                                                "(default: the tool's own default, the physical cores)")
    ap.add_argument("--ov-precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--gpu-batch", type=int, default=256, help="batch of part d (default 256)")
    ap.add_argument("--parts", default="abcd", help="which parts to run (default abcd)")
    ap.add_argument("--cache-dir")
    ap.add_argument("--json", metavar="OUT", help="also write every figure to this file")
    a = ap.parse_args(argv)
    from infer_compare.host import env

    e = env.collect()
    res: dict = {"machine": f"{e.cpu_model}, {e.cores_physical} physical / {e.cores_logical} logical cores",
                 "gpus": [g.get("name") for g in e.gpus], "libraries": e.libraries, "seconds": a.seconds,
                 "rounds": a.rounds}
    print(f"machine: {res['machine']}; GPUs: {', '.join(map(str, res['gpus'])) or 'none'}", flush=True)
    if "a" in a.parts:
        n = res["a_null"] = null_overhead(min(2.0, a.seconds))
        print(f"a. harness overhead (null runner through isolate.run_cell): p50 {n['p50_us']:.2f} us, mean "
              f"{n['mean_us']:.2f} us per call over {n['calls']:,} calls (goal <= 5 us)", flush=True)
    if "b" in a.parts:
        o = res["b_onnxruntime"] = ort_vs_bare(a.threads or os.cpu_count() or 1, a.seconds, a.rounds,
                                               a.cache_dir)
        for p in o.get("pairs", []):
            print(f"   tool p50 {p['tool_p50_ms'] * 1e3:.1f} us vs bare "
                  f"session.run {p['bare_p50_ms'] * 1e3:.1f} us -> {p['ratio']:.3f}")
        print(f"b. ONNX Runtime: skipped: {o['skipped']}" if "skipped" in o else
              f"b. tool / bare ONNX Runtime p50 (LeNet-5, batch 1, {o['threads']} threads): median ratio "
              f"{o['median_ratio']:.3f} (goal <= 1.05)", flush=True)
    if "c" in a.parts:
        res["c_openvino"] = ov_vs_benchmark_app(a.model, a.ov_precision, a.threads, a.seconds, a.rounds,
                                                a.cache_dir)
        harness_openvino.print_ov(res["c_openvino"])
    if "d" in a.parts:
        res["d_pytorch_cuda"] = cuda_vs_bare(a.model, a.gpu_batch, a.seconds, a.rounds, a.cache_dir)
        _print_cuda(res["d_pytorch_cuda"])
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
        print(f"figures: {a.json}")


if __name__ == "__main__":
    main()
