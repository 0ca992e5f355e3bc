"""Bytecode for installations that keep none.

Python compiles each imported source file to bytecode and caches it next to the source
(``__pycache__``). Where that cache is missing and cannot be written (containers set
``PYTHONDONTWRITEBYTECODE=1``; read-only site-packages), every process compiles every
imported file again: on the lent H100 machine ``import torch, torchvision`` took 9.1 s
that way and 2.2 s with bytecode, and ``torch._inductor`` 2.9 s against 1.0 s. A
comparison starts a process per configuration, so the tool keeps the bytecode under its
own cache directory instead (``PYTHONPYCACHEPREFIX``, Python >= 3.8): nothing is written
next to the installation, the user's choice not to litter it holds.

``INFER_COMPARE_PYCACHE=0`` turns this off; ``--no-cache`` does too; a prefix the user set
(``PYTHONPYCACHEPREFIX``) is kept as it is.
"""

from __future__ import annotations

import importlib.util
import os
import sys

OFF_ENV = "INFER_COMPARE_PYCACHE"
PROBES = ("torch", "numpy")  # the first one installed tells whether the installation has bytecode


def _probe_pyc(modules: tuple[str, ...]) -> tuple[str, str] | None:
    """(source, its would-be .pyc next to it) of the first installed module of ``modules``."""
    for name in modules:
        try:
            spec = importlib.util.find_spec(name.lstrip("?"))
        except (ImportError, ValueError):
            continue
        origin = spec.origin if spec is not None else None
        if not origin or not origin.endswith(".py"):
            continue
        try:
            return origin, importlib.util.cache_from_source(origin)
        except (ValueError, NotImplementedError):
            return None
    return None


def needs_prefix(modules: tuple[str, ...] = PROBES) -> bool:
    """True when the installation of ``modules`` has no bytecode next to its sources and Python will not
    write it there (bytecode writing off, or the folder read-only)."""
    if sys.pycache_prefix or os.environ.get(OFF_ENV, "1").lower() in ("0", "false", "no"):
        return False
    probe = _probe_pyc(modules)
    if probe is None:
        return False
    src, pyc = probe
    if os.path.exists(pyc):
        return False
    return bool(sys.flags.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE")) \
        or not os.access(os.path.dirname(src), os.W_OK)


def prefix_env(cache_root: str, modules: tuple[str, ...] = PROBES) -> dict[str, str]:
    """The environment that makes a child process keep its bytecode under ``cache_root``; {} when the
    installation has its own (or the user set a prefix, or turned this off)."""
    if not cache_root or not needs_prefix(modules):
        return {}
    return {"PYTHONPYCACHEPREFIX": os.path.join(cache_root, "pycache"), "PYTHONDONTWRITEBYTECODE": ""}


def keep_bytecode(cache_root: str, modules: tuple[str, ...] = PROBES) -> str | None:
    """For the CLI, before its heavy imports: this process and every child it starts read and write
    bytecode under ``cache_root/pycache`` where the installation keeps none; the folder, or None."""
    env = prefix_env(cache_root, modules)
    if not env:
        return None
    prefix = env["PYTHONPYCACHEPREFIX"]
    try:
        os.makedirs(prefix, exist_ok=True)
    except OSError:
        return None
    os.environ.update(env)  # the children: fresh interpreters and the fork servers
    sys.pycache_prefix = prefix  # this process: read at each import
    sys.dont_write_bytecode = False
    return prefix
