"""The changes benchmarks/gate_ab_quality.py injects into side B of an A/B gate run, and the interpreters that
carry them.

Two ways (``--inject``):

* ``runtime`` (the default): at the runtime library's own call, in side B's interpreter only, handed to the
  gate with ``--python-b``: a ``#!/bin/sh`` wrapper that puts a site folder with a ``sitecustomize`` on
  PYTHONPATH, names the change in GATE_AB_RT and execs this interpreter. The sitecustomize patches the call
  when the runtime's own module has been imported (an import hook: nothing is imported by it, so a process
  that never uses the runtime pays nothing for it; importing them eagerly would cost 0.08-0.18 s for
  onnxruntime, 0.24 s for openvino and 1.4 s for torch on the 2-core VM). The calls, as the project's
  runners make them (infer_compare/backends/*/run.py):

  - ONNX Runtime: ``onnxruntime.InferenceSession.run`` (CPU rows) and ``run_with_iobinding`` (CUDA rows);
  - OpenVINO: ``openvino.InferRequest.infer`` (the runner's timed call; ``CompiledModel.__call__`` goes
    through it too). The throughput scenario's AsyncInferQueue calls C++ directly and is not slowed;
  - PyTorch: ``torch.nn.Module.__call__`` of the top-level model: the process's first call of a module is
    taken as the model's and the wrapper moves onto its class, so that its submodules' calls (15 for LeNet-5,
    about 150 for MobileNet v2) do not each pay a wrapper frame (on LeNet-5's 135 us call that frame made it
    2 % slower; on the class alone, under 1 %).

  ``slow``: a busy wait after each call, until it took ``1 + k`` times its own duration. ``stall``: the same
  for a share of the calls drawn by a seeded RNG (every process draws the same sequence), the others
  untouched. The wrapper's own frame (two clock reads) stays in every slowed call: about 0.2-0.4 us, 1 % of
  LeNet-5's 30-50 us ONNX Runtime and OpenVINO calls, nothing on MobileNet v2's.

  Every process whose calls were slowed appends one line to GATE_AB_RT_LOG at its first slowed call (pid,
  call, that call's duration): the benchmark records how many did, so that an injection that hooked nothing
  shows as such instead of as a missed change.

* ``runner``: the older injection, a sitecustomize on the path of the gate and of both sides' processes (one
  interpreter) that wraps the project's own runner class's ``run`` in side B's processes only (a child whose
  arguments name a side-B spec, measure/ab.py's "<tag>-b.spec.json"); a side-A process puts the runner's
  own method back at its first call. GATE_AB_INJECT_ALL=1: in every process (a plain run, for the cross-run
  gate). The side is decided at a process's first call: at 7c8688b-35683cb it was looked up in sys.argv at
  every call, about 1-2 us, which made LeNet-5's 30-50 us calls slower by several per cent more than the
  injection said; MobileNet v2's calls (4-25 ms) did not notice.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

# per runtime: the row it changes (the default selection's), the project's runner (``runner`` injection) and
# the runtime's call (``runtime`` injection)
TARGETS = {
    "onnxruntime": {"row": "onnxruntime/onnx/fp32/cpu/b1", "runner": ("onnxruntime.run", "OnnxRuntimeRunner"),
                    "call": "onnxruntime.InferenceSession.run, run_with_iobinding"},
    "openvino": {"row": "openvino/openvino/fp32/cpu/b1", "runner": ("openvino.run", "OpenVinoRunner"),
                 "call": "openvino.InferRequest.infer"},
    "pytorch": {"row": "pytorch/pytorch/fp32/cpu/b1", "runner": ("pytorch.run", "PyTorchRunner"),
                "call": "torch.nn.Module.__call__ of the top-level model"},
}
SLOW = {"slow5": 0.05, "slow10": 0.10, "slow20": 0.20}  # each call made 1 + k times as long
STALL = (0.05, 3)  # stall99: this share of the calls made this many times as long
# the module whose import the runtime injection waits for
RUNTIME_MODULE = {"onnxruntime": "onnxruntime", "openvino": "openvino", "pytorch": "torch"}

RUNTIME_SITE = '''
import os
_spec = os.environ.get("GATE_AB_RT", "")
if _spec:
    import sys, time
    _rt, _mode, *_p = _spec.split(":")
    _perf, _log, _seen = time.perf_counter, os.environ.get("GATE_AB_RT_LOG", ""), []
    if _mode == "slow":
        _k = float(_p[0])
        def _extra():
            return _k
    else:  # stall: a share of the calls made FACTOR times as long, drawn from a seeded RNG
        import random
        _rng, _share, _more = random.Random(_p[2]), float(_p[0]), float(_p[1]) - 1.0
        def _extra():
            return _more if _rng.random() < _share else 0.0
    def _note(what, took):  # once per process: proof that the injection reached a timed call
        _seen.append(1)
        try:
            if _log:
                with open(_log, "a") as f:
                    f.write(f"{os.getpid()} {what} {took * 1e6:.1f}us\\n")
        except OSError:  # the change is still made; the benchmark then reads "no process slowed"
            pass
    def _slowed(orig, what):
        def call(*a, **kw):
            t0 = _perf()
            out = orig(*a, **kw)
            k = _extra()
            if k:
                end = t0 + (1.0 + k) * (_perf() - t0)
                if not _seen:
                    _note(what, _perf() - t0)
                while _perf() < end:
                    pass
            return out
        call.__wrapped__ = orig
        return call
    def _onnxruntime(m):
        s = m.InferenceSession
        for n in ("run", "run_with_iobinding"):
            setattr(s, n, _slowed(getattr(s, n), "InferenceSession." + n))
    def _openvino(m):
        m.InferRequest.infer = _slowed(m.InferRequest.infer, "InferRequest.infer")
    def _torch(m):
        import threading
        mod, orig, inside = m.nn.Module, m.nn.Module.__call__, threading.local()
        def call(self, *a, **kw):  # the model's own class: a nested module of the same class runs plain
            if getattr(inside, "on", False):
                return orig(self, *a, **kw)
            inside.on = True
            try:
                return slowed(self, *a, **kw)
            finally:
                inside.on = False
        def first(self, *a, **kw):
            mod.__call__ = orig
            type(self).__call__ = call
            return call(self, *a, **kw)
        slowed = _slowed(orig, "Module.__call__")
        mod.__call__ = first
    _patch = {"onnxruntime": _onnxruntime, "openvino": _openvino, "torch": _torch}[_rt]
    class _Hook:
        """Patches the runtime right after its top-level module has run, whoever imports it."""
        def find_spec(self, name, path=None, target=None):
            if name != _rt:
                return None
            sys.meta_path.remove(self)
            import importlib.util
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None:
                return spec
            run = spec.loader.exec_module
            def exec_module(module):
                run(module)
                _patch(module)
            spec.loader.exec_module = exec_module
            return spec
    if _rt in sys.modules:
        _patch(sys.modules[_rt])
    else:
        sys.meta_path.insert(0, _Hook())
'''

RUNNER_SITE = '''
import os, sys, time
_t = os.environ.get("GATE_AB_INJECT", "")
if _t:
    import importlib
    _mod, _cls, _f = _t.split(":")
    _R = getattr(importlib.import_module("infer_compare.backends." + _mod), _cls)
    _orig, _k = _R.run, float(_f)
    _all = os.environ.get("GATE_AB_INJECT_ALL") == "1"
    _side = []
    def run(self, prepared):
        if not _side:  # decided at the first call: the side is the process's (later calls pay nothing for it)
            _side.append(_all or any(str(a).endswith("-b.spec.json") for a in sys.argv))
            if not _side[0]:
                _R.run = _orig
                return _orig(self, prepared)
        t0 = time.perf_counter()
        out = _orig(self, prepared)
        end = t0 + (1 + _k) * (time.perf_counter() - t0)
        while time.perf_counter() < end:
            pass
        return out
    _R.run = run
'''


def _site(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(text)
    return folder


def wrapper(path: Path, site: Path | None, env: dict[str, str]) -> Path:
    """A ``#!/bin/sh`` interpreter: ``site`` (if any) first on PYTHONPATH, ``env`` set, then this
    interpreter exec'd (tests/test_ab_gate.py's ``_slow_python``)."""
    lines = ["#!/bin/sh"]
    if site is not None:
        lines.append(f'PYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}"; export PYTHONPATH')
    lines += [f'{k}="{v}"; export {k}' for k, v in env.items()]
    lines.append(f'exec "{os.path.abspath(sys.executable)}" "$@"')
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def runtime_change(target: str, kind: str, seed: str) -> str:
    """GATE_AB_RT's value: ``<module>:slow:<k>``, or for ``stall99`` ``<module>:stall:0.05:3:<seed>`` (5 % of
    the calls made 3 times as long)."""
    mod = RUNTIME_MODULE[target]
    if kind == "stall99":
        return f"{mod}:stall:{STALL[0]}:{STALL[1]}:{seed.replace(':', '-')}"
    return f"{mod}:slow:{SLOW[kind]}"


def side_for(kind: str, inject: str | None, root: Path, out: Path, target: str, seed: str) -> dict | None:
    """Side B of a gate run of ``kind`` (``side_b``): ``inject`` None: unchanged ("unchanged2": under its own
    interpreter); "runtime" or "runner": the kind's change injected that way (None: a change that way has
    no such kind: the runner injection has no stall)."""
    if inject is None:
        return side_b("two" if kind == "unchanged2" else "one", root, out, None, "")
    if inject == "runner":
        return side_b("runner", root, out, target, str(SLOW[kind])) if kind in SLOW else None
    return side_b("runtime", root, out, target, runtime_change(target, kind, seed))


def side_b(mode: str, root: Path, out: Path, target: str | None, change: str) -> dict:
    """How side B runs for one gate run: ``python_b`` (a wrapper, or None: the gate's own interpreter),
    ``env`` for the gate's process, ``interpreter`` and ``injection`` in words, ``log`` (the runtime
    injection's).

    ``mode``: "one" (no --python-b, nothing injected), "two" (a wrapper, nothing injected), "runtime" or
    "runner" (``change`` injected for ``target``; ``change`` is GATE_AB_RT's value, or for "runner"
    the factor k)."""
    if mode == "one":
        return {"python_b": None, "env": {}, "interpreter": "one (no --python-b)", "injection": None}
    if mode == "two":
        py = wrapper(root / "python-b-plain", _site(root / "site-plain", RUNTIME_SITE), {})
        return {"python_b": str(py), "env": {}, "injection": None,
                "interpreter": "two (--python-b: a wrapper that execs this interpreter, nothing injected)"}
    if mode == "runner":
        site = _site(root / "site-runner", RUNNER_SITE)
        mod, cls = TARGETS[target]["runner"]
        path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))
        return {"python_b": None, "env": {"PYTHONPATH": path, "GATE_AB_INJECT": f"{mod}:{cls}:{change}"},
                "interpreter": "one (no --python-b; a sitecustomize in every process)",
                "injection": f"{cls}.run x(1 + {change}) in side B's processes"}
    log = out.parent / f"{out.name}.injected.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    py = wrapper(out.parent / f"{out.name}.python-b", _site(root / "site-runtime", RUNTIME_SITE),
                 {"GATE_AB_RT": change, "GATE_AB_RT_LOG": str(log)})
    return {"python_b": str(py), "env": {}, "log": str(log),
            "injection": f"{TARGETS[target]['call']}: {change}",
            "interpreter": "two (--python-b: a wrapper with the runtime's call slowed)"}


def slowed_processes(info: dict) -> list[str] | None:
    """The lines of the runtime injection's log (one per process whose calls were slowed), or None."""
    log = info.get("log")
    if not log:
        return None
    p = Path(log)
    return p.read_text().splitlines() if p.exists() else []


def start_cost(root: Path, runs: int = 7) -> dict:
    """Seconds an interpreter takes to start and exit (``-c pass``): plain, and through the runtime
    injection's wrapper with its sitecustomize installing its hook (the median of ``runs`` each), so that
    what the wrapper adds to each of side B's processes is on record."""
    py = wrapper(root / "python-b-cost", _site(root / "site-runtime", RUNTIME_SITE),
                 {"GATE_AB_RT": "onnxruntime:slow:0.1"})
    out = {}
    for name, exe in (("plain_s", sys.executable), ("wrapper_s", str(py))):
        ts = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run([exe, "-c", "pass"], check=True)
            ts.append(time.perf_counter() - t0)
        out[name] = round(sorted(ts)[runs // 2], 4)
    return out
