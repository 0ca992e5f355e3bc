"""A resident measuring process: one per runtime and GPU, measuring that runtime's configurations on
that GPU in turn (``python -m infer_compare.measure.resident REQUESTS``, or forked by the runtime's
fork server), so that the interpreter, the runtime's import, the CUDA context and the runtime's
libraries are started once for all of them instead of once per configuration.

Each line of the REQUESTS pipe (a FIFO the parent writes) asks for one configuration:
``{"spec": PATH, "result": PATH, "done": PATH}``. The process measures it exactly as a
configuration's own child does (child.measure_all: one result line per batch size and scenario,
appended to ``result`` as soon as it is done), then writes ``done`` ("done", or "exit" when it
leaves: after a failed row). End of the pipe: it exits.

After each configuration it puts back what one configuration leaves in the process and the
next would otherwise inherit: the runtime's own state (``Runner.reset_process_state``: PyTorch
forgets torch.compile's compiled graphs, so that each configuration compiles as in a fresh
process, frees the cached GPU memory and resets its peak), garbage, and the peak RSS (VmHWM,
reset through /proc/self/clear_refs where Linux allows it).

Isolation is kept where it matters (measure/residents.py): a crash or a hang in a configuration
ends this process; that configuration's batch size in flight is a failed row, the rest of it and
the configurations after it run in a fresh resident process.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from infer_compare.host import gpu_turn
from infer_compare.measure.isolate import pin_from_env

# /proc/PID/clear_refs: "reset the peak resident set size to the current RSS" (Linux >= 4.0)
VMHWM_RESET = "5"


def reset_peak_rss() -> bool:
    """Reset this process's peak RSS (VmHWM) to its current RSS; False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write(VMHWM_RESET)
        return True
    except OSError:
        return False


def between_configurations(classes: list[Any]) -> dict[str, Any]:
    """Put back what the configurations measured so far left in this process; what was done, and how long it
    took (``between_s``). One garbage collection: a runtime's hook that collects itself (PyTorch: after
    torch.compile forgot its graphs, before the CUDA cache gives memory back) says so (``gc_collected``), and
    then none other runs; otherwise one here. A full collection walks every object of the process: 0.2 s with
    torch imported and one ResNet-50 built on the 2-core machine, and this ran two per configuration."""
    t0 = time.perf_counter()
    done: dict[str, Any] = {}
    with gpu_turn.holding():  # giving GPU memory back is GPU work: not while another process on it is timed
        _reset(classes, done)
    if not done.get("gc_collected"):
        gc.collect()  # what the last configuration held
        done["gc_collected"] = True
    done["peak_rss_reset"] = reset_peak_rss()
    done["between_s"] = round(time.perf_counter() - t0, 4)
    return done


def _reset(classes: list[Any], done: dict[str, Any]) -> None:
    """Each runtime's own reset (``Runner.reset_process_state``); a reset that fails is said in ``done``."""
    for cls in classes:
        hook = getattr(cls, "reset_process_state", None)
        if hook is None:
            continue
        try:
            done.update(hook() or {})
        except Exception as e:  # a reset that fails is said, the measurement goes on
            done[f"reset_failed_{cls.__name__}"] = f"{type(e).__name__}: {e}"


def _runner_class(spec: Any, find: Any) -> Any:
    try:
        return find(spec)[0]
    except Exception:  # the configuration's own measurement says why it cannot load
        return None


def serve(requests: Any) -> int:
    """Measure each requested configuration in turn; the number measured. After each, the process puts back
    what the configuration left; a configuration with a failed row, or a reset that failed (a CUDA error
    stays with its context), ends the process: its ``done`` file says ``exit``, and the next configuration
    gets a fresh one rather than inherit a process in a state no fresh one would have."""
    # deferred: the process's start stays light without them
    from infer_compare.measure.cells import CellSpec
    from infer_compare.measure.child import _runner_class as find
    from infer_compare.measure.child import measure_all

    classes: list[Any] = []
    n, reset = 0, {}
    for line in requests:
        if not line.strip():
            continue
        req = json.loads(line)
        spec = CellSpec.from_dict(json.loads(Path(req["spec"]).read_text()))
        failed: list[str] = []
        with open(req["result"], "a", buffering=1) as f:  # one line per batch size, written as it finishes
            measure_all(spec, _writer(f, n, reset, failed))
        cls = _runner_class(spec, find)
        if cls is not None and cls not in classes:
            classes.append(cls)
        reset = between_configurations(classes)
        leave = bool(failed) or any(k.startswith("reset_failed") for k in reset)
        sys.stdout.flush()
        Path(req["done"]).write_text("exit\n" if leave else "done\n")
        n += 1
        if leave:
            break
    return n


def _writer(f: Any, earlier: int, reset: dict[str, Any], failed: list[str]) -> Any:
    def emit(res: Any) -> None:
        if res.status == "run_failed":
            failed.append(res.error)
        f.write(json.dumps(_tagged(res, earlier, reset).to_dict()) + "\n")
        f.flush()
    return emit


def _tagged(res: Any, earlier: int, reset: dict[str, Any]) -> Any:
    """A result that says it was measured in a resident process, after ``earlier`` configurations."""
    extra = {**res.extra,
             "resident_process": {"position": earlier + 1, **({"reset": reset} if reset else {})}}
    return res.replace(extra=extra)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    pin_from_env()
    with open(argv[0], encoding="utf-8") as requests:
        serve(requests)
    sys.stdout.flush()
    # as a configuration's own child: no interpreter teardown (some runtimes crash in their atexit handlers)
    os._exit(0)


if __name__ == "__main__":
    main()
