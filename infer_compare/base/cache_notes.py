"""Small JSON files kept beside the cache's entries: what a later run may reuse but need not trust as an
artifact (a converter's refusal, artifacts/refusals.py; each GPU configuration's seconds, measure/balance.py).
Read and written only where the cache is enabled (``--no-cache``: neither); written atomically (a temporary
file, then renamed, so that two runs at once never leave half a file); a file that cannot be read is none, one
that cannot be written is not kept: neither is an error."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from infer_compare.base.cache import Cache


def read_note(cache: Cache | None, path: Path) -> Any:
    """The JSON at ``path`` (under ``cache.root``), or None: no cache, no file, not JSON."""
    if cache is None or not cache.enabled:
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_note(cache: Cache | None, path: Path, obj: Any, **dumps: Any) -> None:
    """``obj`` as JSON into ``path`` (under ``cache.root``), atomically; nothing where the cache is off or
    cannot be written. ``dumps``: json.dumps's options."""
    if cache is None or not cache.enabled or cache.unwritable:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(obj, **dumps))
        os.replace(tmp, path)
    except OSError:
        pass
