"""What a resident PyTorch process's FIRST torch.compile pays beyond a later one.

Imports what the PyTorch fork server imports (torch, torchvision, the runner, torch._inductor.compile_fx),
runs the eager model at batch 1 and 32 (cuDNN autotuned, as the eager rows before a compile row), then
compiles at batch 1 and 32 (3 calls each, as a row's load), resets Dynamo and compiles again; prints one JSON
line: seconds of each, the modules the first compile imported, the threads and child processes it left.
With --preimport FILE (a previous run's JSON line), those modules are imported first, after the fork server's
(their import time is printed), to see what is left of the first compile's extra cost.

Usage (GPU host): TORCHINDUCTOR_CACHE_DIR=D/torchinductor TRITON_CACHE_DIR=D/triton python3 \
    benchmarks/gpu/first_compile_probe.py [--precision fp16] [--preimport FILE]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import threading
import time

from probe_common import profiled, warm_calls

# what the compile's entry points called (Dynamo's frame conversion, the compiled graph's first runs)
CALLEES = (r"convert_frame.py.*\(__call__\)|\(_compile\)|\(warm_calls\)|eval_frame.py.*\(_fn\)|"
           r"runtime_wrappers")

T0 = time.perf_counter()


def children() -> list[int]:
    out: list[int] = []
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/children") as f:
                out += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--preimport", default="")
    ap.add_argument("--profile", type=int, default=0, help="cProfile the second compile: its N costliest "
                    "functions")
    a = ap.parse_args()
    import torch
    import torch._inductor.compile_fx  # noqa: F401
    import torchvision  # noqa: F401

    import infer_compare.backends.pytorch.run  # noqa: F401

    out: dict = {"import_s": round(time.perf_counter() - T0, 3), "torch": torch.__version__}
    if a.preimport:
        with open(a.preimport) as f:
            mods = json.loads(f.read().split("PROBE ", 1)[1])["first_compile_new_modules"]
        t = time.perf_counter()
        failed = []
        for m in mods:
            try:
                importlib.import_module(m)
            except Exception as e:  # noqa: BLE001 - a probe: say what failed
                failed.append(f"{m}: {type(e).__name__}")
        out["preimport_s"] = round(time.perf_counter() - t, 3)
        out["preimport_n"], out["preimport_failed"] = len(mods), failed[:20]
    torch.backends.cudnn.benchmark = True
    torch.set_grad_enabled(False)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision, torch.float32)
    t = time.perf_counter()
    model = torchvision.models.resnet50().eval().to("cuda", dtype=dtype).to(memory_format=torch.channels_last)
    out["eager_s"] = {b: warm_calls(model, torch, b, dtype) for b in (1, 32)}
    out["model_and_eager_s"] = round(time.perf_counter() - t, 3)
    before, th0 = set(sys.modules), threading.active_count()
    cm = torch.compile(model)
    out["first_compile_s"] = {b: warm_calls(cm, torch, b, dtype) for b in (1, 32)}
    new = sorted(set(sys.modules) - before)
    out["first_compile_new_modules_n"] = len(new)
    out["first_compile_new_modules"] = new
    out["threads_before_after"] = [th0, threading.active_count()]
    out["children_after_first"] = children()
    torch._dynamo.reset()
    cm = torch.compile(model)
    if a.profile:
        def again() -> dict:
            return {b: warm_calls(cm, torch, b, dtype) for b in (1, 32)}

        out["again_compile_s"] = profiled(again, a.profile, out, "profile", keep=10**9, callees=CALLEES)
    else:
        out["again_compile_s"] = {b: warm_calls(cm, torch, b, dtype) for b in (1, 32)}
    from torch._dynamo.utils import compile_times

    out["compile_times"] = compile_times(repr="str", aggregate=True)
    out["total_s"] = round(time.perf_counter() - T0, 3)
    print("PROBE " + json.dumps(out))


if __name__ == "__main__":
    main()
