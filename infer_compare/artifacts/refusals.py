"""A converter's refusal remembered beside the cache's entries (issue 38): the same file and converter versions
give the same refusal (``ExportRefused``: an op the converter has no converter for, a node torch.export stops
at), so a later run replays the reason instead of converting again (about 15 s of a 28 s cached run before).
``<cache root>/<kind>/<key>.refused.json``, the key being the artifact's own (``cache.key_of(parts)``).
Timeouts and crashes are not remembered; ``--no-cache`` (a disabled cache) neither reads nor writes."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from infer_compare.base.cache import Cache, key_of


def refusal(cache: Cache, kind: str, parts: dict[str, Any]) -> dict[str, Any] | None:
    """{"reason", "created"} of a refusal remembered for ``parts``; None."""
    if not cache.enabled:
        return None
    try:
        rec = json.loads((cache.root / kind / f"{key_of(parts)}.refused.json").read_text())
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and isinstance(rec.get("reason"), str) else None


def remember_refusal(cache: Cache, kind: str, parts: dict[str, Any], reason: str) -> None:
    """Keep the refusal for later runs; a cache that cannot be written just does not remember."""
    if not cache.enabled or cache.unwritable:
        return
    path = cache.root / kind / f"{key_of(parts)}.refused.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        tmp.write_text(json.dumps({"reason": reason, "parts": parts, "created": when}, default=str))
        os.replace(tmp, path)
    except OSError:
        pass
