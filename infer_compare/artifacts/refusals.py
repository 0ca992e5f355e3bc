"""A converter's refusal remembered beside the cache's entries (issue 38): the same file and converter
versions give the same refusal (``ExportRefused``: an op the converter has no converter for, a node
torch.export stops at), so a later run replays the reason instead of converting again (about 15 s of a 28 s
cached run before). ``<cache root>/<kind>/<key>.refused.json``, the key being the artifact's own
(``cache.key_of(parts)``). Timeouts and crashes are not remembered; ``--no-cache`` (a disabled cache) neither
reads nor writes."""

from __future__ import annotations

import time
from typing import Any

from infer_compare.base.cache import Cache, key_of
from infer_compare.base.cache_notes import read_note, write_note


def refusal(cache: Cache, kind: str, parts: dict[str, Any]) -> dict[str, Any] | None:
    """{"reason", "created"} of a refusal remembered for ``parts``; None."""
    rec = read_note(cache, cache.root / kind / f"{key_of(parts)}.refused.json")
    return rec if isinstance(rec, dict) and isinstance(rec.get("reason"), str) else None


def remember_refusal(cache: Cache, kind: str, parts: dict[str, Any], reason: str) -> None:
    """Keep the refusal for later runs; a cache that cannot be written just does not remember."""
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_note(cache, cache.root / kind / f"{key_of(parts)}.refused.json",
               {"reason": reason, "parts": parts, "created": when}, default=str)
