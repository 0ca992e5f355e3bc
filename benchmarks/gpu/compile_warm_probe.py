"""Where a warm torch.compile load of resnet50 spends its time.

Runs what a ``pytorch-compile`` row's load does (seeded random weights, channels_last, cudnn.benchmark,
inference_mode, ``torch.compile`` default mode, 3 calls on a zero batch of the measured shape), at batch 1,
then 32 (torch's automatic dynamic shapes recompile), then 256, in this process, and prints one JSON line:
seconds per shape, Dynamo's phase times, the cache counters (FX graph cache, AOTAutograd cache) and, with
--profile, the functions that took the most cumulative time in the batch-1 compile.

Usage (on the GPU host): TORCHINDUCTOR_CACHE_DIR=D/torchinductor TRITON_CACHE_DIR=D/triton \
    python3 benchmarks/gpu/compile_warm_probe.py [--precision fp16] [--profile N] [--label NAME]
The first run with an empty D fills the caches; later runs are warm.
"""

from __future__ import annotations

import argparse
import json
import time

from probe_common import profiled, warm_calls

T0 = time.perf_counter()


def counters() -> dict:
    from torch._dynamo.utils import counters as c

    return {k: dict(v) for k, v in c.items() if k in ("inductor", "aot_autograd", "stats", "frames")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--label", default="")
    ap.add_argument("--batches", default="1,32,256")
    ap.add_argument("--again", action="store_true")
    a = ap.parse_args()
    import torch
    import torchvision

    out: dict = {"label": a.label, "import_s": round(time.perf_counter() - T0, 3), "torch": torch.__version__}
    torch.manual_seed(0)
    torch.set_grad_enabled(False)
    torch.backends.cudnn.benchmark = True
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision, torch.float32)
    t = time.perf_counter()
    model = torchvision.models.resnet50().eval().to("cuda", dtype=dtype).to(memory_format=torch.channels_last)
    torch.cuda.synchronize()
    out["model_s"] = round(time.perf_counter() - t, 3)
    cm = torch.compile(model)
    shapes = {}
    for i, b in enumerate(int(v) for v in a.batches.split(",")):
        before = counters()
        if a.profile and i == 0 and not a.again:
            shapes[b] = profiled(lambda b=b: warm_calls(cm, torch, b, dtype), a.profile, out, "profile_b1")
        else:
            shapes[b] = warm_calls(cm, torch, b, dtype)
        out[f"counters_after_b{b}"] = counters()
        del before
    out["compile_s"] = shapes
    if a.again:  # a resident process's next configuration: Dynamo forgets, the on-disk caches stay
        torch._dynamo.reset()
        cm = torch.compile(model)
        again = {}
        for b in shapes:
            if a.profile and b != 256:
                again[b] = profiled(lambda b=b: warm_calls(cm, torch, b, dtype), a.profile, out,
                                    f"profile_again_b{b}")
            else:
                again[b] = warm_calls(cm, torch, b, dtype)
        out["again_compile_s"] = again
        out["counters_after_again"] = counters()
    try:
        from torch._dynamo.utils import compile_times

        out["compile_times"] = compile_times(repr="str", aggregate=True)
    except Exception as e:  # noqa: BLE001 - a probe: say what failed
        out["compile_times"] = f"unavailable: {e}"
    out["total_s"] = round(time.perf_counter() - T0, 3)
    print("PROBE " + json.dumps(out))


if __name__ == "__main__":
    main()
