"""A bundle on the wire, and what a node reads: each file is hashed once per node, against the manifest,
before anything is loaded (as ``infer-compare run`` does), from the archive's bytes as they are unpacked
(``unpack``) or from the driver's own bundle directory where the node sees it (``local_bundle``: a node on
the driver's host reads that directory, nothing is copied).

What each hash guards:

* the manifest's sha256, taken by the driver from the bytes it ships (``pack``) or read
  (``manifest_sha256``) and checked on the node: the node measures the manifest the driver sent and no other
  (not one altered on the way, nor another bundle at the same path on another machine);
* every file's sha256 in that manifest, checked on the node from the bytes it loads: a node refuses a bundle
  whose files do not match (corrupted, tampered with, or changed on the driver after its check).

The driver checks the bundle's structure and sizes before it connects (a fast failure), not its hashes: every
node does, and refuses a mismatch (a failed row naming the node)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

from infer_compare.bundle import BundleError, Verified, verify
from infer_compare.bundle.common import MANIFEST, MAX_MANIFEST_BYTES


def manifest_sha256(bundle_dir: str | os.PathLike) -> str:
    """The sha256 of a bundle's manifest.json as it is now (the driver's, for a node on its host)."""
    return hashlib.sha256(_manifest_bytes(Path(bundle_dir))).hexdigest()


def _manifest_bytes(root: Path) -> bytes:
    with open(root / MANIFEST, "rb") as f:
        data = f.read(MAX_MANIFEST_BYTES + 1)
    if len(data) > MAX_MANIFEST_BYTES:
        raise BundleError(f"bundle: {MANIFEST} is larger than {MAX_MANIFEST_BYTES >> 20} MiB; refused")
    return data


def pack(bundle_dir: str | os.PathLike) -> tuple[bytes, str]:
    """(tar bytes, the sha256 of the manifest they hold) of a bundle whose structure and sizes check here
    (its files are hashed on the node, ``unpack``)."""
    v = verify(bundle_dir, hashes=False)
    man = _manifest_bytes(v.root)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(man)
        tar.addfile(info, io.BytesIO(man))
        for rel in sorted(v.manifest["files"]):
            tar.add(str(v.path(rel)), arcname=rel, recursive=False)
    return buf.getvalue(), hashlib.sha256(man).hexdigest()


def unpack(data: bytes, sha256: str, dest: str | os.PathLike) -> Verified:
    """Extract plain files only (no link, no path leaving dest) into ``dest`` (a directory of this task's own,
    mode 700: nothing else writes there), hashing each from the archive's bytes as it is written: the
    manifest's against ``sha256`` (the one the driver sent), every other file's against the manifest, by
    ``verify`` (with the rest of its checks), without reading the files again. Raises BundleError."""
    try:
        digests = _extract(data, Path(dest))
    except tarfile.TarError as e:
        raise BundleError(f"bundle archive cannot be read ({e}); refused") from None
    return _check_shipped(digests, sha256, Path(dest))


def _extract(data: bytes, root: Path) -> dict[str, str]:
    """Write every member under ``root``; {name: sha256 of the bytes written}."""
    root.mkdir(parents=True, exist_ok=True)
    digests: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        for m in tar.getmembers():
            parts = m.name.split("/")
            if not m.isfile() or m.name.startswith("/") or any(p in ("", ".", "..") for p in parts) \
                    or m.name in digests:
                raise BundleError(f"bundle archive: member {m.name!r} is not a plain relative file; refused")
            src = tar.extractfile(m)
            if src is None:
                raise BundleError(f"bundle archive: {m.name!r} cannot be read")
            blob = src.read()
            digests[m.name] = hashlib.sha256(blob).hexdigest()
            out = root.joinpath(*parts)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(blob)
    return digests


def _check_shipped(digests: dict[str, str], sha256: str, root: Path) -> Verified:
    """The manifest the driver sent (its sha256), then ``verify`` with every file's hash taken as it was
    written, and no file outside the manifest's list."""
    if digests.get(MANIFEST) != sha256:
        got = digests.get(MANIFEST, "none")
        raise BundleError(f"bundle arrived with a manifest of sha256 {got[:16]}..., "
                          f"sent {sha256[:16]}...; refused")
    v = verify(root, digests=digests)
    extra = sorted(set(digests) - set(v.manifest["files"]) - {MANIFEST})
    if extra:
        raise BundleError(f"bundle archive: {extra[0]} is not in the manifest's file list; refused")
    return v


def local_bundle(path: str, sha256: str) -> Verified | None:
    """The driver's bundle directory ``path`` where this node sees it with the manifest the driver sent
    (``sha256``): verified here, every file hashed once against that manifest, as a local run does. None where
    the directory or that manifest is not here (another host): the driver ships the bundle then. Raises
    BundleError where the manifest is the driver's and a file does not match it."""
    try:
        man = _manifest_bytes(Path(path))
    except (OSError, BundleError):
        return None
    if hashlib.sha256(man).hexdigest() != sha256:
        return None
    v = verify(path)
    if v.manifest != json.loads(man):  # the manifest verified is the one whose hash was checked
        raise BundleError(f"bundle {path}: manifest.json changed while it was verified; refused")
    return v
