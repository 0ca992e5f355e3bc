"""Batch-1 GPU configurations as bare loops, nothing of infer-compare's: the figure a row of the comparison is
held against (benchmarks/reproducibility.py). ResNet-50, seeded random weights; PyTorch eager fp32 and fp16
(channels_last, cudnn.benchmark on), torch.compile fp16 (the default mode), ONNX Runtime's CUDA provider fp32
from an ONNX file (``--onnx``, e.g. the one the comparison cached) with input and output on the device.

Each configuration runs in ``--procs`` fresh processes, one after another, alone on the machine; each process
warms up for ``--warmup-s`` and then measures ``--seconds``; the JSON gives every process's median and their
median.

    python benchmarks/gpu/bare_b1.py --procs 3 --onnx CACHE/onnx/KEY/model.onnx --out bare.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CONFIGS = ("eager-fp32", "eager-fp16", "compile-fp16", "ort-cuda-fp32")


def _torch_fn(config: str):
    import torch
    import torchvision

    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    half = config.endswith("fp16")
    m = torchvision.models.resnet50().eval().cuda().to(memory_format=torch.channels_last)
    x = torch.randn(1, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    if half:
        m, x = m.half(), x.half()
    if config.startswith("compile"):
        m = torch.compile(m)

    def call():
        with torch.inference_mode():
            m(x)
        torch.cuda.synchronize()
    return call


def _ort_fn(path: str):
    import numpy as np
    import onnxruntime as ort

    s = ort.InferenceSession(path, providers=["CUDAExecutionProvider"])
    inp = s.get_inputs()[0]
    x = ort.OrtValue.ortvalue_from_numpy(np.random.rand(1, 3, 224, 224).astype(np.float32), "cuda", 0)
    io = s.io_binding()
    io.bind_ortvalue_input(inp.name, x)
    for o in s.get_outputs():
        io.bind_output(o.name, "cuda")

    def call():
        s.run_with_iobinding(io)
    return call


def child(config: str, onnx: str, warmup_s: float, seconds: float) -> dict:
    call = _ort_fn(onnx) if config.startswith("ort") else _torch_fn(config)
    end = time.perf_counter() + warmup_s
    while time.perf_counter() < end:
        call()
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return {"config": config, "n": len(times), "median_ms": statistics.median(times) * 1e3}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child")
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--onnx", default="")
    ap.add_argument("--warmup-s", type=float, default=2.0)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.onnx, a.warmup_s, a.seconds)))
        return 0
    out: dict = {"procs": a.procs, "seconds": a.seconds, "warmup_s": a.warmup_s, "configs": {}}
    for config in a.configs.split(","):
        if config.startswith("ort") and not a.onnx:
            continue
        got = []
        for _ in range(a.procs):
            p = subprocess.run([sys.executable, __file__, "--child", config, "--onnx", a.onnx, "--warmup-s",
                                str(a.warmup_s), "--seconds", str(a.seconds)], capture_output=True, text=True)
            line = (p.stdout.strip().splitlines() or ["{}"])[-1]
            got.append(json.loads(line).get("median_ms") if p.returncode == 0 else None)
        ok = [v for v in got if v]
        out["configs"][config] = {"process_medians_ms": got,
                                  "median_ms": statistics.median(ok) if ok else None}
        print(config, got, flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
