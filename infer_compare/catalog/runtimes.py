"""The runtimes: each ``backends/<runtime>/__init__.py`` declares a :class:`Runtime` (its runners with
name, ``"module:Class"``, device kinds, the formats it executes and its options class; the Python modules
it needs with their distributions and install hint). Those declarations import nothing heavy; the
runtime's own modules (``run.py``, ``export.py``, ``common.py``, ``options.py``) are imported only when
used, by their ``"module:Class"`` path (``load_impl``).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import lru_cache

BACKENDS = "infer_compare.backends"  # one sub-package per runtime, each declaring RUNTIME


@dataclass(frozen=True)
class RunnerInfo:
    name: str
    title: str
    impl: str  # "module:Class" of the Runner
    device_kinds: tuple[str, ...]  # keys of device_kinds.DEVICE_KINDS: "cpu", "cuda", "edgetpu"
    formats: tuple[str, ...]  # the formats it executes (formats.FORMATS keys)
    options: str = "infer_compare.catalog.options:NoOptions"  # "module:Class" of its Options dataclass
    description: str = ""
    listed: bool = True  # False: not part of a default comparison (the null runner)
    # modules a fork server imports once for all of this runner's configurations (measure/forkserver.py);
    # a name starting with "?" is imported only where it is installed
    preload: tuple[str, ...] = ()
    # how many of a configuration's first batch sizes load by CPU work before any GPU work that matters
    # (torch.compile: its first shape, then the recompile that makes the batch dynamic, are traced in Python):
    # on a GPU shared by two measuring processes (host/gpu_turn.py) those loads run while the other process
    # measures
    traced_loads: int = 0


@dataclass(frozen=True)
class Library:
    """A Python module a runtime needs: the distributions that provide it, the install hint."""

    module: str
    dists: tuple[str, ...]
    hint: str
    record_version: bool = True  # recorded in every report's environment


@dataclass(frozen=True)
class Runtime:
    name: str
    title: str
    order: int  # table order of its rows in reports
    runners: tuple[RunnerInfo, ...] = ()
    libraries: tuple[Library, ...] = ()
    extra: str = ""  # the pip extra of infer-compare that brings it
    notes: tuple[str, ...] = field(default_factory=tuple)


@lru_cache(maxsize=1)
def runtimes() -> tuple[Runtime, ...]:
    """Every runtime package under this folder, in table order."""
    found = []
    # found by name: the declarations import this module, never the other way round
    for m in pkgutil.iter_modules(importlib.import_module(BACKENDS).__path__):
        if not m.ispkg:
            continue
        mod = importlib.import_module(f"{BACKENDS}.{m.name}")
        rt = getattr(mod, "RUNTIME", None)
        if not isinstance(rt, Runtime):
            raise TypeError(f"{BACKENDS}.{m.name} declares no RUNTIME = Runtime(...)")
        found.append(rt)
    return tuple(sorted(found, key=lambda r: (r.order, r.name)))


@lru_cache(maxsize=1)
def runners() -> dict[str, RunnerInfo]:
    out: dict[str, RunnerInfo] = {}
    for rt in runtimes():
        for r in rt.runners:
            if r.name in out:
                raise TypeError(f"runner name {r.name!r} is declared twice")
            out[r.name] = r
    return out


@lru_cache(maxsize=1)
def libraries() -> dict[str, Library]:
    """Module name -> Library, over every runtime."""
    return {lib.module: lib for rt in runtimes() for lib in rt.libraries}


def load_impl(path: str):
    """Import ``"module:Class"`` lazily."""
    mod, _, attr = path.partition(":")
    return getattr(importlib.import_module(mod), attr)


def options_class(runner: str):
    """The Options dataclass that runner ``runner`` declares."""
    return load_impl(runners()[runner].options)
