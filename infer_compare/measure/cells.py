"""The records that cross the process boundary: what a measuring child is asked to do
(:class:`CellSpec`) and what it answers for each batch size (:class:`CellResult`).

One child process measures one configuration (runner, format, precision, device) at
each of its batch sizes in turn, loading the runtime once; it appends one CellResult
per batch size and scenario (latency, then throughput, as the spec asks) to its result
file as soon as that one is done, so a crash loses nothing measured before it, and a
fresh process picks up the remaining batch sizes (measure/isolate.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infer_compare.base.records import LATENCY, SCENARIOS, Record
from infer_compare.measure.bench import LoopSettings


@dataclass(frozen=True)
class CellSpec(Record):
    runner: str  # a runner name of the registry, or "module:Class" (tests, benchmarks)
    artifact: str
    # the runner's "module:Class" as the parent resolved it (the child then sees the parent's table)
    impl: str = ""
    device: str = "cpu"
    precision: str = "fp32"
    format: str = ""
    threads: int | None = None
    batch_sizes: tuple[int, ...] = (1,)
    model: dict[str, Any] = field(default_factory=dict)  # model spec, for runners that rebuild the model
    cache_dir: str = ""
    runner_options: dict[str, Any] = field(default_factory=dict)  # the runner's declared options, as a dict
    inputs: str = ""  # .npy of preprocessed real images; the timed batch is built from them
    parity_inputs: str | None = None  # .npy of the parity set; None: no parity outputs
    parity_limit: dict[str, int] = field(default_factory=dict)  # str(batch) -> images compared (default: all)
    outputs: str = ""  # where parity outputs go: a path with "{batch}" in it
    loop: LoopSettings = field(default_factory=LoopSettings)
    # latency and/or throughput, measured in that order per batch size
    scenarios: tuple[str, ...] = (LATENCY,)
    io: str = "device"  # GPU rows: device-resident input/output, or "host": the copies inside each timed call
    concurrency: int = 0  # throughput scenario: requests in flight (0: the runtime's own choice)
    layout: dict[str, Any] = field(default_factory=dict)  # layout.Layout.to_dict(): batch axes other than 0

    def outputs_for(self, batch: int, scenario: str = LATENCY) -> str:
        """Parity outputs at ``batch``; for the throughput scenario,
        its own path's outputs of the timed batch."""
        return self.outputs.replace("{batch}", str(batch) if scenario == LATENCY else f"{batch}-{scenario}")

    def pairs(self) -> list[tuple[int, str]]:
        """Every (batch size, scenario) this spec asks for, in the order they are measured."""
        order = [s for s in SCENARIOS if s in self.scenarios]
        return [(b, s) for b in self.batch_sizes for s in order]

    def remaining(self, done: set[int]) -> CellSpec:
        """This spec without the batch sizes in ``done``."""
        return self.replace(batch_sizes=tuple(b for b in self.batch_sizes if b not in done))


@dataclass(frozen=True)
class CellResult(Record):
    batch_size: int
    ok: bool
    status: str = "ok"  # ok, run_failed or skipped
    error: str = ""
    hint: str = ""
    stage: str = ""  # import, load, run, parity
    load_s: float | None = None  # loading the runtime (and, for later batch sizes, re-shaping for this one)
    first_infer_ms: float | None = None  # the cold first call at this batch size
    samples_ns: tuple[int, ...] = ()
    wall_ns: int = 0
    exec_precision: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    outputs_written: bool = False
    parity_n: int | None = None  # how many parity inputs were run
    # the child's peak RSS so far (VmHWM): this batch size and those before it
    peak_rss_mb: float | None = None
    stderr_tail: str = ""
    traceback: str = ""
    wall_s: float | None = None
    process: int = 1  # which child process of the configuration measured it (2+: after a crash)
    # the timed loop's summary (bench.LoopResult.summary())
    loop: dict[str, Any] = field(default_factory=dict)
    scenario: str = LATENCY  # throughput: samples_ns are the requests' latencies under load
    images: int = 0  # throughput scenario: images completed in wall_ns (latency: batch_size x samples)
    tp_outputs: str = ""  # throughput scenario: .npy of its own path's outputs of the timed batch

    @property
    def key(self) -> tuple[int, str]:
        return self.batch_size, self.scenario

    @classmethod
    def failed(cls, batch: int, status: str, error: str, **kw: Any) -> CellResult:
        return cls(batch_size=batch, ok=False, status=status, error=error, **kw)
