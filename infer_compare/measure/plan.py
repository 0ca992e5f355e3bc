"""What to measure: the user's selection, checked before any work; the defaults; the
cells (format x runner x precision x device) in table order.

    sel = make_selection(backends=["onnxruntime"], batch_sizes="1,8")
    cells = plan_cells(device_kinds.present(), sel)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from infer_compare.artifacts.given import detect
from infer_compare.base.errors import UsageError
from infer_compare.base.records import LATENCY, SCENARIOS, Settings
from infer_compare.catalog.device_kinds import DEVICE_KINDS, check_device, kind_of
from infer_compare.catalog.formats import FORMATS, PRECISIONS, RUNNERS
from infer_compare.catalog.options import Options
from infer_compare.catalog.runtimes import options_class
from infer_compare.measure.gpus import CPU_ROWS, GPU_MODES

MAX_BATCH = 4096


def parse_batch_sizes(text: str | Iterable[int]) -> tuple[int, ...]:
    """'1,8,32' -> (1, 8, 32). Positive integers up to 4096, no duplicates kept."""
    items = text.replace(" ", "").split(",") if isinstance(text, str) else list(text)
    if not items:
        raise UsageError("bad batch size list: no batch size given")
    out: list[int] = []
    for it in items:
        if it == "":
            raise UsageError(f"bad batch size list {text!r}: empty item")
        try:
            v = int(it)
        except (TypeError, ValueError):
            raise UsageError(f"bad batch size list {text!r}: {it!r} is not an integer") from None
        if isinstance(it, str) and str(v) != it.lstrip("+"):
            raise UsageError(f"bad batch size list {text!r}: {it!r} is not an integer")
        if not 1 <= v <= MAX_BATCH:
            raise UsageError(f"bad batch size list {text!r}: {v} is outside 1..{MAX_BATCH}")
        if v not in out:
            out.append(v)
    return tuple(out)


def check_choice(kind: str, values: Iterable[str] | None, known: Iterable[str]) -> tuple[str, ...] | None:
    """The user's list of names of ``kind``, each known (UsageError with a suggestion otherwise)."""
    if values is None:
        return None
    vals = tuple(v.strip() for v in values if v.strip())
    known = tuple(known)
    if not vals:
        raise UsageError(f"an empty list of {kind}s was given; name at least one (known: {', '.join(known)})")
    bad = [v for v in vals if v not in known]
    if bad:
        close = difflib.get_close_matches(bad[0], known, n=1)
        raise UsageError(f"unknown {kind} '{bad[0]}'" + (f" (did you mean '{close[0]}'?)" if close else "")
                         + f"; known: {', '.join(known)}")
    return vals


def check_runner_options(given: dict[str, Any] | None) -> dict[str, Options]:
    """``{runner: {option: value}}`` checked against each runner's declared options."""
    out: dict[str, Options] = {}
    for name, vals in (given or {}).items():
        if name not in RUNNERS:
            raise UsageError(f"runner_options: unknown runner '{name}' (known: {', '.join(RUNNERS)})")
        out[name] = vals if isinstance(vals, Options) else options_class(name).build(name, vals)
    return out


def parse_scenarios(value: str | Iterable[str]) -> tuple[str, ...]:
    """'latency', 'throughput', 'both' (or a list of them) -> the scenarios, in measuring order."""
    items = [value] if isinstance(value, str) else list(value)
    names: set[str] = set()
    for it in items:
        for part in str(it).replace(" ", "").split(","):
            if part == "both":
                names.update(SCENARIOS)
            elif part in SCENARIOS:
                names.add(part)
            else:
                raise UsageError(f"unknown scenario {part!r}; known: {', '.join(SCENARIOS)}, both")
    if not names:
        raise UsageError(f"no scenario given; known: {', '.join(SCENARIOS)}, both")
    return tuple(s for s in SCENARIOS if s in names)


# The runner options that were each runner's own I/O switch before --io: aliases now, mapped onto it.
IO_ALIASES = {"onnxruntime": "io_binding", "onnxruntime-trt": "io_binding", "tensorrt": "io"}
IO_POLICIES = ("device", "host")


def resolve_io(io: str | None, runner_options: dict[str, Options]) -> str:
    """The GPU timing policy: ``io`` (device or host), or what the old per-runner switches say
    (``--ort-no-io-binding`` = host, ``--tensorrt-io host|device``); device by default."""
    if io is not None and io not in IO_POLICIES:
        raise UsageError(f"--io must be one of {', '.join(IO_POLICIES)}, got {io!r}")
    said: dict[str, str] = {}
    for runner, name in IO_ALIASES.items():
        opts = runner_options.get(runner)
        if opts is None or name not in opts.changed():
            continue
        v = getattr(opts, name)
        said[f"{runner}.{name}"] = ("device" if v else "host") if isinstance(v, bool) else str(v)
    values = {v for v in said.values() if v} | ({io} if io else set())
    if len(values) > 1:
        given = ", ".join(f"{k}={v}" for k, v in said.items()) + (f", --io {io}" if io else "")
        raise UsageError(f"conflicting I/O policies ({given}): every GPU runner follows one; give --io host "
                         "or --io device")
    return values.pop() if values else "device"


@dataclass
class Selection:
    """What to measure and how: compare()'s and run_bundle()'s arguments, checked."""

    backends: tuple[str, ...] | None = None
    formats: tuple[str, ...] | None = None
    precisions: tuple[str, ...] | None = None
    devices: tuple[str, ...] | None = None
    batch_sizes: tuple[int, ...] | None = None
    threads: int | None = None
    threads_asked: int | None = None  # --threads as the user gave it (threads is filled in from the host)
    warmup_iters: int = 2
    min_iters: int = 5
    min_time_s: float = 0.2
    cell_timeout_s: float = 600.0
    seed: int = 0
    runner_options: dict[str, Options] = field(default_factory=dict)  # runner name -> its declared options
    target_ci: float | None = 0.02
    max_time_s: float = 1.0
    warmup_time_s: float = 0.2
    export_timeout_s: float = 1800.0
    parity_every_batch: bool = False
    artifacts: tuple[Any, ...] = ()  # build.given.UserArtifact: pre-built files measured as given
    scenarios: tuple[str, ...] = (LATENCY,)  # latency and/or throughput
    # the GPU timing policy: device-resident input/output, or host copies in the timed call
    io: str = "device"
    concurrency: int = 0  # throughput scenario: requests in flight (0: each runtime's own choice)
    gpus: str = "spread"  # several GPUs: spread, every or sequential (measure/gpus.py)
    # CPU rows beside the GPU ones where the cores allow (auto), after or beside (gpus.py)
    cpu_rows: str = "auto"
    passes: int = 2  # each configuration measured in this many processes, a pass of the plan apart

    def options_for(self, runner: str) -> Options:
        """The options of ``runner``: the user's, else its declared defaults."""
        return self.runner_options.get(runner) or options_class(runner)()

    def batch_sizes_by_kind(self) -> dict[str, tuple[int, ...]]:
        """The user's batch sizes, else each device kind's defaults."""
        return {k: tuple(self.batch_sizes or kind.default_batch_sizes) for k, kind in DEVICE_KINDS.items()}

    def requested(self) -> dict[str, Any]:
        """What the user named explicitly (recorded; an explicitly named backend that skips fails the run)."""
        return {"backends": list(self.backends or ()), "formats": list(self.formats or ()),
                "precisions": list(self.precisions or ()), "devices": list(self.devices or ()),
                "batch_sizes": list(self.batch_sizes or ())}


def make_selection(*, backends: Iterable[str] | None = None, formats: Iterable[str] | None = None,
                   precisions: Iterable[str] | None = None, devices: Iterable[str] | None = None,
                   batch_sizes: Iterable[int] | str | None = None, threads: int | None = None,
                   warmup_iters: int = 2, min_iters: int = 5, min_time_s: float = 0.2,
                   cell_timeout_s: float = 600.0, seed: int = 0, runner_options: dict[str, Any] | None = None,
                   parity_every_batch: bool = False, target_ci: float | None = 0.02, max_time_s: float = 1.0,
                   warmup_time_s: float = 0.2, export_timeout_s: float = 1800.0,
                   artifacts: Iterable[str] = (), scenarios: str | Iterable[str] = LATENCY,
                   io: str | None = None, concurrency: int = 0, gpus: str = "spread",
                   cpu_rows: str = "auto", passes: int = 2) -> Selection:
    """Check the user's choices (UsageError on a bad one) before any work."""
    devices_t = tuple(check_device(d) for d in devices) if devices is not None else None
    if devices_t == ():
        raise UsageError("an empty list of devices was given; name at least one (cpu, cuda, cuda:N, edgetpu)")
    for name, v, lo in (("--warmup", warmup_iters, 0), ("--min-iters", min_iters, 1)):
        if int(v) < lo:
            raise UsageError(f"{name} must be >= {lo}, got {v}")
    if min_time_s < 0 or cell_timeout_s <= 0 or warmup_time_s < 0:
        raise UsageError("--min-time and --warmup-time must be >= 0 and --cell-timeout > 0")
    if export_timeout_s <= 0:
        raise UsageError(f"--export-timeout must be > 0, got {export_timeout_s}")
    if max_time_s < min_time_s:
        raise UsageError(f"--max-time ({max_time_s} s) must be >= --min-time ({min_time_s} s)")
    if target_ci is not None and not 0 <= target_ci < 1:
        raise UsageError(f"--target-ci is a fraction of the median (0.02 = 2 %), got {target_ci}")
    if int(passes) < 1:
        raise UsageError(f"--passes must be >= 1, got {passes}")
    if threads is not None and threads < 1:
        raise UsageError(f"--threads must be >= 1, got {threads}")
    if int(concurrency) < 0:
        raise UsageError(f"--concurrency must be >= 0 (0: each runtime's own choice), got {concurrency}")
    if gpus not in GPU_MODES:
        raise UsageError(f"--gpus must be one of {', '.join(GPU_MODES)}, got {gpus!r}")
    if cpu_rows not in CPU_ROWS:
        raise UsageError(f"--cpu-rows must be one of {', '.join(CPU_ROWS)}, got {cpu_rows!r}")
    ropts = check_runner_options(runner_options)
    return Selection(gpus=gpus, cpu_rows=cpu_rows, passes=int(passes), scenarios=parse_scenarios(scenarios),
        io=resolve_io(io, ropts), concurrency=int(concurrency),
        backends=check_choice("backend", backends, RUNNERS), formats=check_choice("format", formats, FORMATS),
        precisions=check_choice("precision", precisions, PRECISIONS), devices=devices_t,
        batch_sizes=parse_batch_sizes(batch_sizes) if batch_sizes is not None else None, threads=threads,
        threads_asked=threads,
        warmup_iters=int(warmup_iters), min_iters=int(min_iters), min_time_s=float(min_time_s),
        cell_timeout_s=float(cell_timeout_s), seed=int(seed), runner_options=ropts,
        parity_every_batch=bool(parity_every_batch), target_ci=target_ci or None,
        max_time_s=float(max_time_s), warmup_time_s=float(warmup_time_s),
        export_timeout_s=float(export_timeout_s), artifacts=_user_artifacts(artifacts))


def _user_artifacts(paths: Iterable[str]) -> tuple[Any, ...]:
    found = [detect(p) for p in paths]
    seen = [a.path for a in found]
    if len(set(seen)) != len(seen):
        raise UsageError("the same --artifact is given twice")
    return tuple(found)


@dataclass(frozen=True)
class Cell:
    """One configuration to measure at each batch size of its device kind."""

    fmt: str
    runner: str
    precision: str
    kind: str  # device kind
    device: str | None  # concrete device, None when none of its kind is present
    # a pre-built artifact given with --artifact (measured as given), else built by the chain
    artifact: str = ""


def _devices_for(kind: str, present: dict[str, list[str]], sel: Selection) -> list[str] | None:
    """The devices of ``kind`` to measure on; None when the user's --device excludes the kind."""
    want = [d for d in (sel.devices or ()) if kind_of(d) == kind]
    if sel.devices is not None and not want:
        return None
    have = present.get(kind, [])
    if not want:
        return list(have)
    chosen = [d for d in want if d in have or d == kind and have]
    return [have[0] if d == kind else d for d in chosen]


def plan_cells(present: dict[str, list[str]], sel: Selection) -> list[Cell]:
    """The (format, runner, precision, device) cells of the selection, in table order.
    A kind with no device present still gets its cells (device None): skipped rows with the reason."""
    cells: list[Cell] = []
    for f in FORMATS.values():
        if sel.formats is not None and f.name not in sel.formats:
            continue
        for rname in f.runners:
            info = RUNNERS[rname]
            if (sel.backends is None and not info.listed
                    or sel.backends is not None and rname not in sel.backends):
                continue
            for kind in info.device_kinds:
                chosen = _devices_for(kind, present, sel)
                if chosen is None:
                    continue
                for p in f.precisions:
                    if sel.precisions is not None and p not in sel.precisions:
                        continue
                    cells += ([Cell(f.name, rname, p, kind, d) for d in chosen]
                              or [Cell(f.name, rname, p, kind, None)])
    cells += _artifact_cells(present, sel)
    if not cells:
        raise UsageError("the selection of --backends/--formats/--precisions/--device "
                         "leaves nothing to measure")
    return cells


def _artifact_cells(present: dict[str, list[str]], sel: Selection) -> list[Cell]:
    """A pre-built artifact's cells: every runner of its format, at the artifact's own precision."""
    cells: list[Cell] = []
    for art in sel.artifacts:
        for rname in FORMATS[art.format].runners:
            if sel.backends is not None and rname not in sel.backends:
                continue
            for kind in RUNNERS[rname].device_kinds:
                chosen = _devices_for(kind, present, sel)
                if chosen is not None:
                    cells += [Cell(art.format, rname, art.precision, kind, d, art.path) for d in chosen] or \
                        [Cell(art.format, rname, art.precision, kind, None, art.path)]
    return cells


def settings_for(sel: Selection, present: dict[str, list[str]], threads: int,
                 parity_samples: int) -> Settings:
    """The run's Settings record (what the report says it measured with)."""
    return Settings(
        batch_sizes=sel.batch_sizes_by_kind(), threads=int(threads), warmup_iters=int(sel.warmup_iters),
        min_iters=int(sel.min_iters), min_time_s=float(sel.min_time_s), parity_samples=int(parity_samples),
        cell_timeout_s=float(sel.cell_timeout_s),
        devices=tuple(d for k in DEVICE_KINDS for d in present.get(k, [])), seed=int(sel.seed),
        requested=sel.requested(), target_ci=sel.target_ci, max_time_s=sel.max_time_s,
        warmup_time_s=sel.warmup_time_s, scenarios=tuple(sel.scenarios), io=sel.io,
        concurrency=sel.concurrency, passes=int(sel.passes))


def check_devices_present(devices: Iterable[str] | None, present: dict[str, list[str]]) -> None:
    """Devices the user named of which none is here: a one-line UsageError before any work (otherwise
    every row would be skipped after the preparation). Some present: the absent ones are skipped rows."""
    def here(d: str) -> bool:
        found = present.get(kind_of(d), [])
        return bool(found) if d == kind_of(d) else any(f == d or f.startswith(d + ":") for f in found)

    if not devices or any(here(d) for d in devices):
        return
    why = "; ".join(dict.fromkeys(DEVICE_KINDS[kind_of(d)].absent_reason if not present.get(kind_of(d))
                                  else f"{d} is not among {', '.join(present[kind_of(d)])}" for d in devices))
    here_now = ", ".join(d for ds in present.values() for d in ds)
    raise UsageError(f"--device {','.join(devices)}: {why}; devices here: {here_now}")
