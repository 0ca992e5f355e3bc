"""What the bundle modules share: the manifest's kind and version, the error type,
the file hash."""

from __future__ import annotations

import hashlib
import os

from infer_compare.base.errors import UsageError

BUNDLE_KIND = "infer-compare-bundle"
BUNDLE_VERSION = 1
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 16 * 2**20
DEFAULT_MAX_BATCH = 256  # the largest default batch on any device kind (CUDA: 1, 32, 256)


class BundleError(UsageError):
    """A bundle that cannot be trusted or read: exit status 2, one line."""


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()
