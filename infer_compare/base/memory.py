"""The memory available to this process, in one place: the least of the host's available memory and what
the process's cgroup still allows (cgroup v2 ``memory.max`` less ``memory.current``; cgroup v1
``memory.limit_in_bytes`` less ``memory.usage_in_bytes``; the reclaimable file cache of either counted as
free, as ``docker stats`` does), for every level from the process's own cgroup up to the root.

``INFER_COMPARE_MEMORY_LIMIT`` (bytes, or with a K/M/G/T suffix: binary units) lowers it further: a cap
for a shared host, or a test's. Readers of files from elsewhere (base/npyfile.py) refuse arrays that
pass it before allocating anything.
"""

from __future__ import annotations

import os
import re

ENV_LIMIT = "INFER_COMPARE_MEMORY_LIMIT"
CGROUP_ROOT = "/sys/fs/cgroup"  # where the cgroup file systems are mounted (tests point it elsewhere)
PROC_CGROUP = "/proc/self/cgroup"
UNLIMITED_V1 = 1 << 62  # cgroup v1 writes "no limit" as the largest page-aligned 64-bit number (~2^63)
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_limit(text: str) -> int | None:
    """A cgroup memory limit file's content in bytes; None for no limit ("max", v1's ~2^63) or no number."""
    s = text.strip()
    if not s or s == "max":
        return None
    try:
        n = int(s)
    except ValueError:
        return None
    return None if n < 0 or n >= UNLIMITED_V1 else n


def parse_size(text: str) -> int:
    """"8G", "512M", "1048576" -> bytes (binary units); ValueError otherwise."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a size (a number of bytes, or with K, M, G or T)")
    return int(m.group(1)) << (10 * " kmgt".index((m.group(2) or " ").lower()))


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read(1 << 16)  # memory.stat runs to a few KiB
    except OSError:
        return None


def _stat_value(text: str | None, key: str) -> int:
    for line in (text or "").splitlines():
        k, _, v = line.partition(" ")
        if k == key and v.strip().isdigit():
            return int(v)
    return 0


def _levels(path: str) -> list[str]:
    """'/a/b' -> ['/a/b', '/a', '/']: the cgroup and each ancestor (a parent's limit binds the child too)."""
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[:i]) for i in range(len(parts), -1, -1)]


def _left(base: str, limit_name: str, usage_name: str, inactive_key: str) -> int | None:
    limit = parse_limit(_read(os.path.join(base, limit_name)) or "")
    if limit is None:
        return None
    used = parse_limit(_read(os.path.join(base, usage_name)) or "") or 0
    reclaimable = _stat_value(_read(os.path.join(base, "memory.stat")), inactive_key)
    return max(0, limit - max(0, used - reclaimable))


def cgroup_available() -> int | None:
    """Bytes the process's cgroups still allow (the tightest level); None where no limit is set or read."""
    found: list[int] = []
    for line in (_read(PROC_CGROUP) or "").splitlines():
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hid == "0" and controllers == "":  # cgroup v2: the unified hierarchy
            for level in _levels(path):
                got = _left(CGROUP_ROOT + level.rstrip("/"), "memory.max", "memory.current", "inactive_file")
                found += [] if got is None else [got]
        elif "memory" in controllers.split(","):  # cgroup v1: the memory controller's hierarchy
            for level in _levels(path):
                got = _left(os.path.join(CGROUP_ROOT, "memory") + level.rstrip("/"), "memory.limit_in_bytes",
                            "memory.usage_in_bytes", "total_inactive_file")
                found += [] if got is None else [got]
    if not found and _read(PROC_CGROUP) is None:  # no /proc: the mount's top level, as a container sees it
        got = _left(CGROUP_ROOT, "memory.max", "memory.current", "inactive_file")
        found += [] if got is None else [got]
    return min(found) if found else None


def host_available() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


def available() -> int:
    """The memory this process can still take, in bytes: the least of the host's available memory, its
    cgroups' room and ``INFER_COMPARE_MEMORY_LIMIT``. A malformed variable is a ValueError (one line)."""
    out = host_available()
    cg = cgroup_available()
    if cg is not None:
        out = min(out, cg)
    env = os.environ.get(ENV_LIMIT, "").strip()
    if env:
        try:
            out = min(out, parse_size(env))
        except ValueError as e:
            raise ValueError(f"{ENV_LIMIT}: {e}") from None
    return out


def describe(n_bytes: int) -> str:
    """The memory available, in words: '3.2 GiB available (cgroup limit)'."""
    cg, env = cgroup_available(), os.environ.get(ENV_LIMIT, "").strip()
    where = ""
    if env and n_bytes <= parse_size(env):
        where = f" ({ENV_LIMIT}={env})"
    elif cg is not None and n_bytes <= cg:
        where = " (the cgroup's memory limit)"
    return f"{n_bytes / 2**30:.2f} GiB available{where}"
