"""Content-keyed artifact cache with atomic writes.

``<root>/<kind>/<key>/`` where key = hash of everything that changes the artifact
(model id, weights hash, input shape and dtype, precision, options, exporter library
versions; for TensorRT the GPU name and compute capability). Each entry holds the
artifact files and a ``manifest.json`` with its provenance. Entries are built in a
temporary directory beside their final place and renamed into it, so an interrupted
export never leaves a half artifact that a later run trusts: an entry without its
manifest does not exist.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UsageError

MANIFEST = "manifest.json"


def default_root() -> Path:
    env = os.environ.get("INFER_COMPARE_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "infer-compare"


def key_of(parts: dict[str, Any]) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


@dataclass
class Entry:
    path: Path
    manifest: dict[str, Any]
    hit: bool

    def file(self, name: str) -> Path:
        return self.path / name


class Cache:
    def __init__(self, root: str | os.PathLike | None = None, enabled: bool = True):
        self.root = Path(root).expanduser() if root else default_root()
        self.enabled = enabled

    def _ensure_root(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"cannot create the cache directory {self.root}: {e.strerror}") from e
        if not os.access(self.root, os.W_OK):
            raise UsageError(f"cache directory {self.root} is not writable (set --cache-dir)")

    def lookup(self, kind: str, parts: dict[str, Any]) -> Entry | None:
        path = self.root / kind / key_of(parts)
        man = path / MANIFEST
        if not (self.enabled and man.is_file()):
            return None
        try:
            manifest = json.loads(man.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        return Entry(path, manifest, True)

    def get_or_build(
        self, kind: str, parts: dict[str, Any], build: Callable[[Path], dict[str, Any]]
    ) -> Entry:
        """Return the entry for ``parts``; build it with ``build(tmpdir) -> manifest`` if absent.

        ``build`` writes its files into ``tmpdir`` and returns manifest fields; the
        manifest gets ``key``, ``parts``, ``build_s`` and ``created`` added.
        """
        found = self.lookup(kind, parts)
        if found is not None:
            return found
        self._ensure_root()
        key = key_of(parts)
        parent = self.root / kind
        parent.mkdir(parents=True, exist_ok=True)
        final = parent / key
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=parent))
        try:
            t0 = time.perf_counter()
            fields = build(tmp) or {}
            manifest = {
                **fields,
                "key": key,
                "kind": kind,
                "parts": parts,
                "build_s": round(time.perf_counter() - t0, 3),
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str))
            if final.exists():  # a stale entry without manifest, or a concurrent build
                if (final / MANIFEST).is_file() and self.enabled:
                    shutil.rmtree(tmp, ignore_errors=True)
                    return Entry(final, json.loads((final / MANIFEST).read_text()), True)
                shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return Entry(final, manifest, False)
