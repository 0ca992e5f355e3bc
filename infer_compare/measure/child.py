"""The measuring child's work (``python -m infer_compare.measure.isolate``): load the runner once,
then for each batch size: re-shape (or, for a runner that cannot, load a fresh one in
this process), first call, warm-up, timed loop, parity outputs. Each batch size's
result is emitted as soon as it is done; an error in one batch size is its result and
the next batch size still runs. Where the spec asks for the throughput scenario, it runs
after the latency scenario of the same batch size, on the same loaded runner, and emits
a second result (``scenario="throughput"``)."""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from infer_compare.backends.runner import RunOptions
from infer_compare.backends.throughput import ThroughputSettings
from infer_compare.base import batches
from infer_compare.base.batches import Batch
from infer_compare.base.errors import BackendUnavailable
from infer_compare.base.layout import LaidOut, Layout
from infer_compare.base.records import LATENCY, THROUGHPUT
from infer_compare.catalog.formats import RUNNERS
from infer_compare.catalog.options import NoOptions
from infer_compare.catalog.runtimes import load_impl, options_class
from infer_compare.host import gpu_turn
from infer_compare.host.energy import EnergyMeter, energy_fields
from infer_compare.measure import calibration, windows
from infer_compare.measure.bench import time_loop
from infer_compare.measure.cells import CellResult, CellSpec


def peak_rss_mb() -> float | None:
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


def tile(images: Batch, n: int) -> Batch:
    """The timed batch: ``n`` inputs (of each input, for a model with several), repeated where fewer."""
    return batches.tile(images, n)


def _runner_class(spec: CellSpec):
    impl = spec.impl or (RUNNERS[spec.runner].impl if spec.runner in RUNNERS else spec.runner)
    ocls = options_class(spec.runner) if spec.runner in RUNNERS else NoOptions
    return load_impl(impl), ocls.from_dict(spec.runner_options or {})


class Session:
    """The loaded runner, kept across batch sizes when it can re-shape."""

    def __init__(self, spec: CellSpec):
        self.spec = spec
        self.cls: Any = None
        self.opts: Any = None
        self.runner: Any = None
        self.batch: int | None = None  # the batch size the loaded runner is ready for
        self.cal = calibration.make()  # the fixed workload timed before each loop (for the regression gate)
        self.load = windows.LoadMeter(spec.device)  # each window's load reading (measure/windows.py)

    def runner_for(self, batch: int) -> tuple[Any, float]:
        """A loaded runner for ``batch`` and the seconds it took (load, or re-shape; 0 when it is ready)."""
        if self.cls is None:
            self.cls, self.opts = _runner_class(self.spec)
        if self.runner is not None and self.batch == batch:
            return self.runner, 0.0
        t0 = time.perf_counter()
        if self.runner is not None and self.runner.rebatch(batch):
            self.batch = batch
            return self.runner, time.perf_counter() - t0
        self.close()
        s = self.spec
        ro = RunOptions(precision=s.precision, format=s.format, threads=s.threads, batch_size=batch,
                        model=dict(s.model), cache_dir=s.cache_dir, io=s.io, runner=self.opts)
        runner = self.cls(s.artifact, s.device, ro)
        runner.load()
        if s.layout:  # inputs not batched on axis 0 (a state, a scalar): laid into the model's own axes

            runner = LaidOut(runner, Layout.from_dict(s.layout))
        self.runner, self.batch = runner, batch
        return runner, time.perf_counter() - t0

    def close(self) -> None:
        if self.runner is not None:
            try:
                self.runner.close()
            except Exception:
                pass
            self.runner, self.batch = None, None


def parity_outputs(runner: Any, spec: CellSpec, batch: int, every: bool = False) -> int:
    """Run the parity inputs (all, or the spec's limit for this batch) at ``batch``; save the outputs."""
    pin = batches.load(spec.parity_inputs)
    total = batches.count(pin)
    n = total if every else min(total, int(spec.parity_limit.get(str(batch), total)))
    outs = []
    for i in range(0, n, batch):
        chunk = batches.part(pin, i, min(i + batch, n))
        k = batches.count(chunk)
        outs.append(batches.head(runner.infer(tile(chunk, batch)), k))  # padded to the batch size
    batches.save(spec.outputs_for(batch), batches.as_float32(batches.concat(outs)))
    return n


def _failure(batch: int, stage: str, e: BaseException, sess: Session) -> CellResult:
    if isinstance(e, BackendUnavailable):
        if stage != "throughput":  # a runner that cannot do the throughput scenario still measures latency
            sess.close()
        return CellResult.failed(batch, "skipped", e.reason, hint=e.hint, stage=stage)
    sess.close()  # the next batch size gets a fresh runner
    msg = str(e).strip().splitlines()
    why = f"{stage}: {type(e).__name__}: {msg[0] if msg else ''}".rstrip(": ")
    return CellResult.failed(batch, "run_failed", why, stage=stage,
                             traceback="\n".join(traceback.format_exc().strip().splitlines()[-20:]))


def _measure_batch(sess: Session, batch: int, images: Batch, timed: bool = True) -> CellResult:
    """The latency scenario at ``batch``: load (or re-shape), cold call, warm-up, timed loop, parity
    outputs. With ``timed`` False (only the throughput scenario asked), load and parity outputs only."""
    spec, stage = sess.spec, "import"
    try:
        stage, w0 = "load", gpu_turn.waited()
        runner, load_s = sess.runner_for(batch)
        load_s -= gpu_turn.waited() - w0  # the GPU waited for in the load (host/gpu_turn.py) is not loading
        gpu_turn.take()  # a load that traced first: the GPU from here on
        if runner.fixed_batch is not None and runner.fixed_batch != batch:
            return CellResult.failed(batch, "skipped", f"the artifact has a static batch of "
                                                       f"{runner.fixed_batch}; batch {batch} cannot run",
                                     stage=stage)
        stage = "run"
        lr, extra = None, {}
        harness: dict[str, float] = {}
        if timed:
            t0 = time.perf_counter()
            meter, x = EnergyMeter(), runner.prepare(tile(images, batch))
            t1 = time.perf_counter()
            lr, cal = calibration.around(lambda: time_loop(runner.run, x, spec.loop, energy_meter=meter,
                                                           load_meter=sess.load), sess.cal)
            harness = {"prepare_s": t1 - t0, "around_loop_s": time.perf_counter() - t1 - _loop_s(lr)}
            extra = {**runner.extra_metrics(), **({"calibration": _kept_load(cal, lr)} if cal else {})}
            if not any(k in extra for k in ("energy_mj_per_image", "energy_j_per_image")):
                extra.update(energy_fields(lr.energy, batch * lr.n, meter.reason))
        n_par = None
        if spec.parity_inputs and spec.outputs:
            stage, t2 = "parity", time.perf_counter()
            n_par = parity_outputs(runner, spec, batch)
            harness["parity_s"] = time.perf_counter() - t2
        if harness:  # where a batch size's time outside its load, first call, warm-up and loop went
            extra["harness_s"] = {k: round(v, 4) for k, v in harness.items()}
        first = lr.first_ns / 1e6 if lr is not None and lr.first_ns is not None else None
        kept = lr.used_samples() if lr is not None else []  # the windows the row keeps (bench.py)
        return CellResult(
            batch_size=batch, ok=True, load_s=load_s, first_infer_ms=first,
            samples_ns=tuple(kept) if lr else (), wall_ns=sum(kept) if lr else 0,
            exec_precision=runner.exec_precision, settings=dict(runner.settings), notes=tuple(runner.notes),
            versions=runner.library_versions(), extra=extra, outputs_written=n_par is not None,
            parity_n=n_par, loop=lr.summary() if lr else {})
    except Exception as e:  # recorded as a failed row
        return _failure(batch, stage, e, sess)


def _kept_load(cal: dict[str, Any], lr: Any) -> dict[str, Any]:
    """The calibration entry with the load of the windows the row keeps (what its figures were measured
    beside; the regression gate judges it); the whole loop's, windows measured again included, as
    ``loop_*``."""
    got = windows.summary([w for w in lr.summary()["windows"] if w.get("used")])
    if "other_cores" not in got:
        return cal
    return {**cal, "loop_other_cores": cal.get("other_cores"), "loop_steal_cores": cal.get("steal_cores"),
            "other_cores": got["other_cores"], "steal_cores": got["steal_cores"]}


def _loop_s(lr: Any) -> float:
    """The seconds of a latency loop's first call, warm-up and timed calls (bench.LoopResult)."""
    return sum(int(getattr(lr, k, 0) or 0) for k in ("first_ns", "warmup_ns", "wall_ns")) / 1e9


def _measure_throughput(sess: Session, lat: CellResult, images: Batch) -> CellResult:
    """The throughput scenario at ``lat``'s batch size, on the runner the latency scenario left loaded:
    the runtime's own concurrency for the cell's time budget (Runner.throughput)."""
    spec, batch = sess.spec, lat.batch_size
    if not lat.ok:
        return lat.replace(scenario=THROUGHPUT, error=lat.error if lat.status == "skipped" else
                           f"not measured: the batch failed before the throughput scenario ({lat.error})")
    try:
        runner, _ = sess.runner_for(batch)
        gpu_turn.take()
        meter = EnergyMeter()
        loop = spec.loop
        ts = ThroughputSettings(duration_s=float(loop.max_time_s or loop.min_time_s or 1.0),
                                warmup_s=float(loop.warmup_time_s), concurrency=int(spec.concurrency),
                                meter=meter)
        tp, cal = calibration.around(lambda: runner.throughput(tile(images, batch), ts), sess.cal)
        path = ""
        if tp.outputs is not None and spec.outputs:
            path = spec.outputs_for(batch, THROUGHPUT)
            batches.save(path, batches.as_float32(tp.outputs))
        settings = {**lat.settings, **dict(runner.settings), **tp.settings, "scenario": THROUGHPUT,
                    "concurrency": tp.concurrency, "concurrency_unit": tp.unit, "throughput_api": tp.how}
        extra = {**energy_fields(tp.energy, tp.images, meter.reason), **({"calibration": cal} if cal else {})}
        return lat.replace(scenario=THROUGHPUT, first_infer_ms=None,
                           samples_ns=tuple(int(v) for v in tp.latencies_ns),
                           wall_ns=int(tp.wall_ns), images=int(tp.images), settings=settings, extra=extra,
                           tp_outputs=path, notes=tuple(runner.notes),
                           loop={"n": len(tp.latencies_ns), "wall_ns": int(tp.wall_ns), "stopped_by": "time",
                                 "duration_s": ts.duration_s, "warmup_s": ts.warmup_s,
                                 "warmup_calls": tp.warmup_calls, "images": int(tp.images)})
    except Exception as e:
        return _failure(batch, "throughput", e, sess).replace(scenario=THROUGHPUT)


def measure_all(spec: CellSpec, emit: Callable[[CellResult], Any]) -> None:
    """Each batch size of ``spec`` in turn, each of its scenarios (latency, then throughput, on the
    same loaded runner); ``emit`` gets each result as soon as it is done."""
    images = batches.load(spec.inputs)
    sess = Session(spec)
    scen = set(spec.scenarios) or {LATENCY}
    try:
        done: dict[int, list[CellResult]] = {}
        # another process on this GPU waits (host/gpu_turn.py); a runner's first loads that trace before any
        # GPU work (torch.compile: two, RunnerInfo.traced_loads) take it only then; a later load runs the
        # model at once
        traced = gpu_turn.traced_loads(spec.runner) if gpu_turn.current() is not None else 0
        for i, b in enumerate(spec.batch_sizes):
            with gpu_turn.holding(defer=i < traced) as turn:
                lat = _turns(_measure_batch(sess, b, images, timed=LATENCY in scen), turn)
                done[b] = [lat] if LATENCY in scen else []
                if LATENCY in scen:
                    emit(lat)
                if THROUGHPUT in scen:
                    done[b].append(_turns(_measure_throughput(sess, lat, images), turn))
                    emit(done[b][-1])
        with gpu_turn.holding():
            _full_parity_if_top_failed(sess, done, emit)
    finally:
        sess.close()
        sess.load.close()


def _turns(res: CellResult, turn: gpu_turn.Turn | None) -> CellResult:
    """``res`` with this process's peak RSS and, where it took turns on its GPU with another process, the
    seconds it waited for the GPU and let it go while compiling (``extra.gpu_turn``)."""
    res = res.replace(peak_rss_mb=peak_rss_mb())
    return res if turn is None else res.replace(extra={**res.extra, "gpu_turn": turn.take_stats()})


def _full_parity_if_top_failed(sess: Session, done: dict[int, list[CellResult]], emit) -> None:
    """Every parity input is compared at the largest batch size; when that one did not run (a static-batch
    file, a failure), the largest that did run gets them all: its results are emitted again, amended."""
    spec = sess.spec
    ok = [b for b, rs in done.items() if any(r.ok and r.outputs_written for r in rs)]
    top = max(spec.batch_sizes)
    if not ok or top in ok or not spec.parity_limit.get(str(max(ok))):
        return
    b = max(ok)
    try:
        runner, _ = sess.runner_for(b)
        n = parity_outputs(runner, spec, b, every=True)
    except Exception:  # keep the subset figures already emitted
        return
    for r in done[b]:
        note = f"parity on every input at batch {b}: batch {top} did not run"
        emit(r.replace(parity_n=n, notes=r.notes + (note,)))
