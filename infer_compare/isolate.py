"""One spawned process per measured cell, with a timeout.

A native crash or a hang in a backend becomes a failed row and the run goes on; the
child's peak RSS is that backend's memory. The child is a fresh interpreter started
with ``python -m infer_compare.isolate SPEC RESULT`` (the equivalent of
multiprocessing's *spawn* start method, with the child's stderr captured so that a
crash says why). It imports only the runner's own runtime: no torch for ONNX
Runtime, OpenVINO or TFLite cells.

The spec is a JSON file:
    runner       runner name from formats.RUNNERS, or "module:Class"
    artifact     path of the artifact to load
    device       "cpu", "cuda:0", ...
    options      RunOptions fields (precision, format, threads, batch_size, model, cache_dir) and
                 ``runner``: the runner's declared options as a dict (options.py)
    inputs       .npy of preprocessed real images; the timed batch is built from them
    parity_inputs  .npy of the parity set (may be null); outputs go to ``outputs``
    loop         LoopSettings fields
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

FAIL_TAIL_LINES = 12


def _tail(text: str, n: int = FAIL_TAIL_LINES) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


def run_cell(spec: dict[str, Any], timeout_s: float, workdir: Path, tag: str,
             env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one cell in a child process. Always returns a result dict; never raises for
    a failure of the child (``ok`` False, ``error`` set, ``status`` run_failed or skipped)."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec_path = workdir / f"{tag}.spec.json"
    result_path = workdir / f"{tag}.result.json"
    if result_path.exists():
        result_path.unlink()
    spec_path.write_text(json.dumps(spec))
    child_env = {**os.environ, **(env or {})}
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    cmd = [sys.executable, "-m", "infer_compare.isolate", str(spec_path), str(result_path)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", env=child_env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        return {"ok": False, "status": "run_failed",
                "error": f"timed out after {timeout_s:.0f} s (a hang, or raise --cell-timeout); killed",
                "stderr_tail": _tail(err), "wall_s": time.perf_counter() - t0}
    res: dict[str, Any] | None = None
    if result_path.exists():
        try:
            res = json.loads(result_path.read_text())
        except json.JSONDecodeError:
            res = None
    if res is None:
        rc = proc.returncode
        if rc is not None and rc < 0:
            try:
                how = f"killed by signal {signal.Signals(-rc).name}"
            except ValueError:
                how = f"killed by signal {-rc}"
        else:
            how = f"exited with status {rc} without a result"
        detail = _tail(err) or _tail(out)
        return {"ok": False, "status": "run_failed",
                "error": f"backend process crashed ({how})" + (f": {detail.splitlines()[-1]}" if detail else ""),
                "stderr_tail": detail, "wall_s": time.perf_counter() - t0}
    res["wall_s"] = time.perf_counter() - t0
    if not res.get("ok"):
        res.setdefault("stderr_tail", _tail(err))
    return res


# ----------------------------------------------------------------------------- child


def _peak_rss_mb() -> float | None:
    """This process's own peak RSS. On Linux, VmHWM of /proc/self/status: ru_maxrss would carry the
    parent's RSS at fork time across exec (Linux keeps it in the signal struct), so a small runtime
    started from a parent holding ResNet-50 would report the parent's gigabyte."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return r / (1024 * 1024) if sys.platform == "darwin" else r / 1024
    except Exception:
        return None


def _tile(images, n: int):
    import numpy as np

    if len(images) >= n:
        return np.ascontiguousarray(images[:n])
    reps = -(-n // len(images))
    return np.ascontiguousarray(np.concatenate([images] * reps)[:n])


def execute(spec: dict[str, Any]) -> dict[str, Any]:
    """The child's work: load, first inference, warm-up, timed loop, parity outputs."""
    import numpy as np

    from .backends import load_impl, options_class
    from .backends.runner import RunOptions
    from .bench import LoopSettings, time_loop
    from .errors import BackendUnavailable
    from .formats import RUNNERS
    from .options import NoOptions

    rname = spec["runner"]
    impl = RUNNERS[rname].impl if rname in RUNNERS else rname
    stage = "import"
    runner = None
    try:
        cls = load_impl(impl)
        given = dict(spec.get("options", {}))
        ocls = options_class(rname) if rname in RUNNERS else NoOptions
        given["runner"] = ocls.from_dict(given.get("runner") or {})
        opts = RunOptions(**given)
        runner = cls(spec["artifact"], spec.get("device", "cpu"), opts)
        stage = "load"
        t0 = time.perf_counter()
        runner.load()
        load_s = time.perf_counter() - t0
        fixed = runner.fixed_batch
        b = opts.batch_size
        if fixed is not None and fixed != b:
            return {"ok": False, "status": "skipped",
                    "error": f"the artifact has a static batch of {fixed}; batch {b} cannot run"}
        stage = "run"
        images = np.load(spec["inputs"])
        x = runner.prepare(_tile(images, b))
        loop = LoopSettings(**spec.get("loop", {}))
        lr = time_loop(runner.run, x, loop)
        extra = runner.extra_metrics()
        outputs_written = False
        if spec.get("parity_inputs") and spec.get("outputs"):
            stage = "parity"
            pin = np.load(spec["parity_inputs"])
            outs = []
            for i in range(0, len(pin), b):
                chunk = pin[i:i + b]
                n = len(chunk)
                if n < b:  # pad to the measured batch size, drop the padding afterwards
                    chunk = _tile(chunk, b)
                outs.append(runner.infer(np.ascontiguousarray(chunk))[:n])
            np.save(spec["outputs"], np.concatenate(outs).astype(np.float32))
            outputs_written = True
        return {
            "ok": True,
            "load_s": load_s,
            "first_infer_ms": lr.first_ns / 1e6 if lr.first_ns is not None else None,
            "samples_ns": lr.samples_ns,
            "wall_ns": lr.wall_ns,
            "exec_precision": runner.exec_precision,
            "settings": runner.settings,
            "notes": list(runner.notes),
            "versions": runner.library_versions(),
            "extra": extra,
            "outputs_written": outputs_written,
        }
    except BackendUnavailable as e:
        return {"ok": False, "status": "skipped", "error": e.reason, "hint": e.hint, "stage": stage}
    except Exception as e:  # recorded as a failed row; the parent goes on
        msg = str(e).strip().splitlines()
        return {"ok": False, "status": "run_failed", "stage": stage,
                "error": f"{stage}: {type(e).__name__}: {msg[0] if msg else ''}".rstrip(": "),
                "traceback": _tail(traceback.format_exc(), 20)}
    finally:
        if runner is not None:
            try:
                runner.close()
            except Exception:
                pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    spec_path, result_path = argv[0], argv[1]
    spec = json.loads(Path(spec_path).read_text())
    res = execute(spec)
    res["peak_rss_mb"] = _peak_rss_mb()
    tmp = result_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f)
    os.replace(tmp, result_path)
    sys.stdout.flush()
    # Skip interpreter teardown: some runtimes crash in their atexit handlers, which
    # would turn a good measurement into a failed row.
    os._exit(0)


if __name__ == "__main__":
    main()
