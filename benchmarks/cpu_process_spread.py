"""How much a CPU row's speed depends on the process that measures it, and which process settings change that.

Bare PyTorch loops, nothing of infer-compare's: a torchvision model (``--model``, seeded random weights,
eval), batch 1, fp32, ``--threads`` threads, each process measuring ``--windows`` windows of ``--window-s``
seconds with ``--gap-s`` idle between them, ``--procs`` fresh processes per setting. The settings alternate
process by process (A B C ... A B C), so the machine's drift falls on all of them alike:

* ``default``: what a plain loop does;
* ``malloc``: glibc's mmap threshold at its largest and the trim threshold at 1 GiB (``mallopt`` before
  torch is imported: what the A/B gate does in its processes, infer_compare/host/malloc.py);
* ``thp``: PyTorch's CPU allocator asks for transparent huge pages (``THP_MEM_ALLOC_ENABLE=1``) where the
  kernel's THP mode is ``madvise``;
* ``aslr-off``: the process started under ``setarch -R`` (the same address layout in every process);
* ``omp-bind``: the OpenMP threads bound to cores (``OMP_PROC_BIND=close``, ``OMP_PLACES=cores``);
* ``all``: every one of the above; any of them joined with ``+`` (``malloc+omp-bind``) for those together.

Per window: the median ms of its calls, the minor page faults per call, the process's involuntary context
switches, the machine's steal time (``/proc/stat``) and the CPU the calling thread was on at its end. The
summary gives, per setting: the spread of the process medians (largest / smallest), the median spread inside
a process (largest / smallest window), and the standard deviation of log process medians beside what the
windows inside the processes would give alone (``sd_within / sqrt(windows)``): where the first is much
larger, processes differ for their whole life.

    python benchmarks/cpu_process_spread.py --procs 8 --out spread.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

PARTS = ("malloc", "thp", "aslr-off", "omp-bind")
SETTINGS = ("default", *PARTS, "all")


def _steal() -> int:
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])


def _cpu() -> int:
    """The CPU this thread last ran on (/proc/self/stat's field 39)."""
    with open("/proc/thread-self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def child(model: str, threads: int, windows: int, window_s: float, gap_s: float, fix_malloc: bool) -> dict:
    """One process's windows (its settings come from the environment and how it was started)."""
    import ctypes
    import resource

    if fix_malloc:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 4 * 1024 * 1024 * ctypes.sizeof(ctypes.c_long))  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    import torch
    import torchvision

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    m = getattr(torchvision.models, model)().eval()
    x = torch.randn(1, 3, 224, 224)
    out = []
    with torch.inference_mode():
        for _ in range(10):
            m(x)
        for _ in range(windows):
            time.sleep(gap_s)
            ru0, st0, ts = resource.getrusage(resource.RUSAGE_SELF), _steal(), []
            end = time.perf_counter() + window_s
            while time.perf_counter() < end or len(ts) < 5:
                t = time.perf_counter()
                m(x)
                ts.append(time.perf_counter() - t)
            ru1 = resource.getrusage(resource.RUSAGE_SELF)
            out.append({"ms": round(statistics.median(ts) * 1e3, 3), "calls": len(ts),
                        "faults_per_call": round((ru1.ru_minflt - ru0.ru_minflt) / len(ts), 1),
                        "invol_cs": ru1.ru_nivcsw - ru0.ru_nivcsw, "steal_ticks": _steal() - st0,
                        "cpu": _cpu()})
    return {"torch": torch.__version__, "threads": torch.get_num_threads(), "windows": out}


def _command(setting: str, args) -> tuple[list[str], dict[str, str]]:
    drop = ("THP_MEM_ALLOC_ENABLE", "OMP_PROC_BIND", "OMP_PLACES")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    parts = set(PARTS) if setting == "all" else set(setting.split("+"))
    if "thp" in parts:
        env["THP_MEM_ALLOC_ENABLE"] = "1"
    if "omp-bind" in parts:
        env.update(OMP_PROC_BIND="close", OMP_PLACES="cores")
    cmd = [sys.executable, __file__, "--child", "--model", args.model, "--threads", str(args.threads),
           "--windows", str(args.windows), "--window-s", str(args.window_s), "--gap-s", str(args.gap_s)]
    if "malloc" in parts:
        cmd.append("--fix-malloc")
    if "aslr-off" in parts:
        cmd = ["setarch", platform.machine(), "-R", *cmd]
    return cmd, env


def _spread(xs: list[float]) -> float:
    return round(max(xs) / min(xs), 3)


def _known(setting: str) -> bool:
    return setting in SETTINGS or all(p in PARTS for p in setting.split("+"))


def summary(procs: list[dict]) -> dict:
    """Per setting: the spread across processes and inside them (see the module's docstring)."""
    out = {}
    for s in dict.fromkeys(p["setting"] for p in procs):
        got = [p for p in procs if p["setting"] == s and p.get("windows")]
        if len(got) < 2:
            continue
        meds = [statistics.median(w["ms"] for w in p["windows"]) for p in got]
        inside = [_spread([w["ms"] for w in p["windows"]]) for p in got]
        logs = [[math.log(w["ms"]) for w in p["windows"]] for p in got]
        within = statistics.mean(statistics.variance(ls) for ls in logs) ** 0.5
        n = len(logs[0])
        out[s] = {"processes": len(got), "median_ms": round(statistics.median(meds), 3),
                  "across_processes": _spread(meds), "inside_process_median": statistics.median(inside),
                  "sd_log_process_medians": round(statistics.stdev(math.log(m) for m in meds), 4),
                  "sd_from_windows_alone": round(within / n ** 0.5, 4),
                  "faults_per_call_median": statistics.median(w["faults_per_call"] for p in got
                                                              for w in p["windows"])}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--fix-malloc", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--procs", type=int, default=8, help="processes per setting (default 8)")
    ap.add_argument("--windows", type=int, default=6)
    ap.add_argument("--window-s", type=float, default=0.5)
    ap.add_argument("--gap-s", type=float, default=0.2)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--out", default="cpu-process-spread.json")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.model, args.threads, args.windows, args.window_s, args.gap_s,
                               args.fix_malloc)))
        return 0
    settings = args.settings.split(",")
    if not all(_known(s) for s in settings):
        ap.error(f"unknown settings: {[s for s in settings if not _known(s)]} (known: {', '.join(SETTINGS)})")
    state = {"conditions": {"command": " ".join(sys.argv), "machine": platform.machine(),
                            "cpus": os.cpu_count(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                            "thp": open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip()},
             "processes": []}
    for i in range(args.procs):
        for s in settings:
            cmd, env = _command(s, args)
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
            ok = r.returncode == 0 and r.stdout.strip()
            got = json.loads(r.stdout.strip().splitlines()[-1]) if ok else {"error": r.stderr[-500:]}
            state["processes"].append({"setting": s, "index": i, **got})
            state["summary"] = summary(state["processes"])
            tmp = args.out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(state, f, indent=1)
            os.replace(tmp, args.out)  # saved after every process
            ws = got.get("windows") or []
            print(f"{i} {s:9s} " + " ".join(f"{w['ms']:.1f}" for w in ws), flush=True)
    print(json.dumps(state["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
