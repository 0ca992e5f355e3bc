"""Frozen result records with ``to_dict``/``from_dict`` and a schema version.

Renderers take a :class:`Report`; records never render themselves. Sequences are
tuples so that every record is hashable and immutable; JSON turns them into lists
and ``from_dict`` turns them back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infer_compare.base.errors import SchemaError
from infer_compare.base.known_fields import report_fields
from infer_compare.base.latency import PERCENTILE_MIN_SAMPLES, LatencyStats, percentile_rule  # noqa: F401  (re-exported)
from infer_compare.base.report_files import render_for, write_atomic
from infer_compare.base.schema import read_json, validate
from infer_compare.base.serial import Record, decode  # noqa: F401  (Record is re-exported)
from infer_compare.base.soak_records import SoakResult, SoakWindow  # noqa: F401  (Report.soak; re-exported)

# 2: Report.complete, Report.not_run, Report.incomplete_reason (version-1 files still load)
SCHEMA_VERSION = 2

# Row statuses.
OK = "ok"
SKIPPED = "skipped"
EXPORT_FAILED = "export_failed"
RUN_FAILED = "run_failed"
PARITY_FAILED = "parity_failed"
STATUSES = (OK, SKIPPED, EXPORT_FAILED, RUN_FAILED, PARITY_FAILED)

# Scenarios.
LATENCY = "latency"
THROUGHPUT = "throughput"
SCENARIOS = (LATENCY, THROUGHPUT)


@dataclass(frozen=True)
class Availability(Record):
    """What a probe found: never raises, always says why not."""

    available: bool
    reason: str = ""
    hint: str = ""
    version: str | None = None
    devices: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)




@dataclass(frozen=True)
class ExportRecord(Record):
    """One artifact: where it is, how big, how long it took to build, from what."""

    format: str
    precision: str
    path: str
    size_bytes: int
    export_s: float  # wall time of the build that produced it (also for a cache hit)
    cached: bool  # True when this run reused it from the cache
    key: str = ""
    source: str = ""  # the artifact it was built from (path), if any
    options: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ParityResult(Record):
    """Comparison of one row's outputs with the PyTorch FP32 reference on the same inputs.

    Several outputs (parity.compare_outputs): ``outputs`` has each output's own figures (top-1 only for
    [N, classes] outputs); the row's are its worst output's (``output``), top-1/top-5/accuracy those of its
    [N, classes] outputs (the lowest); it passes when every output does; its failures name the output."""

    n: int
    max_abs: float
    mean_abs: float
    rel_max: float  # max_abs / max |reference|
    cosine_mean: float
    cosine_min: float
    top1_agreement: float | None  # None: an output that is not [N, classes], of a model with several outputs
    top5_agreement: float | None
    accuracy: float | None = None  # with labels (LeNet digits)
    reference_accuracy: float | None = None
    judged: bool = True  # False: reported, not judged (e.g. int8 with random weights)
    passed: bool = True
    failures: tuple[str, ...] = ()
    tolerance: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    worst_index: int | None = None  # the parity sample with the lowest cosine
    # the sanity floor that even a row that is not judged must meet (non-finite outputs, cosine far off)
    floor_failures: tuple[str, ...] = ()
    output: str = ""  # several outputs: the output these figures are for (the row's worst)
    outputs: tuple[ParityResult, ...] = ()  # several outputs: each output's own figures, in the model's order
    # what the output means ("" in older files) and the check that decided it (parity/checks.decide: margin 0
    # = on the limit)
    kind: str = ""
    metric: str = ""
    metric_value: float | None = None
    metric_limit: float | None = None
    margin: float | None = None
    cosine_skipped: int = 0  # samples whose reference is near zero: left out of the cosine
    mask_iou: float | None = None  # dense maps: mean IoU of the thresholded (or argmax) masks
    # class scores: samples whose top-two margin a flip within tolerance can cross (not judged)
    near_ties: int = 0
    # detections (parity/detections.py): reference, kept, lost, added, near_threshold counts; ious, score_errs
    # means
    detections: dict[str, Any] = field(default_factory=dict)
    # sequences (parity/sequences.py): samples, same, changed, tie_only texts; steps judged and differing;
    # confidence error
    sequences: dict[str, Any] = field(default_factory=dict)

    @property
    def reason(self) -> str:
        """Why the row failed parity ("" when it passed): for a judged row its failures; for a row that
        is not judged, only what broke the sanity floor (its other failures are reported, not enforced)."""
        if self.passed:
            return ""
        if self.judged:
            return "; ".join(self.failures or self.floor_failures)
        return "below the sanity floor of a row that is not judged: " + "; ".join(self.floor_failures)


@dataclass(frozen=True)
class RunRecord(Record):
    """One row of the comparison: a (backend, format, precision, device, batch) cell."""

    backend: str  # runner name, e.g. "onnxruntime"
    format: str
    precision: str  # requested precision (format table key)
    device: str  # "cpu", "cuda:0", ...
    batch_size: int | None
    status: str
    reason: str = ""
    hint: str = ""
    # for skipped rows: "no_device" (hardware absent), "unsupported" (this runner/precision/device cannot),
    # "unavailable" (software missing or failing to load)
    skip_kind: str = ""
    exec_precision: str = ""  # what actually executed, as the runtime reports it
    threads: int | None = None
    latency: LatencyStats | None = None
    throughput: float | None = None  # images per second of wall time in the measured loop
    load_s: float | None = None
    first_infer_ms: float | None = None
    peak_rss_mb: float | None = None
    export: ExportRecord | None = None
    parity: ParityResult | None = None
    samples_ns: tuple[int, ...] = ()
    measured_wall_s: float | None = None
    warmup_iters: int | None = None
    versions: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    # backend-specific figures (GPU times, op coverage...)
    extra: dict[str, Any] = field(default_factory=dict)
    # the scenario measured: "latency" (one synchronous call after another) or "throughput" (the runtime's own
    # concurrency); part of the row's identity
    scenario: str = "latency"
    # "user:<file>" for a pre-built artifact given with --artifact; part of the row's identity
    variant: str = ""

    @property
    def label(self) -> str:
        """Stable identity of a row across runs (used by diff and merge): the cell, then the scenario
        when it is not latency, then the variant (a user's pre-built artifact) when there is one."""
        b = "-" if self.batch_size is None else f"b{self.batch_size}"
        return (f"{self.backend}/{self.format}/{self.precision}/{self.device}/{b}"
                + (f"/{self.scenario}" if self.scenario and self.scenario != LATENCY else "")
                + (f"/{self.variant}" if self.variant else ""))


@dataclass(frozen=True)
class ModelInfo(Record):
    name: str
    family: str
    weights: str  # "pretrained", "random", "trained", or "file"
    weights_source: str  # torchvision weights enum, cache path, or the user's file
    weights_hash: str
    input_shape: tuple[int, ...]  # C, H, W
    num_classes: int
    preprocessing: dict[str, Any] = field(default_factory=dict)
    bn_recalibrated: bool = False
    meaningful_top1: bool = True  # False for random weights: top-1 margins are tiny
    notes: tuple[str, ...] = ()
    # forward-pass FLOPs at batch 1 (2 per multiply-add); see prepare/flops.py
    flops_per_image: float | None = None
    flops_source: str = ""  # how flops_per_image was counted
    # each input {"name", "shape", "dtype", "batch_axis", "source"} (a user model); outputs: several, or
    # batched off axis 0, each also "judged_on" (() for one output); layout.named_io says which report form
    inputs: tuple[dict[str, Any], ...] = ()
    outputs: tuple[dict[str, Any], ...] = ()


# Libraries recorded in the environment that change no measured figure (inputs are real photos whose
# decoding is checked by the data digest; NVML only reads the GPU): a baseline is not refused for them.
NOT_MEASURED_LIBRARIES = frozenset({"nvidia-ml-py", "pynvml", "scikit-learn", "scikit-image", "pillow",
                                    "Pillow", "matplotlib", "scipy", "py-cpuinfo", "rich", "psutil"})


@dataclass(frozen=True)
class Environment(Record):
    hostname_hash: str
    os: str
    kernel: str
    machine: str
    python: str
    cpu_model: str
    cpu_flags: tuple[str, ...]
    cores_physical: int | None
    cores_logical: int | None
    ram_gb: float | None
    tool_version: str
    libraries: dict[str, str] = field(default_factory=dict)
    gpus: tuple[dict[str, Any], ...] = ()
    device_facts: dict[str, Any] = field(default_factory=dict)

    def fingerprint(self) -> dict[str, Any]:
        """What must match for two runs to be compared as a regression check."""
        return {
            "cpu_model": self.cpu_model,
            "cores_logical": self.cores_logical,
            "machine": self.machine,
            "gpus": [g.get("name") for g in self.gpus],
            "libraries": {k: v for k, v in self.libraries.items() if k not in NOT_MEASURED_LIBRARIES},
        }


@dataclass(frozen=True)
class Settings(Record):
    batch_sizes: dict[str, tuple[int, ...]]  # device kind -> batch sizes
    threads: int | None
    warmup_iters: int
    min_iters: int
    min_time_s: float
    parity_samples: int
    cell_timeout_s: float
    devices: tuple[str, ...] = ()
    seed: int = 0
    requested: dict[str, Any] = field(default_factory=dict)  # what the user asked for explicitly
    # the sampling rule (None in files written before it): measure until the median's 95 % CI is within
    # target_ci of it, or the cell's budget max_time_s is spent; warm-up by time after the cold call
    target_ci: float | None = None
    max_time_s: float | None = None
    warmup_time_s: float | None = None
    # the scenarios measured (latency: one call after another; throughput: the runtime's own concurrency), the
    # GPU timing policy (device: input and output device-resident; host: the copies inside each timed call)
    # and the throughput scenario's requests in flight (0: each runtime's own choice)
    scenarios: tuple[str, ...] = (LATENCY,)
    io: str = "device"
    concurrency: int = 0
    # each configuration measured in this many processes, a pass of the plan apart (1 in files before passes)
    passes: int = 1


@dataclass(frozen=True)
class Report(Record):
    schema_version: int
    tool_version: str
    created: str
    command: tuple[str, ...]
    model: ModelInfo
    environment: Environment
    settings: Settings
    rows: tuple[RunRecord, ...]
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    elapsed_s: float | None = None
    # merged reports (report/merge.py): machine label -> that machine's environment
    machines: dict[str, Environment] = field(default_factory=dict)
    # False when the run stopped before every planned cell ran (an interrupt): the regression gate
    # refuses such a report unless told otherwise, and every renderer says so.
    complete: bool = True
    not_run: tuple[str, ...] = ()  # cells that did not run, as labels (see cell_label)
    incomplete_reason: str = ""  # e.g. "interrupted by SIGINT"
    # a soak's windows and summary per configuration (infer_compare/soak/); () in a comparison. Older
    # files load without it and older readers ignore it, so the schema version stays.
    soak: tuple[SoakResult, ...] = ()
    # where the wall time went (base/timeline.py); () in older files
    timeline: tuple[dict[str, Any], ...] = ()

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "results") -> Report:
        """The report of a parsed results file, checked in full first (base/schema.py): every field's
        type, the known keys of the free-form dicts, the row statuses; ``where`` names it in errors."""
        if not isinstance(d, dict) or "schema_version" not in d:
            raise SchemaError(f"{where}: not an infer-compare results file (no schema_version)")
        v = d["schema_version"]
        if not isinstance(v, int) or isinstance(v, bool) or v > SCHEMA_VERSION or v < 1:
            raise SchemaError(
                f"{where}: results file has schema_version {v!r}; this infer-compare reads "
                f"1..{SCHEMA_VERSION} (upgrade infer-compare to read newer files)"
            )
        validate(cls, d, where=where, fields=report_fields(STATUSES, SCENARIOS))
        return decode(cls, d)

    def save(self, path) -> None:
        """Write the report to ``path`` in the format its suffix names, atomically (a temporary file
        renamed into place): ``.json`` (what ``load_report`` reads back), ``.md`` (Markdown), ``.csv``
        (one line per row) or ``.html`` (one self-contained page with its plots): the renderers of
        ``infer-compare report`` (infer_compare/report/, which registers them in base/report_files.py
        when it is imported; ``infer_compare.compare``, ``infer_compare.load_report`` and the CLI import
        it). The suffix is read case-blind. Another suffix raises ValueError naming the accepted ones,
        before anything is written. On failure nothing is left behind and an OSError names the path and
        the cause (one line)."""
        write_atomic(path, render_for(self, path))

    @property
    def failed(self) -> bool:
        return any(r.status == PARITY_FAILED for r in self.rows)


def cell_label(backend: str, fmt: str, precision: str, device: str, batch_size: int | None) -> str:
    """The label of a cell, as ``RunRecord.label`` spells it (for ``Report.not_run``)."""
    return RunRecord(backend, fmt, precision, device, batch_size, SKIPPED).label


def load_report(path) -> Report:
    """A results file, parsed with bounded nesting and size and checked in full (SchemaError, one line)."""
    return Report.from_dict(read_json(path, what="results file"), where=str(path))
