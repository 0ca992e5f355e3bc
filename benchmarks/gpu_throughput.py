"""GPU throughput benchmark: the best verifiable configuration of a model on one GPU.

Each configuration is measured by the tool itself (``infer_compare.compare``: one
isolated process per cell, host-clock timing of the blocking call, parity against the
PyTorch FP32 reference on the same real images), so every figure printed here is a
row that passed or failed parity like any other. Throughput = images / wall time of
the measured loop (host clock).

    python benchmarks/gpu_throughput.py --model resnet50 --batch-sizes 256,512 \
        --configs eager-fp16,compile-fp16-graphs,ort-fp16 --min-time 3 --out gpu-throughput.json

Configurations (name -> runner, precision, runner options):
    eager-fp16 / eager-bf16          PyTorch eager, channels_last, cudnn.benchmark
    eager-fp16-graphs                the same captured in a CUDA graph
    compile-fp16 / compile-bf16      torch.compile (default mode)
    compile-fp16-graphs / -bf16-graphs   torch.compile mode reduce-overhead (CUDA graphs)
    ort-fp16 / ort-tf32              ONNX Runtime CUDA EP with IO binding
    trt-fp16 / trt-int8              TensorRT engine (device-resident IO)

Goal stated in issue 4: ResNet-50 >= 40,000 img/s on an H200 (>= 36,000 on an H100).
This script reports what it reaches; docs/gpu.md records the figures and conditions.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CONFIGS: dict[str, tuple[str, str, str, dict]] = {
    # name: (runner, format, precision, runner options)
    "eager-fp16": ("pytorch", "pytorch", "fp16", {}),
    "eager-bf16": ("pytorch", "pytorch", "bf16", {}),
    "eager-fp16-graphs": ("pytorch", "pytorch", "fp16", {"cuda_graphs": True}),
    "compile-fp16": ("pytorch-compile", "pytorch", "fp16", {}),
    "compile-bf16": ("pytorch-compile", "pytorch", "bf16", {}),
    "compile-fp16-graphs": ("pytorch-compile", "pytorch", "fp16", {"cuda_graphs": True}),
    "compile-bf16-graphs": ("pytorch-compile", "pytorch", "bf16", {"cuda_graphs": True}),
    "ort-fp16": ("onnxruntime", "onnx", "fp16", {"io_binding": True}),
    "ort-tf32": ("onnxruntime", "onnx", "tf32", {"io_binding": True}),
    "trt-fp16": ("tensorrt", "tensorrt", "fp16", {"io": "device"}),
    "trt-int8": ("tensorrt", "tensorrt", "int8", {"io": "device"}),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch-sizes", default="256")
    ap.add_argument("--configs", default="eager-fp16,compile-fp16-graphs,ort-fp16",
                    help=f"comma-separated, from: {', '.join(CONFIGS)}")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--min-time", type=float, default=3.0)
    ap.add_argument("--min-iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--cache-dir")
    ap.add_argument("--out", help="write every row (JSON) here")
    args = ap.parse_args(argv)

    from infer_compare import compare
    from infer_compare.api import parse_batch_sizes

    batches = parse_batch_sizes(args.batch_sizes)
    names = [c.strip() for c in args.configs.split(",") if c.strip()]
    bad = [n for n in names if n not in CONFIGS]
    if bad:
        ap.error(f"unknown configuration(s) {bad}; known: {', '.join(CONFIGS)}")
    rows = []
    env = None
    for name in names:
        runner, fmt, prec, opts = CONFIGS[name]
        t0 = time.perf_counter()
        rep = compare(args.model, backends=[runner], formats=[fmt], precisions=[prec], devices=[args.device],
                      batch_sizes=batches, min_time_s=args.min_time, min_iters=args.min_iters,
                      warmup_iters=args.warmup, cache_dir=args.cache_dir, runner_options={runner: opts},
                      command=["benchmarks/gpu_throughput.py", *(argv if argv is not None else sys.argv[1:])])
        env = rep.environment
        for r in rep.rows:
            ex = r.extra or {}
            rows.append({
                "config": name, "label": r.label, "status": r.status, "reason": r.reason,
                "batch": r.batch_size, "img_s": r.throughput,
                "p50_ms": r.latency.p50_ms if r.latency else None,
                "device_ms_p50": ex.get("device_ms_p50") or ex.get("compute_ms_p50"),
                "energy_mj_per_image": ex.get("energy_mj_per_image"),
                "gpu_avg_power_w": ex.get("gpu_avg_power_w"),
                "cosine": r.parity.cosine_mean if r.parity else None,
                "rel_max": r.parity.rel_max if r.parity else None,
                "load_s": r.load_s, "settings": r.options, "extra": ex,
            })
            thr = f"{r.throughput:,.0f} img/s" if r.throughput else "-"
            print(f"{name:22s} b{r.batch_size!s:>4} {r.status:14s} {thr:>14s}  "
                  f"{(r.parity.cosine_mean if r.parity else float('nan')):.5f} cos  {r.reason[:120]}",
                  flush=True)
        print(f"  ({name}: {time.perf_counter() - t0:.0f} s including exports and process start-up)",
              flush=True)
    ok = [r for r in rows if r["status"] == "ok" and r["img_s"]]
    if ok:
        best = max(ok, key=lambda r: r["img_s"])
        print(f"best: {best['config']} batch {best['batch']}: {best['img_s']:,.0f} img/s "
              f"(host clock, parity cos {best['cosine']:.5f})")
    if args.out:
        Path(args.out).write_text(json.dumps({"model": args.model,
                                              "environment": env.to_dict() if env else None,
                                              "rows": rows}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
