"""A bundle on the wire: one tar archive in Ray's object store, its sha256 checked on arrival,
then every file checked again by ``bundle.verify`` (as ``infer-compare run`` does)."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path

from infer_compare.bundle import BundleError, verify


def pack(bundle_dir: str | os.PathLike) -> tuple[bytes, str]:
    """(tar bytes, their sha256) of a bundle that verifies here first."""
    v = verify(bundle_dir)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel in ["manifest.json", *sorted(v.manifest["files"])]:
            tar.add(str(v.path(rel)), arcname=rel, recursive=False)
    data = buf.getvalue()
    return data, hashlib.sha256(data).hexdigest()


def unpack(data: bytes, sha256: str, dest: str | os.PathLike) -> Path:
    """Check the archive's hash, extract plain files only (no link, no path leaving dest), then
    verify the bundle's manifest and every file's sha256. Raises BundleError."""
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise BundleError(f"bundle arrived with sha256 {got[:16]}..., sent {sha256[:16]}...; refused")
    root = Path(dest)
    root.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        for m in tar.getmembers():
            parts = m.name.split("/")
            if not m.isfile() or m.name.startswith("/") or any(p in ("", ".", "..") for p in parts):
                raise BundleError(f"bundle archive: member {m.name!r} is not a plain relative file; refused")
            out = root.joinpath(*parts)
            out.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(m)
            if src is None:
                raise BundleError(f"bundle archive: {m.name!r} cannot be read")
            out.write_bytes(src.read())
    verify(root)
    return root
