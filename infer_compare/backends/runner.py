"""The runner interface (Polygraphy's lifecycle with MLPerf's small surface).

- ``probe(device) -> Availability`` (class method): cheap, never raises.
- ``supports(fmt, precision, device) -> Availability`` (class method): whether this
  runner can execute that precision there (e.g. OpenVINO bf16 needs a CPU with bf16).
- ``__init__(artifact, device, options)`` only stores.
- ``load()`` does the heavy work (session creation, compile, deserialise); the
  harness times it as load time. ``close()`` frees. Context manager on top.
- ``prepare(batch)`` turns a host array into the runner's native input (a torch
  tensor, a device buffer...); done before the clock starts. A model with several
  inputs gets a dict {input name: array} in the model's order (base/batches.py); the
  runner matches it to its own inputs by name (by position where the names differ).
- ``run(prepared)`` is the timed call: blocking; the runner synchronises its device
  and leaves the outputs on the host. It does the same work for a model with several
  inputs or outputs as for one: feeds and bindings are built in ``prepare()``.
- ``to_numpy(outputs)`` (untimed) gives a float32 host array for parity; for a model
  with several outputs, {output name: array}.
- ``exec_precision`` says what really executed, as the runtime reports it.
- ``extra_metrics()`` returns backend figures gathered while running (device time...).
- ``throughput(batch, settings)`` (the throughput scenario): many requests in flight with
  the runtime's own concurrency, for a time budget (backends/throughput.py). The default
  runs N threads, each calling ``run()`` on its own prepared input; runtimes override it
  with what their own tools do (OpenVINO's AsyncInferQueue, CUDA streams...).

GPU timing policy (every CUDA runner alike): ``options.io`` is ``"device"`` (default:
input and output device-resident, copied before and after timing) or ``"host"`` (the
host->device and device->host copies inside each timed call). Nothing runs the model
before the cold first call except what the row says in ``settings["before_first_call"]``
(torch.compile's compilation, a CUDA graph's capture: both in ``load()``).

The harness, not the runner, owns the clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from infer_compare.backends.throughput import ThroughputResult, ThroughputSettings, result, run_threads
from infer_compare.base.batches import Batch, as_float32, count
from infer_compare.base.records import Availability
from infer_compare.catalog.options import NoOptions, Options
from infer_compare.host.arm import row_note

OptionsT = TypeVar("OptionsT", bound=Options)


@dataclass
class RunOptions:
    """What the harness tells a runner: the cell (precision, format, threads, batch), the
    model spec for runners that rebuild the model, the cache root for the runtime's own
    caches, and ``runner``: the runner's declared options, typed (its ``options.py``)."""

    precision: str = "fp32"
    format: str = ""
    threads: int | None = None
    batch_size: int = 1
    model: dict[str, Any] = field(default_factory=dict)  # model name/spec, for runners that rebuild it
    cache_dir: str = ""  # the artifact cache root (--cache-dir): runtimes keep their own caches below it
    # GPU rows: "device" (device-resident input/output) or "host" (copies inside each timed call)
    io: str = "device"
    runner: Options = field(default_factory=NoOptions)

    def runner_as(self, cls: type[OptionsT]) -> OptionsT:
        """The runner's options as its declared class ``cls``: the given ones, else its defaults."""
        return self.runner if isinstance(self.runner, cls) else cls()


class Runner:
    name = "base"

    def __init__(self, artifact: str, device: str = "cpu", options: RunOptions | None = None):
        self.artifact = artifact
        self.device = device
        self.options = options or RunOptions()
        self.exec_precision = self.options.precision
        self.settings: dict[str, Any] = {}  # runtime settings actually applied (recorded in the row)
        self.notes: list[str] = [n for n in (row_note(),) if n]  # "emulated aarch64: ..." under an emulator

    # --- capability -----------------------------------------------------------------
    @classmethod
    def probe(cls, device: str = "cpu") -> Availability:
        raise NotImplementedError

    @classmethod
    def supports(cls, fmt: str, precision: str, device: str) -> Availability:
        return Availability(True)

    # --- lifecycle ------------------------------------------------------------------
    @classmethod
    def reset_process_state(cls) -> dict[str, Any]:
        """Between two configurations measured in one resident process (measure/resident.py): put back the
        process-wide state a configuration of this runner left that the next would inherit; what was done.
        Nothing by default (each configuration's runner is loaded afresh and closed)."""
        return {}

    def load(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        self.load()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # --- inference ------------------------------------------------------------------
    def prepare(self, batch: Batch) -> Any:
        return batch

    def run(self, prepared: Any) -> Any:
        raise NotImplementedError

    def to_numpy(self, outputs: Any) -> Batch:
        return as_float32(outputs)

    def infer(self, batch: Batch) -> Batch:
        return self.to_numpy(self.run(self.prepare(batch)))

    def library_versions(self) -> dict[str, str]:
        return {}

    def extra_metrics(self) -> dict[str, Any]:
        return {}

    def rebatch(self, batch_size: int) -> bool:
        """Make the loaded runtime ready for another batch size without loading it again
        (re-shape, select a profile); return False when this runner cannot, and the
        harness then loads a fresh runner in the same process."""
        return False

    # --- the throughput scenario ----------------------------------------------------
    def concurrency(self, settings: ThroughputSettings) -> int:
        """Requests in flight: the harness's choice, else one per CPU thread of the cell."""
        import os

        return max(1, int(settings.concurrency or self.options.threads or os.cpu_count() or 1))

    def throughput(self, batch: Batch, settings: ThroughputSettings) -> ThroughputResult:
        """Default: N threads, each calling ``run()`` on its own prepared input."""
        n = self.concurrency(settings)
        inputs = [self.prepare(batch) for _ in range(n)]
        w = run_threads([lambda x=x: self.run(x) for x in inputs], count(batch), settings)
        return result(w, n, "threads", f"{n} threads, each calling run() on its own input "
                                       "(the runner's default)",
                      outputs=self.to_numpy(w.last))

    @property
    def fixed_batch(self) -> int | None:
        """The batch size the loaded artifact accepts, when it is static."""
        return None
