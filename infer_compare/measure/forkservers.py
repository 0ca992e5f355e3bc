"""The fork servers of one comparison (measure/forkserver.py has the server itself): one per runtime that asks
for one (``RunnerInfo.preload``), started before the preparation so that their imports overlap it, and one
more set per GPU beyond the first where several GPUs measure at once (each GPU's slot forks from its own)."""

from __future__ import annotations

import os
from typing import Any

from infer_compare.host import gpu_turn
from infer_compare.measure.forkserver import ForkServer, enabled


def bytecode_env(modules: tuple[str, ...], cache_root: str) -> dict[str, str]:
    """The environment that keeps the server's bytecode under the tool's cache, where the first preloaded
    module's installation keeps none (host/pycache.py: 2-3 s of the server's import of torch on the H100
    machine); {} where bytecode is cached, or the user chose a prefix."""
    # deferred: the measuring child's start stays light without it (+1 module)
    from infer_compare.host.pycache import prefix_env

    return prefix_env(cache_root, tuple(m.lstrip("?") for m in modules[:1]))


class ForkServers:
    """One fork server per runtime that asks for one (``RunnerInfo.preload``), started when its first
    configuration is measured, closed at the end of the comparison."""

    def __init__(self, log: Any = None, cache_root: str = "", python: str | None = None):
        self.servers: dict[tuple[str, ...], ForkServer] = {}
        self.log = log or (lambda msg: None)
        self.cache_root, self.python = cache_root, python
        self.spares: list[ForkServers] = []  # launched early for the GPU slots after the first (take_spare)

    def take_spare(self) -> ForkServers | None:
        """A set of servers launched before the preparation for another GPU's slot, or None."""
        return self.spares.pop(0) if self.spares else None

    def launch(self, modules: tuple[str, ...]) -> ForkServer | None:
        """Start the server of ``modules`` now, its imports overlapping the caller's own work."""
        if not modules or not enabled():
            return None
        srv = self.servers.get(modules)
        if srv is None:
            srv = self.servers[modules] = ForkServer(modules, self.python)
            env = bytecode_env(modules, self.cache_root)
            if env:
                self.log(f"no bytecode cache next to {modules[0]}: the fork server keeps one in "
                         f"{env['PYTHONPYCACHEPREFIX']}")
            srv.launch(env)
        return srv

    def for_modules(self, modules: tuple[str, ...]) -> ForkServer | None:
        """The ready server of ``modules`` (a launched server that imported more will do; started now if
        ``launch`` did not), or None: fresh interpreters."""
        wider = [s for m, s in self.servers.items() if modules and set(modules) <= set(m) and not s.failed]
        srv = wider[0] if wider else self.launch(modules)
        if srv is None:
            return None
        if not srv.ready and not srv.failed:
            if srv.start():
                self.announce(srv)
            else:
                self.log(f"fork server not used ({srv.failed}): fresh interpreters")
        return srv if srv.proc is not None and srv.ready else None

    def settle(self) -> list[ForkServer]:
        """Wait, saying nothing, until every launched server has imported its modules (or failed); the servers
        that became ready (a caller says so where it uses them: ``announce``)."""
        return [srv for srv in list(self.servers.values())
                if not srv.ready and not srv.failed and srv.start()]

    def importing(self) -> bool:
        """True while some launched server has neither finished its imports nor failed."""
        return any(not srv.ready and not srv.failed for srv in self.servers.values())

    def announce(self, srv: ForkServer) -> None:
        self.log("fork server ready: " + ", ".join(m.lstrip("?") for m in srv.modules)
                 + " imported once for all configurations")

    def close(self, wait: bool = True) -> list[Any]:
        """Kill every server (and spare); with ``wait``,
        waited for here, else their processes are returned."""
        procs = [p for p in (srv.close(wait) for srv in self.servers.values()) if p is not None]
        self.servers.clear()
        for spare in self.spares:  # a spare is a ForkServers of its own
            procs += spare.close(wait)
        self.spares.clear()
        return procs


def preloads(runner_names: Any) -> dict[str, tuple[str, ...]]:
    """Runner -> the modules of its runtime's fork server: the union of the preloads of that runtime's
    runners among ``runner_names`` (one server per runtime)."""
    # deferred: the measuring child's start stays light without it (+2 modules)
    from infer_compare.catalog.runtimes import runtimes

    wanted = set(runner_names)
    out: dict[str, tuple[str, ...]] = {}
    for rt in runtimes():
        mods: list[str] = []
        for r in rt.runners:
            if r.name in wanted:
                mods += [m for m in r.preload if m not in mods]
        for r in rt.runners:
            if r.name in wanted and r.preload:
                out[r.name] = tuple(mods)
    return out


def launch_fork_servers(model: Any, sel: Any, present: dict[str, list[str]], cache: Any, prog: Any):
    """Start the fork servers of the selected runners that have one (PyTorch) and a device here now, so
    that their imports overlap the preparation; not for an ONNX model, whose PyTorch rows cannot run."""
    from infer_compare.catalog.runtimes import runners  # here: the server process itself never needs it

    servers = ForkServers(prog.log, str(cache.root))
    if not (isinstance(model, str | os.PathLike) and str(model).lower().endswith(".onnx")):
        known = runners()
        names = [n for n in (sel.backends or known)
                 if n in known and any(present.get(k) for k in known[n].device_kinds)]
        wanted = list(dict.fromkeys(preloads(names).values()))
        gpu_names = [n for n in names if "cuda" in known[n].device_kinds and known[n].preload]
        parts = turn_parts(gpu_names)
        extra = spare_slots(present, sel, parts) if gpu_names else 0
        for target in [servers] + [ForkServers(prog.log, str(cache.root)) for _ in range(extra)]:
            for mods in wanted:
                target.launch(mods)
            if target is not servers:
                servers.spares.append(target)
    return servers


def turn_parts(gpu_names: list[str]) -> int:
    """The measuring processes each GPU will likely have (host/gpu_turn.py: two where a GPU runner compiles
    and the GPUs have the memory; the model's weights are judged later: a spare left without a slot costs its
    imports)."""
    if not (gpu_turn.enabled() and any(gpu_turn.traced_loads(n) for n in gpu_names)):
        return 1
    from infer_compare.catalog.device_kinds import gpus  # deferred: the server process itself never needs it

    return 1 if gpu_turn.room(list(gpus())) else gpu_turn.PARTS


def spare_slots(present: dict[str, list[str]], sel: Any, parts: int = 1) -> int:
    """How many GPU slots beyond the first will fork from servers of their own: the CUDA devices the run may
    measure at once, times the measuring processes of each (``parts``: two where they take turns on a GPU,
    host/gpu_turn.py), less one (none with ``--gpus sequential``). A GPU the plan leaves out later only costs
    its spare's import."""
    if getattr(sel, "gpus", "") == "sequential":
        return 0
    asked = set(getattr(sel, "devices", None) or ())
    gpus = [d for d in present.get("cuda", []) if not asked or "cuda" in asked or d in asked]
    return max(0, len(gpus) * max(1, parts) - 1)
