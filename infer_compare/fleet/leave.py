"""``fleet leave``: stop this machine's node only. ``ray stop`` stops every Ray process of the host (every
node of a loopback lab, anyone's cluster); here the node is found by its raylet (the one advertising
``ic-node:NAME``), and only the Ray processes of its process group (``fleet join`` starts each node in a
session of its own) and the raylet's descendants are stopped: SIGTERM (the raylet tells the head it is
leaving), then SIGKILL for what is left after ``grace_s``."""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass

from infer_compare.base.errors import UsageError
from infer_compare.fleet.join import NODE

# what Ray starts for a node: its binaries, its Python components, its workers and agents, `ray start` itself
_RAY = re.compile(r"(/raylet/raylet|/gcs/gcs_server|ray/_private/log_monitor\.py"
                  r"|ray/autoscaler/_private/monitor\.py|ray/dashboard/(dashboard|agent)\.py"
                  r"|ray/_private/runtime_env/agent/main\.py|ray/_private/workers/"
                  r"|ray\.scripts\.scripts|^ray::)")


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    cmd: str  # argv joined by spaces


def processes() -> list[Proc]:
    """Every process of this host (this PID namespace) that can be read."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out.append(Proc(int(d), int(fields[1]), int(fields[2]), cmd))
        except (OSError, IndexError, ValueError):
            continue
    return out


def raylet_node(p: Proc) -> str | None:
    """The infer-compare node a raylet advertises (``ic-node:NAME`` in its resource list), else None."""
    if "/raylet/raylet" not in p.cmd.split(" ", 1)[0]:
        return None
    m = re.search(rf"--static_resource_list=(?:\S*?,)?{re.escape(NODE)}([^,\s]+),", p.cmd)
    return m[1] if m else None


def node_processes(name: str, procs: list[Proc], me: int) -> tuple[Proc, list[Proc]]:
    """(the node's raylet, every process to stop: the raylet first). UsageError when no such node runs
    here or when its process group holds another node (joined without a session of its own)."""
    nodes = {raylet_node(p): p for p in procs if raylet_node(p)}
    if name not in nodes:
        here = ", ".join(sorted(nodes)) or "none"
        raise UsageError(f"fleet leave: no node {name!r} runs on this machine "
                         f"(infer-compare nodes here: {here})")
    raylet = nodes[name]
    others = sorted(n for n, p in nodes.items() if n != name and p.pgid == raylet.pgid)
    if others:
        raise UsageError(f"fleet leave: node {name} shares its process group with node(s) "
                         f"{', '.join(others)} (started without `infer-compare fleet join`?): "
                         "stop them together with `ray stop`")
    children: dict[int, list[Proc]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p)
    tree, todo = {}, [raylet]
    while todo:
        p = todo.pop()
        tree[p.pid] = p
        todo += children.get(p.pid, [])
    group = {p.pid: p for p in procs if p.pgid == raylet.pgid and _RAY.search(p.cmd)}
    rest = [p for pid, p in {**group, **tree}.items() if pid not in (raylet.pid, me)]
    return raylet, [raylet, *sorted(rest, key=lambda p: p.pid)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _signal(procs: list[Proc], sig: int) -> None:
    for p in procs:
        try:
            os.kill(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _short(p: Proc) -> str:
    """'gcs_server', 'log_monitor.py', 'ray::IDLE': what a process is, in a word."""
    argv = p.cmd.split()
    if not argv:
        return str(p.pid)
    script = next((a for a in argv[1:3] if a.endswith(".py")), "")
    return (script or argv[0]).rsplit("/", 1)[-1]


def _stop(procs: list[Proc], until: float) -> None:
    """SIGTERM to ``procs``, then wait until they are gone or ``until`` (monotonic) has passed."""
    _signal(procs, signal.SIGTERM)
    while any(_alive(p.pid) for p in procs) and time.monotonic() < until:
        time.sleep(0.2)


def leave(name: str, grace_s: float = 15.0) -> str:
    """Stop node ``name`` of this machine; one line for the user. Ray's own order (``ray stop``): the raylet
    first (it drains and tells the head it leaves), the GCS (a head's) last."""
    raylet, procs = node_processes(name, processes(), os.getpid())
    gcs = [p for p in procs if "/gcs/gcs_server" in p.cmd]
    deadline = time.monotonic() + grace_s
    _stop(procs[:1], deadline)
    _stop([p for p in procs[1:] if p not in gcs], deadline)
    _stop(gcs, deadline)
    left = [p for p in procs if _alive(p.pid)]
    _signal(left, signal.SIGKILL)
    return (f"node {name} left: {len(procs)} Ray process(es) stopped"
            + (f" ({len(left)} killed after {grace_s:g} s: {', '.join(_short(p) for p in left)})"
               if left else "")
            + ("; it was the head: the cluster is gone for every other node" if gcs else "")
            + "; other Ray processes of this machine are untouched")
