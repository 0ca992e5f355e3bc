"""Which jobs a fleet runs: the nodes of the cluster (found by their ``ic-node:`` resource), the
ones named by ``--targets``, and one job per node that measures there as a local run does (several
GPUs at once, bound to the GPUs Ray assigns; CPU configurations after them, never overlapping)."""

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
                devs = sorted(k[len(DEVICE) + len(name) + 1:] for k in res
                              if k.startswith(f"{DEVICE}{name}/"))
                labels = n.get("Labels") or {}
                runtimes = tuple(sorted(k.split("/", 1)[1] for k in labels if k.startswith("infer-compare/")
                                        and k.split("/", 1)[1] not in ("node", "python")))
                out[name] = {"devices": devs, "cpus": int(res.get("CPU", 1)), "gpus": int(res.get("GPU", 0)),
                             "runtimes": runtimes, "host": n.get("NodeManagerHostname") or ""}
    return out


def select(nodes: dict[str, dict], targets: list[str] | None) -> dict[str, dict]:
    if not nodes:
        raise UsageError("no infer-compare node in the cluster "
                         "(join machines with `infer-compare fleet join`)")
    if not targets:
        return nodes
    missing = [t for t in targets if t not in nodes]
    if missing:
        raise UsageError(f"no node matches --targets {', '.join(missing)} "
                         f"(nodes: {', '.join(sorted(nodes))})")
    return {t: nodes[t] for t in targets}


def jobs_for(name: str, node: dict, run_kwargs: dict[str, Any]) -> list[Job]:
    """One job per node: one Ray task holding the node (its ``ic-node``), each device it measures (its
    ``ic-device``) and Ray's GPUs for them. On the node it measures as a local run does: several GPUs at
    once (measure/gpus.py, each GPU's process on its own cores, bound to the GPUs Ray assigned:
    fleet/bind.py), then the CPU configurations alone. One task, so the bundle is prepared once, as
    locally."""
    asked = run_kwargs.get("devices")
    cuda = [d for d in node["devices"] if d.startswith("cuda")]
    gpus = [d for d in cuda if not asked or d in asked] or (cuda[:1] if asked and "cuda" in asked else [])
    # named: the task maps them to Ray's GPUs
    devices = asked or (["cpu", *node["devices"]] if cuda else None)
    res = {f"{NODE}{name}": 1.0, **{f"{DEVICE}{name}/{d}": 1.0 for d in node["devices"]
                                    if d in gpus or not d.startswith("cuda") and (not asked or d in asked)}}
    return [Job(name, {**run_kwargs, "devices": devices}, res, gpus=float(len(gpus)),
                runtimes=tuple(node.get("runtimes") or ()), host=node.get("host") or "")]
