"""The A/B gate's fork servers (measure/forkserver.py): one per runtime for each side's interpreter (one set
for both sides under one interpreter), made before anything else of the gate, so that their imports overlap
the bundles' verification and each other instead of waiting, one runtime at a time, at that runtime's first
configuration (PyTorch's import: 3-5 s on the 2-core VM, ONNX Runtime's and OpenVINO's 0.4-0.5 s each).

Launched early: the servers of the runners the gate can measure as far as the selection and bundle B's
manifest tell (its artifacts' formats; the CPU unless --device names others); read before the bundle is
verified (an unreadable manifest launches nothing: the verification then says what is wrong). Before the
first block is timed every launched server has finished its imports (``settle``): no import shares the CPU
with a timed block. A runner that needs a server nobody launched gets it at its configuration, as before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infer_compare.base.errors import UsageError
from infer_compare.base.progress import Progress
from infer_compare.measure.forkservers import ForkServers, preloads

MANIFEST = "manifest.json"


def server_modules(runner: str) -> tuple[str, ...]:
    """What ``runner``'s fork server imports. Every runtime gets one here, not only those whose import is
    slow: each configuration starts a process pair per replicate, and a fork (the runtime imported, nothing
    run) costs milliseconds where an interpreter that imports it costs 0.3-0.5 s on the 2-core VM."""
    # deferred: only the gate needs it (+0 modules: the runtimes' catalog is loaded by then)
    from infer_compare.catalog.runtimes import runners

    info = runners().get(runner)
    mods = preloads([runner]).get(runner) or ((info.impl.split(":")[0],) if info else ())
    return (*mods, "infer_compare.measure.ab_child") if mods else ()


class SideServers:
    """Each side's fork servers, one per runtime: one set for both sides under one interpreter (a server's own
    state, where its imports put things in memory, which every child it forks inherits, then falls on both
    sides alike instead of on one side's process pairs, where the spread between them could not show it)."""

    def __init__(self, pythons: dict[str, str | None], prog: Progress, idle: Callable[[], Any] | None = None):
        if pythons.get("a") == pythons.get("b"):
            both = ForkServers(lambda m: prog.log(f"sides A and B: {m}"), python=pythons.get("b"))
            self.servers = {"a": both, "b": both}
        else:
            self.servers = {s: ForkServers(lambda m, s=s: prog.log(f"side {s.upper()}: {m}"),
                                           python=pythons.get(s))
                            for s in ("a", "b")}
        self.settled = False
        self.idle = idle  # run once, while the first wait for the servers' imports would be idle (``settle``)
        self.unannounced: set[int] = set()  # servers made ready by ``settle``: said ready at their first use

    def distinct(self) -> list[ForkServers]:
        return list({id(v): v for v in self.servers.values()}.values())

    def launch(self, runner: str) -> tuple[str, ...]:
        """Start both sides' servers of ``runner``'s runtime (their imports run in the background)."""
        mods = server_modules(runner)
        if mods:
            for srv in self.distinct():
                srv.launch(mods)
        return mods

    def for_runner(self, runner: str) -> dict[str, Any]:
        """Both sides' ready fork servers of ``runner``'s runtime (started now if not launched early),
        or {}."""
        if not self.settled:
            self.settle()
        mods = self.launch(runner)
        if not mods:
            return {}
        ready = {}
        for fs in self.distinct():
            srv = ready[id(fs)] = fs.for_modules(mods)
            if srv is not None and id(srv) in self.unannounced:
                self.unannounced.discard(id(srv))
                fs.announce(srv)
        return {s: ready[id(fs)] for s, fs in self.servers.items()}

    def settle(self) -> None:
        """Wait, saying nothing, until every server launched so far has imported its modules (or failed): what
        is timed next then shares the CPU with no import. A server's readiness is logged where it is used.
        ``idle`` runs first if some server is still importing."""
        self.settled = True
        if self.idle is not None and self.importing():
            self.idle()
        for fs in self.distinct():
            self.unannounced.update(id(srv) for srv in fs.settle())

    def importing(self) -> bool:
        """True while some launched server has neither finished its imports nor failed."""
        return any(fs.importing() for fs in self.distinct())

    def close(self) -> None:
        for srv in self.distinct():
            srv.close()


def check_pythons(pythons: dict[str, str | None]) -> None:
    """A one-line error for a --python-a/--python-b that is not an executable file."""
    for p in pythons.values():
        if p and not (Path(p).is_file() and os.access(p, os.X_OK)):
            raise UsageError(f"{p}: no such interpreter (--python-a/--python-b take a python executable)")


def launch_early(bundle: str | os.PathLike, options: Any, pythons: dict[str, str | None], prog: Progress,
                 idle: Callable[[], Any] | None = None) -> SideServers:
    """Both sides' servers of the runners the gate will likely measure (``early_runners``), launched now."""
    check_pythons(pythons)
    servers = SideServers(pythons, prog, idle)
    for runner in early_runners(bundle, options):
        servers.launch(runner)
    return servers


def early_runners(bundle: str | os.PathLike, options: Any) -> list[str]:
    """The runners the gate will likely measure, from the selection and the baseline bundle's manifest (its
    artifacts' formats: the gate measures A's plan), without verifying the bundle: [] where the manifest
    cannot be read."""
    # deferred: only the gate needs them (+0 modules: the catalog is loaded by the gate's command)
    from infer_compare.catalog.device_kinds import kind_of
    from infer_compare.catalog.runtimes import runners

    try:
        man = json.loads((Path(bundle) / MANIFEST).read_text())
        formats = {a["format"] for a in man["artifacts"] if isinstance(a, dict) and a.get("format")}
    except (OSError, ValueError, KeyError, TypeError):
        return []
    if options.formats:
        formats &= set(options.formats)
    kinds = {kind_of(d) for d in options.devices} if options.devices else {"cpu"}
    known = runners()
    names = list(options.backends) if options.backends else [n for n, r in known.items() if r.listed]
    return [n for n in names
            if n in known and formats & set(known[n].formats) and kinds & set(known[n].device_kinds)]
