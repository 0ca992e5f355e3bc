"""How much a batch-1 GPU row's speed depends on the process that measures it, and why.

Bare PyTorch loops, nothing of infer-compare's: ResNet-50 (seeded random weights, eval, channels_last), batch
1, fp32 and fp16, each measured in ``--windows`` windows of ``--window-s`` seconds with ``--gap-s`` idle
between them, in ``--procs`` fresh processes per setting. The settings alternate process by process (A B C ...
A B C), so the machine's drift falls on all of them alike:

* ``default``: cudnn.benchmark on, the process placed by the kernel (what a plain loop does);
* ``nobench``: cudnn.benchmark off (the algorithm picked by heuristics, not by timing in this process);
* ``pinned``: cudnn.benchmark on, the process pinned to one core (``--core``);
* ``nobench-pinned``: both;
* ``beside``: as ``default`` while another process runs batch-32 forward passes on the same GPU;
* ``graph``: as ``default``, the forward pass captured once as a CUDA graph and replayed (no per-kernel
  launches).

Per window also: the machine's steal time (``/proc/stat``: CPU time the hypervisor gave to others) and the
process's involuntary context switches during the window, and the GPU's own time per call (CUDA events around
the window's calls), which tells launch-bound slowness (host side) from slower kernels.

Each process prints one JSON line: per configuration and window the median ms, the core the measuring thread
ran on at the window's end, the GPU's SM clock and temperature (NVML) at the window's end, and the cuDNN
algorithm choice's fingerprint (the kernels' names of one profiled call). The summary gives, per setting and
configuration, the spread across processes (largest / smallest process median) and inside processes (largest /
smallest window).

    python benchmarks/gpu/process_spread.py --procs 5 --out spread.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SETTINGS = ("default", "nobench", "pinned", "nobench-pinned", "beside", "graph")


def _core() -> int:
    with open("/proc/thread-self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def _nvml():
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return lambda: (pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                        pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU))
    except Exception:  # noqa: BLE001 - NVML is optional
        return lambda: (None, None)


def _kernels(model, x) -> str:
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        model(x)
        torch.cuda.synchronize()
    names = sorted({e.name for e in prof.events() if "conv" in e.name.lower() or "gemm" in e.name.lower()})
    return str(abs(hash("|".join(names))) % 10**8) + f":{len(names)}"


def _steal() -> int:
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])  # cpu  user nice system idle iowait irq softirq steal


def _nivcsw() -> int:
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("nonvoluntary_ctxt_switches"))


def _window(model, x, seconds: float) -> tuple[float, dict]:
    import torch

    times = []
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    steal0, cs0 = _steal(), _nivcsw()
    ev0.record()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter_ns()
        model(x)
        torch.cuda.synchronize()
        times.append(time.perf_counter_ns() - t0)
    ev1.record()
    torch.cuda.synchronize()
    facts = {"steal_ticks": _steal() - steal0, "nivcsw": _nivcsw() - cs0,
             "gpu_span_ms_per_call": round(ev0.elapsed_time(ev1) / len(times), 4), "calls": len(times)}
    return statistics.median(times) / 1e6, facts


def _graphed(m, x):
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            m(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = m(x)

    def run(_x):
        g.replay()
        return y
    return run


def child(a: argparse.Namespace) -> None:
    t_start = time.perf_counter()
    if "pinned" in a.setting:
        os.sched_setaffinity(0, {a.core})
    import torch
    import torchvision

    torch.backends.cudnn.benchmark = "nobench" not in a.setting
    torch.manual_seed(0)
    clocks = _nvml()
    out: dict = {"setting": a.setting, "pid": os.getpid(),
                 "import_s": round(time.perf_counter() - t_start, 2)}
    with torch.inference_mode():
        for prec in ("fp32", "fp16"):
            dtype = torch.float16 if prec == "fp16" else torch.float32
            m = torchvision.models.resnet50().eval().to("cuda", dtype=dtype,
                                                        memory_format=torch.channels_last)
            x = torch.randn(1, 3, 224, 224, device="cuda", dtype=dtype).contiguous(
                memory_format=torch.channels_last)
            for _ in range(20):
                m(x)
            torch.cuda.synchronize()
            fn = _graphed(m, x) if a.setting == "graph" else m
            _window(fn, x, a.warmup_s)
            wins = []
            for _ in range(a.windows):
                ms, facts = _window(fn, x, a.window_s)
                sm, temp = clocks()
                wins.append({"ms": round(ms, 4), "core": _core(), "sm_mhz": sm, "temp_c": temp, **facts})
                time.sleep(a.gap_s)
            out[prec] = {"windows": wins, "kernels": _kernels(m, x)}
            del m
            torch.cuda.empty_cache()
    print(json.dumps(out), flush=True)


NEIGHBOUR = """
import torch, torchvision, time, sys
m = torchvision.models.resnet50().eval().cuda().to(memory_format=torch.channels_last)
x = torch.randn(32, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
print("ready", flush=True)
with torch.inference_mode():
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        m(x); torch.cuda.synchronize()
"""


def _run_one(a: argparse.Namespace, setting: str) -> dict | None:
    cmd = [sys.executable, __file__, "--child", setting, "--windows", str(a.windows),
           "--window-s", str(a.window_s), "--gap-s", str(a.gap_s), "--warmup-s", str(a.warmup_s),
           "--core", str(a.core)]
    neighbour = None
    if setting == "beside":
        neighbour = subprocess.Popen([sys.executable, "-c", NEIGHBOUR, "60"], stdout=subprocess.PIPE,
                                     text=True)
        neighbour.stdout.readline()
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    finally:
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait()
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("{")), None)
    if line is None:
        print(f"{setting}: failed rc={res.returncode}: {res.stderr[-400:]}", file=sys.stderr)
        return None
    return json.loads(line)


def summary(runs: list[dict]) -> dict:
    """Per setting and precision: process medians, spread across processes and inside them."""
    out: dict = {}
    for s in SETTINGS:
        for prec in ("fp32", "fp16"):
            procs = [r[prec] for r in runs if r["setting"] == s and prec in r]
            if not procs:
                continue
            meds = [statistics.median(w["ms"] for w in p["windows"]) for p in procs]
            inside = [max(w["ms"] for w in p["windows"]) / min(w["ms"] for w in p["windows"]) for p in procs]
            out[f"{s}/{prec}"] = {
                "process_medians_ms": [round(m, 3) for m in meds],
                "across_processes": round(max(meds) / min(meds), 3),
                "inside_process_max": round(max(inside), 3),
                "kernel_sets": sorted({p["kernels"] for p in procs}),
                "cores": sorted({w["core"] for p in procs for w in p["windows"]}),
                "sm_mhz": sorted({w["sm_mhz"] for p in procs for w in p["windows"] if w["sm_mhz"]}),
                "steal_ticks": [w.get("steal_ticks") for p in procs for w in p["windows"]],
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child")
    ap.add_argument("--procs", type=int, default=5)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--window-s", type=float, default=0.4)
    ap.add_argument("--gap-s", type=float, default=0.3)
    ap.add_argument("--warmup-s", type=float, default=0.3)
    ap.add_argument("--core", type=int, default=2)
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.child:
        a.setting = a.child
        child(a)
        return
    runs: list[dict] = []
    for i in range(a.procs):
        for s in a.settings.split(","):
            r = _run_one(a, s)
            if r is not None:
                runs.append(r)
                print(s, i, {p: [(w["ms"], w["gpu_span_ms_per_call"], w["steal_ticks"], w["nivcsw"])
                                 for w in r[p]["windows"]] for p in ("fp32", "fp16")}, flush=True)
            if a.out:
                with open(a.out, "w") as f:
                    json.dump({"command": sys.argv, "runs": runs, "summary": summary(runs)}, f, indent=1)
    print(json.dumps(summary(runs), indent=1))


if __name__ == "__main__":
    main()
