"""Which jobs a fleet runs: the nodes of the cluster (found by their ``ic-node:`` resource), the
ones named by ``--targets``, and per node one job for its GPUs (one task holding them all, bound on
the node to the GPUs Ray assigns, measuring them at once as a local run does: measure/gpus.py) then
one job for everything else (CPU configurations never overlap one another)."""

from __future__ import annotations

from typing import Any

from infer_compare.base.errors import UsageError
from infer_compare.fleet.executor import Job
from infer_compare.fleet.join import DEVICE, NODE


def nodes_of(ray_nodes: list[dict]) -> dict[str, dict[str, Any]]:
    """name -> {"devices": [...], "cpus": n} for every live node that joined with `fleet join`."""
    out: dict[str, dict[str, Any]] = {}
    for n in ray_nodes:
        if not n.get("Alive"):
            continue
        res = n.get("Resources") or {}
        for key in res:
            if key.startswith(NODE):
                name = key[len(NODE):]
                devs = sorted(k[len(DEVICE) + len(name) + 1:] for k in res if k.startswith(f"{DEVICE}{name}/"))
                out[name] = {"devices": devs, "cpus": int(res.get("CPU", 1)), "gpus": int(res.get("GPU", 0))}
    return out


def select(nodes: dict[str, dict], targets: list[str] | None) -> dict[str, dict]:
    if not nodes:
        raise UsageError("no infer-compare node in the cluster (join machines with `infer-compare fleet join`)")
    if not targets:
        return nodes
    missing = [t for t in targets if t not in nodes]
    if missing:
        raise UsageError(f"no node matches --targets {', '.join(missing)} (nodes: {', '.join(sorted(nodes))})")
    return {t: nodes[t] for t in targets}


def jobs_for(name: str, node: dict, run_kwargs: dict[str, Any]) -> list[Job]:
    """Several GPUs: one job for all of them (the task binds to the GPUs Ray assigns and measures them at
    once, measure/gpus.py: each GPU's process on its own cores), then the rest of the node's devices."""
    asked = run_kwargs.get("devices")
    gpus = [d for d in node["devices"] if d.startswith("cuda") and (not asked or d in asked or "cuda" in asked)]
    jobs = []
    if len(gpus) > 1:  # one task holding every GPU: it measures them at once as a local run does (--gpus)
        group = f"{name}: " + ", ".join(gpus)
        jobs.append(Job(name, {**run_kwargs, "devices": gpus}, {f"{DEVICE}{name}/{d}": 1.0 for d in gpus},
                        gpus=float(len(gpus)), group=group))
    rest = [d for d in (asked or ["cpu", *node["devices"]]) if not (len(gpus) > 1 and d in (*gpus, "cuda"))]
    if rest:
        res = {f"{NODE}{name}": 1.0, **{f"{DEVICE}{name}/{d}": 1.0 for d in node["devices"] if d in rest}}
        kw = {**run_kwargs, "devices": rest if (asked or len(gpus) > 1) else asked}
        cuda = [d for d in node["devices"] if d.startswith("cuda")]
        covered = [d for d in cuda if d in rest] or cuda[:1] if "cuda" in rest else [d for d in cuda if d in rest]
        jobs.append(Job(name, kw, res, gpus=float(len(covered))))  # Ray's GPU, which the task binds to
    return jobs
