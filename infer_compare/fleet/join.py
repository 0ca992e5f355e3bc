"""Joining a Ray cluster: what ``infer-compare env`` finds here, advertised as custom resources
(capacity 1 each: one timed task per device) and labels; the Ray and Python versions checked; Ray's
files in a folder of this user's only (fleet/private.py)."""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys

from infer_compare.base.errors import UsageError
from infer_compare.catalog import device_kinds
from infer_compare.fleet.auth import enable
from infer_compare.fleet.private import UMASK, private_line, ray_temp_dir, tighten
from infer_compare.host.probes import env_rows

NODE = "ic-node:"  # ic-node:<name> = 1: the node itself (its CPU configurations, one at a time)
DEVICE = "ic-device:"  # ic-device:<name>/cuda:0 = 1, ic-device:<name>/edgetpu:0 = 1
HINT = "pip install 'infer-compare[fleet]'"
TRUST = ("trust: Ray trusts every node of a cluster alike: whoever holds this token can run code on every "
         "node (this one included) as the user that started it, and a node's results reach the driver as "
         "pickles; join only machines you trust, and measure the others with `fleet run --untrusted` "
         "(docs/fleet.md)")


class RayMissing(UsageError):
    hint = HINT


def require_ray(import_it: bool = True):
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        # deferred: only a machine without Ray reads the extra's requirements
        from infer_compare.catalog.deps import installable

        e = RayMissing("infer-compare fleet needs Ray, which is not installed")
        e.hint = installable(HINT)
        raise e
    if not import_it:
        return None
    import ray

    return ray


def node_name(name: str | None) -> str:
    import socket

    n = re.sub(r"[^A-Za-z0-9._-]+", "-", name or socket.gethostname()).strip("-")
    if not n:
        raise UsageError(f"bad node name {name!r}: letters, digits, '.', '_' and '-' only")
    return n


def advertised(name: str, present: dict[str, list[str]], backends: dict[str, str]) -> tuple[dict, dict]:
    """(resources, labels) of a node: one resource per device, labels for runtimes and their versions."""
    res = {f"{NODE}{name}": 1.0}
    for kind, devs in present.items():
        if kind == "cpu":
            continue
        for d in devs:
            res[f"{DEVICE}{name}/{d}"] = 1.0
    labels = {"infer-compare/node": name,
              "infer-compare/python": ".".join(platform.python_version_tuple()[:2])}
    labels.update({f"infer-compare/{k}": re.sub(r"[^A-Za-z0-9._-]+", "_", v)[:63]
                   for k, v in backends.items() if k and v and v != "n/a"})
    return res, labels


def local_facts() -> tuple[dict[str, list[str]], dict[str, str]]:
    """(devices present, runtime -> version) as `infer-compare env` finds them (no torch needed)."""
    present = device_kinds.present()
    rows, _ = env_rows(present)
    return present, {r["backend"]: r["version"] for r in rows if r["available"] and r["version"]}


def ray_start_argv(name: str, address: str | None, port: int, resources: dict, labels: dict,
                   ip: str, temp_dir: str | None = None) -> list[str]:
    argv = [sys.executable, "-m", "ray.scripts.scripts", "start", f"--node-ip-address={ip}",
            f"--resources={json.dumps(resources)}", f"--labels={json.dumps(labels)}", "--disable-usage-stats",
            *([f"--temp-dir={temp_dir}"] if temp_dir else [])]
    if address:
        return [*argv, f"--address={address}"]
    # the head: no dashboard (its job server runs anyone's code). Ray Client (port 10001) cannot be turned off
    # from `ray start` (a port below 1024 is refused): it listens on --node-ip-address, behind the token
    return [*argv, "--head", f"--port={port}", "--include-dashboard=false", "--dashboard-host=127.0.0.1"]


_MISMATCH = re.compile(r"cluster was started with:\s*Ray:\s*(\S+)\s*Python:\s*(\S+)"
                       r".*?started with:\s*Ray:\s*(\S+)\s*Python:\s*(\S+)", re.S)


def mismatch_line(output: str) -> str | None:
    """Ray's several-line version-mismatch message as one line with both versions, or None."""
    m = _MISMATCH.search(output)
    if not m:
        return None
    return (f"cannot join: the cluster runs Ray {m[1]} on Python {m[2]}, "
            f"this machine Ray {m[3]} on Python {m[4]}; "
            "every node needs the same Ray version and Python minor version (docs/fleet.md)")


def node_env(environ) -> dict[str, str]:
    """The environment of `ray start`: Python versions matched on the minor version, and the node's workers at
    nice 0, the niceness of a local run's processes (Ray's default worker_niceness is 15, which the measuring
    processes a task starts would inherit: fleet/local.py)."""
    return {**environ, "RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL": "minor", "RAY_worker_niceness": "0"}


def join(name: str | None, address: str | None, port: int, ip: str, dry_run: bool = False,
         block: bool = False) -> tuple[list[str], str]:
    """Start this machine's Ray node with its resources, its files in a folder of this user's only (umask 077,
    modes narrowed after the start: fleet/private.py); (argv, output). UsageError on a refusal."""
    import os

    require_ray(import_it=False)
    auth = "" if dry_run else enable(create=not address, addresses=(ip, *([address] if address else [])))
    name = node_name(name)
    present, versions = local_facts()
    res, labels = advertised(name, present, versions)
    temp = ray_temp_dir(create=not dry_run)
    argv = ray_start_argv(name, address, port, res, labels, ip, str(temp)) + (["--block"] if block else [])
    if dry_run:
        return argv, ""
    envv = node_env(os.environ)
    os.umask(UMASK)  # Ray's files and folders, and its workers' (they inherit it): this user's only
    role = f"the cluster at {address}" if address else "a new cluster as its head"
    if block:  # Ray's own 777 folders stay as Ray makes them, inside the folder of mode 700
        lines = (f"node {name} joins {role}", auth, private_line(temp, 0), TRUST)
        print("\n".join(x for x in lines if x), flush=True)
        os.execve(argv[0], argv, envv)
    # a session of its own: every process of this node in one process group, which `fleet leave` stops alone
    p = subprocess.run(argv, capture_output=True, text=True, env=envv, check=False, start_new_session=True)
    out = p.stdout + p.stderr
    if p.returncode != 0:
        line = mismatch_line(out) or (out.strip().splitlines() or ["ray start failed"])[-1]
        raise UsageError(line)
    lines = (f"node {name} joined {role}", auth, private_line(temp, tighten(temp)), TRUST)
    return argv, "\n".join(x for x in lines if x)
