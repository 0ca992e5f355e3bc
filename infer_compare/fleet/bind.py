"""A GPU job on its node: bound to the GPU Ray assigned, rows labelled with the physical GPU.

Ray gives a task with ``num_gpus`` its own GPUs and sets ``CUDA_VISIBLE_DEVICES`` to them, so the task
sees them as ``cuda:0..``: the index the driver planned (``cuda:1`` on the node) means nothing there.
``bind`` maps the job's planned CUDA devices onto the GPUs the task sees (in order), measures on
those, and ``relabel`` writes each row's device back as the physical GPU (``cuda:N``, N the NVML
index on the node) with its name and UUID. A job that plans more GPUs than the task sees is not a
skipped row: ``Unbound`` (a failed job naming node and device, and the fleet run exits 1).
"""

from __future__ import annotations

from typing import Any

from infer_compare.catalog.device_kinds import kind_of


class Unbound(RuntimeError):
    """The task cannot see the device its job is for."""


def cuda_of(run_kwargs: dict[str, Any]) -> list[str]:
    return [d for d in (run_kwargs.get("devices") or ()) if kind_of(d) == "cuda"]


def bind(run_kwargs: dict[str, Any], visible: list[dict[str, Any]], assigned: list[str] | None, node: str,
         cvd: str | None) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(run_kwargs on the GPUs the task sees, {device measured: the physical GPU's facts}). ``visible``:
    device_kinds.gpus() in the task (CUDA_VISIBLE_DEVICES applied); ``assigned``: ray.get_gpu_ids()."""
    planned = cuda_of(run_kwargs)
    if not planned:
        return run_kwargs, {}
    if "cuda" in planned:  # the kind: every GPU the task was given
        planned = [f"cuda:{i}" for i in range(max(1, len(visible)))]
    if len(visible) < len(planned):
        seen = ", ".join(f"cuda:{g['index']} ({g.get('uuid', '?')})" for g in visible) or "none"
        raise Unbound(f"node {node}: {', '.join(planned)} not visible to the task (Ray assigned GPU(s) "
                      f"{assigned if assigned is not None else 'unknown'}, CUDA_VISIBLE_DEVICES={cvd!r}; "
                      f"the task sees {seen})")
    mapping = {d: visible[i] for i, d in enumerate(planned)}
    devices = [f"cuda:{mapping[d]['cuda']}" if d in mapping else d for d in run_kwargs.get("devices") or ()]
    if "cuda" in (run_kwargs.get("devices") or ()):
        devices = [d for d in devices if d != "cuda"] + [f"cuda:{g['cuda']}" for g in mapping.values()]
    devices = list(dict.fromkeys(devices))
    return {**run_kwargs, "devices": devices}, {f"cuda:{g['cuda']}": g for g in mapping.values()}


def relabel(report: dict[str, Any], bound: dict[str, dict[str, Any]], node: str) -> dict[str, Any]:
    """Each row measured on a bound GPU named by the physical GPU (device cuda:<NVML index>, extra.gpu_*);
    Unbound when a row says its device was not there (a planned GPU that vanished)."""
    rows = []
    for row in report.get("rows", []):
        g = bound.get(row.get("device"))
        if g is None:
            rows.append(row)
            continue
        if row.get("skip_kind") == "no_device" or "does not exist" in str(row.get("reason") or ""):
            raise Unbound(f"node {node}: cuda:{g['index']} ({g.get('uuid', '?')}) "
                          f"could not be used by the task: {row.get('reason')}")
        facts = {f"gpu_{k}": g[k] for k in ("index", "name", "uuid") if g.get(k) is not None}
        rows.append({**row, "device": f"cuda:{g['index']}", "extra": {**(row.get("extra") or {}), **facts}})
    names = {d: f"cuda:{g['index']}" for d, g in bound.items()}

    def lab(s: str) -> str:
        parts = s.split("/")
        return "/".join(parts[:3] + [names.get(parts[3], parts[3])] + parts[4:]) if len(parts) > 3 else s
    return {**report, "rows": rows, "not_run": [lab(s) for s in report.get("not_run") or ()]}


def assigned_gpu_ids() -> list[str] | None:
    """ray.get_gpu_ids() inside a Ray task, as strings; None outside one."""
    try:
        import ray

        if not ray.is_initialized():
            return None
        return [str(x) for x in ray.get_gpu_ids()]
    except Exception:  # noqa: BLE001 - no Ray, or not in a worker
        return None
