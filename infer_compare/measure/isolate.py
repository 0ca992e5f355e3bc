"""One spawned process per configuration (runner, format, precision, device), with a
timeout per batch size.

The child is a fresh interpreter started with ``python -m infer_compare.measure.isolate SPEC
RESULT`` (the equivalent of multiprocessing's *spawn* start method, with its stderr
kept so that a crash says why). It imports only the runner's own runtime: no torch
for ONNX Runtime, OpenVINO or TFLite cells. It loads the runtime once and measures
each batch size in turn (child.py), appending one :class:`~infer_compare.measure.cells.CellResult`
per batch size and scenario to RESULT as soon as it is done.

A native crash or a hang becomes a failed result for the batch size in flight; the
batch sizes after it run in a fresh process, so nothing already measured is lost. The
child runs in its own process group: on a timeout, and when the parent is interrupted
(Ctrl-C, SIGTERM), the whole group is killed, so no child keeps a GPU or an Edge TPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from infer_compare.host.launch import ChildNotStarted, describe_exit, kill_group, popen, read_tail
from infer_compare.measure.cells import CellResult, CellSpec
from infer_compare.measure.forkserver import ForkServer
from infer_compare.measure.gpus import parse_cores
from infer_compare.measure.residents import Residents

POLL_S = 0.05
# once a child has written every result it was asked for, only its end is left (a resident process: the reset
# between configurations, 0.01-0.1 s in the rows' extra.resident_process.reset.between_s, then its done file):
# polled this often, so that the next configuration does
# not wait for the rest of a 50 ms poll (25 ms on average)
FINAL_POLL_S = 0.005
FINAL_WINDOW_S = 2.0  # ... for this long at most (a child that hangs at its end is polled as before)
# the CPU cores a measuring child runs on ("0-7,16-23"), set by the GPU phase
CORES_ENV = "INFER_COMPARE_CORES"


def pin_from_env() -> None:
    """Pin this measuring child (and the threads it starts) to the cores of ``INFER_COMPARE_CORES``, with as
    many OpenMP threads as it has cores: a runtime imported before the pinning (PyTorch, in a fork server)
    sized its thread pool for every core of the host, and that many spinning threads on a few cores made the
    model's construction on 4 cores 5-10 times slower (measured on the 2 x H100 host, --cpu-rows beside).
    A configuration that sets its own threads (the CPU rows) sets them in its load, after this."""
    text = os.environ.get(CORES_ENV, "")
    if text and hasattr(os, "sched_setaffinity"):
        try:
            cores = parse_cores(text)
            os.sched_setaffinity(0, cores)
        except (ValueError, OSError) as e:
            print(f"infer-compare: {CORES_ENV}={text!r} not applied: {e}", file=sys.stderr)
            return
        os.environ["OMP_NUM_THREADS"] = str(len(cores))  # runtimes imported from now on
        torch = sys.modules.get("torch")  # imported by the fork server: its pool is sized now, before any use
        if torch is not None:
            torch.set_num_threads(len(cores))


def _read_results(path: Path, process: int = 1) -> list[CellResult]:
    """One result per batch size and scenario, in order;
    a later line for the same pair amends the earlier one."""
    out: dict[tuple[int, str], CellResult] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                res = CellResult.from_dict(json.loads(line)).replace(process=process)
            except (json.JSONDecodeError, ValueError, TypeError):
                break  # a line cut short by a crash: that batch size did not finish
            out[res.key] = res
    return list(out.values())


class _Progress:
    """How many results the child has written so far, for the parent's poll. The file is parsed again only
    when its size or mtime changed: parsing it on every poll (20 times a second) while the child measures took
    a core from the child once a result with many samples was in it (a 130,000-sample latency result: 72 ms
    per parse on the 2-core machine, more than the 50 ms between polls, during the throughput scenario and
    every batch size after it)."""

    def __init__(self, path: Path):
        self.path, self.n = path, 0
        self._seen: tuple[int, int] | None = None

    def count(self) -> int:
        try:
            st = self.path.stat()
        except OSError:
            return self.n
        if (st.st_size, st.st_mtime_ns) != self._seen:
            self._seen = (st.st_size, st.st_mtime_ns)
            self.n = len(_read_results(self.path))
        return self.n


def _launch(args: list[str], env: dict[str, str], err: Any, err_path: Path, server: ForkServer | None) -> Any:
    """The measuring child: forked by the runtime's fork
    server where there is one, else a fresh interpreter."""
    if server is not None:
        try:
            return server.spawn("infer_compare.measure.isolate", args, env, str(err_path))
        except OSError:
            pass  # the server is gone: a fresh interpreter
    return popen("infer_compare.measure.isolate", args, env, stdout=err, stderr=subprocess.STDOUT)


def _one_process(spec: CellSpec, timeout_s: float, workdir: Path, tag: str, env: dict[str, str],
                 process: int, server: ForkServer | None = None, cancel: Any = None,
                 residents: Residents | None = None) -> list[CellResult]:
    """Run one child on ``spec`` (with ``residents``: ask the resident process of its runtime and GPU); the
    results it wrote, plus a failed one for the batch size in flight."""
    spec_path, result_path = (workdir / f"{tag}.p{process}.spec.json",
                              workdir / f"{tag}.p{process}.result.jsonl")
    err_path, done_path = workdir / f"{tag}.p{process}.stderr", workdir / f"{tag}.p{process}.done"
    result_path.unlink(missing_ok=True)
    done_path.unlink(missing_ok=True)
    spec_path.write_text(json.dumps(spec.to_dict()))
    t0 = time.perf_counter()
    with open(err_path, "w+", errors="replace") as err:
        try:
            res = _resident(residents, server, env)
            if res is not None:
                res.ask(spec_path, result_path, done_path, f"{spec.runner} {spec.format} {spec.precision}")
                err_path, proc = res.log, res.proc
            else:
                proc = _launch([str(spec_path), str(result_path)], env, err, err_path, server)
        except ChildNotStarted as e:  # a failed row for each pair, and the run goes on
            return _with_failure(spec, result_path, process, t0, err_path, str(e), every=True)
        why = _watch(proc, result_path, timeout_s, cancel, done_path if res is not None else None,
                     residents, res, expected=len(spec.pairs()))
    # it said it leaves (a failed row): the next one gets a fresh one
    if res is not None and _left(done_path):
        residents.retire(res)
    if why:
        return _with_failure(spec, result_path, process, t0, err_path, why)
    results = _read_results(result_path, process)
    if len(results) < len(spec.pairs()):
        if res is not None:  # it measured no more of this configuration: it ended, or will be
            residents.forget(res)
        detail = read_tail(err_path)
        why = (f"backend process crashed ({describe_exit(proc.returncode)})"
               + (f": {detail.splitlines()[-1]}" if detail else ""))
        return _with_failure(spec, result_path, process, t0, err_path, why)
    return results


def _left(done_path: Path) -> bool:
    try:
        return done_path.read_text().startswith("exit")
    except OSError:
        return False


def _resident(residents: Residents | None, server: ForkServer | None, env: dict[str, str]) -> Any:
    """The resident process to ask, or None: a child of its own (no residents, or no named pipe here)."""
    if residents is None:
        return None
    try:
        return residents.get(server, env)
    except ChildNotStarted:
        raise
    except OSError:  # no named pipe where the work folder is: a child of its own, as before
        return None


def _watch(proc: Any, result_path: Path, timeout_s: float, cancel: Any, done_path: Path | None,
           residents: Residents | None, res: Any, expected: int = 0) -> str:
    """Wait until the child ends (a resident: until it says this configuration is done, or ends); "" or why it
    was killed (a timeout). Ctrl-C, SIGTERM, ``cancel``: the child is killed and KeyboardInterrupt raised.
    ``expected``: the results the child was asked for; once they are written, the poll is FINAL_POLL_S for
    FINAL_WINDOW_S."""
    last, seen, progress = time.perf_counter(), 0, _Progress(result_path)

    def running() -> bool:
        return proc.poll() is None and (done_path is None or not done_path.exists())

    def kill() -> None:
        if res is not None and residents is not None:
            residents.forget(res)
        else:
            kill_group(proc)

    try:
        while running():
            fast = expected and seen >= expected and time.perf_counter() - last < FINAL_WINDOW_S
            time.sleep(FINAL_POLL_S if fast else POLL_S)
            if cancel is not None and cancel.is_set():  # another GPU's worker, or the main thread, stopped
                raise KeyboardInterrupt("cancelled")
            n = progress.count()
            if n > seen:
                seen, last = n, time.perf_counter()
            if time.perf_counter() - last > timeout_s:
                kill()
                return f"timed out after {timeout_s:.0f} s (a hang, or raise --cell-timeout); killed"
    except BaseException:  # Ctrl-C, SIGTERM: no child survives its parent
        kill()
        raise
    return ""


def _with_failure(spec: CellSpec, result_path: Path, process: int, t0: float, err_path: Path,
                  why: str, every: bool = False) -> list[CellResult]:
    """The results written so far and a failed one for the batch size in flight (``every``: for every
    pair not measured, when no process could be started to measure them)."""
    results = _read_results(result_path, process)
    have = {r.key for r in results}
    todo = [p for p in spec.pairs() if p not in have]
    if not todo:  # it finished every batch size, then hung or died on exit
        return results
    batch = todo[0][0]  # the batch size in flight: its scenarios not measured fail with it
    stderr = read_tail(err_path)
    return results + [CellResult.failed(b, "run_failed", why if i == 0 else f"not measured: {why}",
                                        stderr_tail=stderr, wall_s=time.perf_counter() - t0, process=process,
                                        scenario=scen)
                      for i, (b, scen) in enumerate(p for p in todo if every or p[0] == batch)]


def run_cell(spec: CellSpec | dict[str, Any], timeout_s: float, workdir: Path, tag: str,
             env: dict[str, str] | None = None, server: ForkServer | None = None,
             cancel: Any = None, residents: Residents | None = None) -> list[CellResult]:
    """Measure ``spec`` at each of its batch sizes in child processes (forked by ``server`` when given,
    see measure/forkserver.py; with ``residents``, in the resident process of its runtime and environment,
    measure/residents.py): one CellResult per batch size and scenario, in order. Never raises for a
    failure of a child (``ok`` False, ``error`` set); ``cancel`` (a threading.Event) set: the child is
    killed and KeyboardInterrupt raised."""
    spec = spec if isinstance(spec, CellSpec) else CellSpec.from_dict(spec)
    workdir.mkdir(parents=True, exist_ok=True)
    child_env = {**os.environ, **(env or {})}
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    out: list[CellResult] = []
    process = 1
    todo = spec
    while todo.batch_sizes:
        got = _one_process(todo, timeout_s, workdir, tag, child_env, process, server, cancel, residents)
        out += got
        have = {r.key for r in out}
        todo = spec.remaining({b for b in spec.batch_sizes
                               if all(p in have for p in spec.pairs() if p[0] == b)})
        process += 1
    return out


def main(argv: list[str] | None = None) -> int:
    # deferred: the measuring child's start stays light without it (+11 modules)
    from infer_compare.measure.child import measure_all

    argv = sys.argv[1:] if argv is None else argv
    pin_from_env()
    spec = CellSpec.from_dict(json.loads(Path(argv[0]).read_text()))
    with open(argv[1], "a", buffering=1) as f:  # one line per batch size, written as it finishes
        measure_all(spec, lambda res: (f.write(json.dumps(res.to_dict()) + "\n"), f.flush()))
    sys.stdout.flush()
    # Skip interpreter teardown: some runtimes crash in their atexit handlers, which
    # would turn a good measurement into a failed row.
    os._exit(0)


if __name__ == "__main__":
    main()
