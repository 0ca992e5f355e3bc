"""Several GPUs of one host, measured at the same time: which GPU measures which configuration, and on
which CPU cores each measuring process runs. Pure planning, no process is started here (parallel.py
runs the plan).

* ``--gpus spread`` (the default): identical GPUs (the same model name) form a pool; each GPU
  configuration is measured once, by whichever GPU of its pool is free first. GPUs of different
  models are pools of their own, so each model is measured.
* ``--gpus every``: every configuration on every GPU, the GPUs at the same time.
* ``--gpus sequential``: one configuration after another, on every GPU in turn (no concurrency).

Each GPU gets a slot: its logical device (``cuda:N`` as this process's CUDA numbers it), the GPU's
facts (NVML index, name, UUID; the measuring child sees only that GPU, ``CUDA_VISIBLE_DEVICES`` set
to its UUID) and a slice of the CPU cores, whole physical cores where the topology says which
logical CPUs are siblings. GPU slots never share a core; CPU configurations run after the GPU
phase, one at a time, on every core, so a GPU row and a CPU row never compete for cores.

``--cpu-rows beside`` (``make_lanes``): the CPU configurations run at the same time as the GPU ones,
still one at a time, in a lane of their own cores (every core but GPU_LANE_CPUS per GPU) with as many
threads as the lane has physical cores; each GPU's measuring process keeps its own few cores. This
holds with one GPU too. ``--cpu-rows auto`` (the default): beside where the lane keeps at least
AUTO_LANE_SHARE of the usable CPUs and every thread the user asked for (``--threads``), after otherwise
(``cpu_rows_beside``), so that a small host's CPU rows are not measured on a fraction of it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

from infer_compare.host import gpu_turn

GPU_MODES = ("spread", "every", "sequential")
TURNS_NOTE = (
    "each GPU whose plan compiles was measured by two such processes taking turns (host/gpu_turn.py, "
    "extra.gpu_process): the GPU's work of one at a time (each batch size's load, cold call, warm-up, timed "
    "loop and parity outputs under a lock file), except torch.compile's tracing and compilation, which ran "
    "on one process's cores while the other used the GPU (each row's extra.gpu_turn: the seconds its process "
    "waited for the GPU, and compiled beside the other's work); "
    "INFER_COMPARE_GPU_TURNS=0: one process per GPU. ")
# CPU configurations after the GPU ones (every core), beside them, or auto
CPU_ROWS = ("auto", "after", "beside")
# --cpu-rows auto: beside only where the CPU lane keeps at least this share of the CPUs
AUTO_LANE_SHARE = 0.75
GPU_LANE_CPUS = 4  # logical CPUs of each GPU's measuring process when the CPU configurations run beside
MIN_CPU_LANE = 4  # fewer CPUs left for the CPU lane: the CPU configurations run after the GPU ones


@dataclass(frozen=True)
class Slot:
    """One GPU and the CPU cores of the process that measures on it."""

    device: str  # cuda:N in this process ("cpu": the CPU configurations' lane, beside the GPUs)
    gpu: dict[str, Any] = field(default_factory=dict)  # index (NVML), name, uuid
    cores: tuple[int, ...] = ()
    threads: int | None = None  # the CPU lane: the threads of its configurations (its physical cores)
    part: int = 0  # which of its GPU's measuring processes taking turns (host/gpu_turn.py), from 0
    turn: str = ""  # the lock file of those processes ("": the GPU's one measuring process)

    @property
    def name(self) -> str:
        """The slot's own name: its device, and which of the GPU's processes it is where they take turns."""
        return self.device if not self.turn else f"{self.device}/{self.part + 1}"

    @property
    def pool(self) -> str:
        """GPUs of one model are interchangeable: they share a pool."""
        return str(self.gpu.get("name") or self.device)

    @property
    def is_gpu(self) -> bool:
        return self.device != "cpu"

    def env(self) -> dict[str, str]:
        """The measuring child's view: this GPU alone (by UUID when NVML gave one), as cuda:0."""
        if not self.is_gpu:
            return {}
        which = self.gpu.get("uuid") or self.gpu.get("index")
        return {**({"CUDA_VISIBLE_DEVICES": str(which)} if which is not None else {}),
                **({gpu_turn.ENV: self.turn} if self.turn else {})}

    def facts(self) -> dict[str, Any]:
        """What each row measured on this slot records: the physical GPU and the cores."""
        out = {f"gpu_{k}": self.gpu[k] for k in ("index", "name", "uuid") if self.gpu.get(k) is not None}
        if self.cores:
            out["cores"] = spell_cores(self.cores)
        if self.threads:
            out["lane_threads"] = self.threads
        if self.turn:
            out["gpu_process"] = self.part + 1
        return out

    def describe(self) -> str:
        g = self.gpu
        bits = [f"GPU {g['index']}" if g.get("index") is not None else "", str(g.get("name") or ""),
                str(g.get("uuid") or ""), f"cores {spell_cores(self.cores)}" if self.cores else ""]
        return f"{self.name} (" + ", ".join(b for b in bits if b) + ")"


def spell_cores(cores: tuple[int, ...]) -> str:
    """(0, 1, 2, 5) -> '0-2,5'."""
    cs, out, i = sorted(set(cores)), [], 0
    while i < len(cs):
        j = i
        while j + 1 < len(cs) and cs[j + 1] == cs[j] + 1:
            j += 1
        out.append(str(cs[i]) if i == j else f"{cs[i]}-{cs[j]}")
        i = j + 1
    return ",".join(out)


def parse_cores(text: str) -> set[int]:
    """'0-2,5' -> {0, 1, 2, 5}; ValueError on anything else."""
    out: set[int] = set()
    for part in text.split(","):
        a, _, b = part.strip().partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def siblings_of(cpu: int) -> tuple[int, ...]:
    """The logical CPUs sharing ``cpu``'s physical core (sysfs), or just ``cpu``."""
    try:
        with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") as f:
            text = f.read().strip()
    except OSError:
        return (cpu,)
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        if a.isdigit():
            out += range(int(a), int(b or a) + 1)
    return tuple(out) or (cpu,)


def physical_cores(cpus: list[int], siblings: Any = siblings_of) -> list[tuple[int, ...]]:
    """``cpus`` grouped by physical core (siblings together), in order of their first CPU."""
    seen: set[int] = set()
    out: list[tuple[int, ...]] = []
    for c in sorted(cpus):
        if c in seen:
            continue
        group = tuple(x for x in siblings(c) if x in cpus) or (c,)
        seen.update(group)
        out.append(group)
    return out


def core_slices(cpus: list[int], parts: int, siblings: Any = siblings_of) -> list[tuple[int, ...]]:
    """``cpus`` cut into ``parts`` disjoint slices of whole physical cores, as even as they go; fewer
    physical cores than parts: slices of single logical CPUs; fewer CPUs than parts: () for the
    slices that get none (that process is not pinned)."""
    groups = physical_cores(cpus, siblings)
    if len(groups) < parts:
        groups = [(c,) for c in sorted(cpus)]
    out: list[tuple[int, ...]] = []
    for i in range(parts):
        lo, hi = i * len(groups) // parts, (i + 1) * len(groups) // parts
        out.append(tuple(sorted(c for g in groups[lo:hi] for c in g)))
    return out


def usable_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity), else every CPU."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def make_slots(gpus: list[dict[str, Any]], devices: list[str], cpus: list[int] | None = None,
               siblings: Any = siblings_of) -> list[Slot]:
    """One slot per device of ``devices`` (cuda:N, in this process's numbering) with its GPU's facts
    (``gpus``: device_kinds.gpus()) and its own slice of ``cpus``."""
    by_cuda = {f"cuda:{g.get('cuda', g.get('index'))}": g for g in gpus}
    slices = core_slices(usable_cpus() if cpus is None else cpus, len(devices), siblings) if devices else []
    return [Slot(d, dict(by_cuda.get(d, {})), cores) for d, cores in zip(devices, slices, strict=True)]


def make_lanes(gpus: list[dict[str, Any]], devices: list[str], threads: int, cpus: list[int] | None = None,
               siblings: Any = siblings_of, per_gpu: int | None = None,
               parts: int = 1) -> tuple[list[Slot], Slot] | None:
    """CPU configurations beside the GPU ones: each GPU's slot gets whole physical cores making at least
    ``per_gpu`` logical CPUs for each of its ``parts`` measuring processes (host/gpu_turn.py), the CPU lane
    every other core and as many threads as it has physical cores (at most ``threads``); None when the lane
    would have fewer than MIN_CPU_LANE CPUs."""
    per_gpu = (GPU_LANE_CPUS if per_gpu is None else per_gpu) * max(1, parts)
    # the GPUs' processes on the last cores: the first ones also serve the parent and the system (on the 2 x
    # H100 host the GPU process on cores 0-3 loaded its model several times slower than the one on cores 4-7)
    groups = physical_cores(usable_cpus() if cpus is None else cpus, siblings)[::-1]
    slots, i = [], 0
    for _ in devices:
        mine: list[int] = []
        while len(mine) < per_gpu and i < len(groups):
            mine += groups[i]
            i += 1
        slots.append(mine)
    rest = groups[i:]
    if sum(len(g) for g in rest) < MIN_CPU_LANE:
        return None
    by_cuda = {f"cuda:{g.get('cuda', g.get('index'))}": g for g in gpus}
    gpu_slots = [Slot(d, dict(by_cuda.get(d, {})), tuple(sorted(c)))
                 for d, c in zip(devices, slots, strict=True)]
    lane = Slot("cpu", {}, tuple(sorted(c for g in rest for c in g)),
                threads=max(1, min(int(threads), len(rest))))
    return gpu_slots, lane


def cpu_rows_beside(mode: str, lane: Slot | None, usable: int, asked_threads: int | None) -> tuple[bool, str]:
    """Whether the CPU configurations run beside the GPU ones in ``lane`` (make_lanes' CPU lane, None when too
    few cores), and the report's note when they do not. ``auto``: only where the lane keeps AUTO_LANE_SHARE of
    the ``usable`` CPUs and at least the ``asked_threads`` (--threads) the user asked for."""
    if mode == "after":
        return False, ""
    if lane is None:
        return False, (f"--cpu-rows {mode}: too few CPU cores for a lane of their own beside the GPUs; the "
                       "CPU configurations ran after the GPU ones, on every core")
    if mode == "beside":
        return True, ""
    share = len(lane.cores) / max(1, usable)
    if share < AUTO_LANE_SHARE:
        return False, ("--cpu-rows auto: the CPU configurations ran after the GPU ones, on every core "
                       f"(beside them they would have had {len(lane.cores)} of {usable} CPUs, under "
                       f"{AUTO_LANE_SHARE:.0%})")
    if asked_threads and asked_threads > int(lane.threads or 0):
        return False, ("--cpu-rows auto: the CPU configurations ran after the GPU ones (--threads "
                       f"{asked_threads}: more than the {lane.threads} physical cores a lane beside them "
                       "would have had)")
    return True, ""


def assign(cells: list[Any], slots: list[Slot],
           mode: str) -> tuple[list[tuple[Any, tuple[str, ...]]], list[Any]]:
    """(GPU work, the other cells): each GPU configuration with the devices that may measure it, in plan
    order. ``spread``: the cells of one configuration on GPUs of one pool become one, measurable on any
    GPU of the pool; ``every``: each cell on its own device; ``sequential``: no GPU work apart (every
    cell is in the second list, measured in turn as before). A cell whose device has no slot is "other"
    (its row says why it could not run)."""
    if mode not in GPU_MODES:
        raise ValueError(f"unknown GPU mode {mode!r}; known: {', '.join(GPU_MODES)}")
    by_dev = {s.device: s for s in slots}
    if mode == "sequential" or not slots:
        return [], list(cells)
    work: list[tuple[Any, tuple[str, ...]]] = []
    seen: dict[tuple, int] = {}
    rest = []
    for c in cells:
        slot = by_dev.get(c.device) if c.device else None
        if slot is None:
            rest.append(c)
            continue
        if mode == "every":
            work.append((c, (c.device,)))
            continue
        key = (c.fmt, c.runner, c.precision, c.kind, c.artifact, slot.pool)
        if key in seen:
            continue
        seen[key] = len(work)
        work.append((c, tuple(s.device for s in slots if s.pool == slot.pool)))
    return work, rest


def concurrency_note(mode: str, used: list[Slot]) -> str:
    """The report's note on what ran concurrently on ``used`` (and what that does not show)."""
    how = ("each configuration measured once per GPU model, on whichever GPU of that model was free"
           if mode == "spread" else "every configuration measured on every GPU")
    gpu = [s for s in used if s.is_gpu]
    lane = next((s for s in used if not s.is_gpu), None)
    cpu = ("CPU configurations ran at the same time as the GPU ones (--cpu-rows beside, or auto where the "
           f"cores allow), one at a time, pinned to cores {spell_cores(lane.cores)} with {lane.threads} "
           "threads (fewer than a run with --cpu-rows after gives them: every core); beside the GPU rows "
           "they were not shown to match the same rows alone on the same cores within 3 % "
           "(reports/gpu-x2-startup-round2.md): --cpu-rows after measures them alone. "
           if lane is not None else
           "CPU configurations ran after them, one at a time, on every core. ")
    several = len({s.device for s in gpu}) > 1
    return (f"GPU configurations ran {'concurrently' if several else 'on one GPU'} (--gpus {mode}: {how}) on "
            + "; ".join(s.describe() for s in gpu)
            + ". Each measuring process saw its GPU alone (CUDA_VISIBLE_DEVICES) "
              "and ran pinned to its own cores; "
            + (TURNS_NOTE if any(s.turn for s in gpu) else "")
            + cpu + "Each row names its GPU (extra.gpu_*). "
            "Rows of short calls (a CPU-bound launch loop: batch 1, small batches of fast configurations) "
            "are not shown to match a row measured alone within 3 % (on the 2-GPU H200 machines their spread "
            "between two runs, each row alone, was larger: reports/gpu-h200x2-fidelity.md); --gpus "
            "sequential measures each alone")


def with_turns(slots: list[Slot], lockdir: str, parts: int = gpu_turn.PARTS,
               siblings: Any = siblings_of) -> list[Slot]:
    """Each GPU slot as ``parts`` slots of that GPU whose measuring processes take turns on it
    (host/gpu_turn.py), each on its own share of the slot's cores (whole physical cores where there are
    enough), sharing one lock file under ``lockdir``. A slot whose cores cannot be shared out among them stays
    one."""
    out: list[Slot] = []
    for s in slots:
        shares = core_slices(list(s.cores), parts, siblings) if s.cores else []
        if not s.is_gpu or len(shares) != parts or not all(shares):
            out.append(s)
            continue
        path = os.path.join(lockdir, f"gpu-{s.device.replace(':', '')}.turn")
        out += [replace(s, cores=c, part=i, turn=path) for i, c in enumerate(shares)]
    return out

