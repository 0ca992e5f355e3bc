"""Verifying a bundle before anything in it is loaded: the manifest, every file's size
and sha256, no path that leaves the bundle, no unlisted file anywhere in its folder.

A bundle is data, never code: its model spec names only what the installed tool knows (a built-in
architecture, or a user's model whose root travels as an ONNX, TFLite or ExportedProgram file), never a
module, a factory, a path or a loader (manifest_schema.MODEL_SPEC_KEYS); its files lie under
``artifacts/`` and ``data/`` only; its PyTorch files are weights-only archives (bundle/torchfile.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infer_compare.base.known_fields import report_fields
from infer_compare.base.records import SCENARIOS, STATUSES, ModelInfo
from infer_compare.base.schema import check_type, read_json, validate
from infer_compare.base.version import __version__
from infer_compare.bundle.common import (
    BUNDLE_KIND,
    BUNDLE_VERSION,
    MANIFEST,
    MAX_MANIFEST_BYTES,
    BundleError,
    sha256_file,
)
from infer_compare.bundle.manifest_schema import MODEL_SPEC_KEYS, USER_KINDS, Manifest
from infer_compare.bundle.torchfile import check_weights_only
from infer_compare.catalog.formats import FORMATS, PRECISIONS


@dataclass
class Verified:
    root: Path
    manifest: dict[str, Any]
    n_files: int
    n_bytes: int
    # deferred key -> its drop-in file, present
    placed: dict[tuple[str, str], str] = field(default_factory=dict)
    hashed: bool = True  # every file's sha256 checked (False: sizes only, verify(hashes=False))

    def path(self, rel: str) -> Path:
        return self.root / rel


def _check_rel(root: Path, rel: Any, what: str) -> Path:
    """A manifest path: relative, no '..', no symbolic link on the way, inside the bundle."""
    if not isinstance(rel, str) or not rel or len(rel) > 1024 or "\x00" in rel:
        raise BundleError(f"bundle manifest: bad path for {what}: {rel!r}")
    if rel.startswith(("/", "\\")) or "\\" in rel or (len(rel) > 1 and rel[1] == ":"):
        raise BundleError(f"bundle manifest: {what} path {rel!r} is absolute; refused")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise BundleError(f"bundle manifest: {what} path {rel!r} leaves the bundle or is not normalised; "
                          "refused")
    cur = root
    for p in parts:
        cur = cur / p
        if cur.is_symlink():
            raise BundleError(f"bundle: {rel} is (or passes through) a symbolic link; bundles hold plain "
                              "files only")
    real_root = os.path.realpath(root)
    real = os.path.realpath(cur)
    if os.path.commonpath([real_root, real]) != real_root:
        raise BundleError(f"bundle: {rel} resolves outside the bundle; refused")
    if not cur.is_file():
        raise BundleError(f"bundle: {what} {rel} is missing (or not a regular file)")
    return cur


def _read_manifest(root: Path) -> dict[str, Any]:
    if not root.is_dir():
        raise BundleError(f"bundle directory not found: {root}")
    mpath = root / MANIFEST
    if mpath.is_symlink():
        raise BundleError(f"bundle: {MANIFEST} is a symbolic link; refused")
    if not mpath.is_file():
        raise BundleError(f"{root} is not an infer-compare bundle (no {MANIFEST})")
    if mpath.stat().st_size > MAX_MANIFEST_BYTES:
        raise BundleError(f"bundle: {MANIFEST} is larger than {MAX_MANIFEST_BYTES >> 20} MiB; refused")
    man = read_json(mpath, what="bundle manifest", max_bytes=MAX_MANIFEST_BYTES, error=BundleError)
    if not isinstance(man, dict) or man.get("kind") != BUNDLE_KIND:
        raise BundleError(f"bundle: {MANIFEST} is not an infer-compare bundle manifest")
    v = man.get("bundle_version")
    if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= BUNDLE_VERSION:
        raise BundleError(f"bundle version {v!r} is not readable by infer-compare {__version__} (reads 1.."
                          f"{BUNDLE_VERSION}; upgrade infer-compare)")
    where = f"bundle {mpath}"
    check_model_spec(man.get("model_spec"))
    check_type(Manifest, man, where=where, error=BundleError)
    validate(ModelInfo, man["model"], where=f"{where}: model", fields=report_fields(STATUSES, SCENARIOS),
             error=BundleError)
    return man


CODE_HINT = "a bundle carries data, never code; export it again with this version of infer-compare"
TOP_DIRS = ("artifacts", "data")


def check_model_spec(spec: Any) -> None:
    """The manifest's model spec names only what the installed tool knows: BundleError (one line) for a
    key beyond MODEL_SPEC_KEYS (a module, a factory, a path, a loader), an unknown family or kind."""
    if not isinstance(spec, dict):
        return  # the schema check says what is wrong
    extra = sorted(str(k) for k in spec if k not in MODEL_SPEC_KEYS)
    if extra:
        raise BundleError(f"bundle manifest: model_spec names {extra[0]!r} ({str(spec[extra[0]])[:80]!r}): "
                          f"{CODE_HINT}; refused")
    family, kind, name = spec.get("family"), spec.get("kind"), spec.get("name")
    if family == "user" and kind not in USER_KINDS:
        raise BundleError(f"bundle manifest: model_spec kind {kind!r} is not data a bundle may carry (only "
                          f"{', '.join(USER_KINDS)}): {CODE_HINT}; refused")
    if family == "lenet" and name != "lenet5" or family == "torchvision" and not (
            isinstance(name, str) and name.isidentifier() and name.islower()):
        raise BundleError(f"bundle manifest: model_spec names {family} model {name!r}, not one this tool "
                          "builds; refused")


def _check_torch_files(root: Path, man: dict[str, Any]) -> None:
    """PyTorch artifacts: a built-in model's state dict or a user's ExportedProgram, weights-only."""
    spec = man["model_spec"]
    for a in man.get("artifacts", []):
        if a["format"] != "pytorch":
            continue
        family, kind = spec.get("family"), spec.get("kind")
        if family not in ("lenet", "torchvision") and (family, kind) != ("user", "exported_program"):
            raise BundleError(f"bundle manifest: a pytorch artifact for a {family or 'model of no family'} "
                              f"{kind or ''} model: only a built-in model's or an ExportedProgram; refused")
        check_weights_only(root / a["path"], a["path"])


def _check_structure(man: dict[str, Any]) -> None:
    """The manifest's sections, and only known formats and precisions."""
    files = man.get("files")
    if not isinstance(files, dict) or not files:
        raise BundleError("bundle manifest: no file list")
    for key in ("model", "model_spec", "input", "data"):
        if not isinstance(man.get(key), dict):
            raise BundleError(f"bundle manifest: '{key}' is missing or not an object")
    for key in ("artifacts", "deferred"):
        if not isinstance(man.get(key, []), list):
            raise BundleError(f"bundle manifest: '{key}' is not a list")
    for a in list(man.get("artifacts", [])) + list(man.get("deferred", [])):
        if not isinstance(a, dict):
            raise BundleError("bundle manifest: an artifact entry is not an object")
        fmt, prec = a.get("format"), a.get("precision")
        if fmt not in FORMATS:
            raise BundleError(f"bundle manifest: unknown format {fmt!r} (known: {', '.join(FORMATS)})")
        known = FORMATS[fmt].artifact_precisions | set(PRECISIONS)
        if prec not in known:
            raise BundleError(f"bundle manifest: unknown precision {prec!r} for {fmt} "
                              f"(known: {', '.join(sorted(known))})")
        src = a.get("source")
        if src is not None and (not isinstance(src, list) or len(src) != 2 or src[0] not in FORMATS
                                or src[1] not in FORMATS[src[0]].artifact_precisions | set(PRECISIONS)):
            raise BundleError(f"bundle manifest: bad source {src!r} for {fmt} {prec}")


def _check_files(root: Path, files: dict[str, Any], digests: Mapping[str, str] | None = None,
                 hashes: bool = True) -> int:
    """Every listed file: a plain file inside the bundle, of the recorded size and hash. Total bytes.
    ``digests``: rel -> sha256 the caller computed from the very bytes it wrote to this file (fleet/pack.py
    unpacks into a private directory), compared instead of reading the file again. ``hashes=False``: sizes
    only (the fleet driver's early check; every node hashes the files before loading them)."""
    n_bytes = 0
    digests = digests or {}
    for rel, meta in files.items():
        p = _check_rel(root, rel, "file")
        if rel.split("/", 1)[0] not in TOP_DIRS or "/" not in rel:
            raise BundleError(f"bundle manifest: file {rel} lies outside artifacts/ and data/; refused")
        if (not isinstance(meta, dict) or not isinstance(meta.get("sha256"), str)
                or not isinstance(meta.get("size"), int)):
            raise BundleError(f"bundle manifest: no sha256/size for {rel}")
        size = p.stat().st_size
        if size != meta["size"]:
            raise BundleError(f"bundle: {rel} has {size} bytes, the manifest says {meta['size']}: refused "
                              "(corrupted or tampered)")
        got = digests[rel] if rel in digests else (sha256_file(p) if hashes else None)
        if got is not None and got != meta["sha256"].lower():
            raise BundleError(f"bundle: sha256 of {rel} does not match the manifest: refused "
                              "(corrupted or tampered)")
        n_bytes += size
    return n_bytes


def _drop_ins(root: Path, man: dict[str, Any]) -> tuple[dict[tuple[str, str], str], set[str]]:
    """Deferred formats built off the bundle (the Edge TPU compile on an x86-64 host) and placed at their
    ``drop_in`` path: {key: path} of those present, and the paths allowed outside the file list (the
    model and the compiler's log beside it)."""
    placed, allowed = {}, set()
    for d in man.get("deferred", []):
        rel = d.get("drop_in")
        if rel is None:
            continue
        suffix = FORMATS[d["format"]].suffix
        if (not isinstance(rel, str) or not rel.startswith("artifacts/") or not rel.endswith(suffix)
                or rel in man["files"]):
            raise BundleError(f"bundle manifest: bad drop_in path {rel!r} for {d['format']} {d['precision']}")
        log = rel[: -len(suffix)] + suffix.rsplit(".", 1)[0] + ".log"
        allowed |= {rel, log}
        if (root / rel).exists() or (root / rel).is_symlink():
            _check_rel(root, rel, f"{d['format']} {d['precision']} drop-in")
            placed[(d["format"], d["precision"])] = rel
    return placed, allowed


def _check_unlisted(root: Path, files: dict[str, Any], allowed: set[str]) -> None:
    """Nothing in the bundle's folder but the manifest, its listed files and the drop-ins of ``allowed``:
    anything else (a ``.py`` beside the manifest, a link, a socket) is refused, named."""
    for sub in TOP_DIRS:
        if (root / sub).is_symlink():
            raise BundleError(f"bundle: {sub}/ is a symbolic link; refused")
    for dirpath, dirnames, filenames in os.walk(root):
        links = sorted(d for d in dirnames if os.path.islink(os.path.join(dirpath, d)))
        for name in sorted(filenames) + links:
            p = Path(dirpath, name)
            rel = p.relative_to(root).as_posix()
            if rel == MANIFEST:
                continue
            if p.is_symlink() or not p.is_file() or (rel not in files and rel not in allowed):
                raise BundleError(f"bundle: {rel} is not in the manifest's file list; refused (a bundle "
                                  "holds its listed files only)")


def _check_references(root: Path, man: dict[str, Any], allowed: set[str] = frozenset()) -> None:
    """Paths referenced elsewhere are listed; nothing unlisted lies under artifacts/ or data/ (but the
    drop-in files of ``allowed``)."""
    files = man["files"]
    refs = [(a.get("path"), f"{a.get('format')} {a.get('precision')} artifact")
            for a in man.get("artifacts", [])]
    refs += [(d.get("path") if isinstance(d, dict) else None, f"data '{k}'")
             for k, d in man["data"].items() if k != "description"]
    for rel, what in refs:
        _check_rel(root, rel, what)
        if rel not in files:
            raise BundleError(f"bundle manifest: {what} {rel!r} has no hash in the file list; refused")
    _check_unlisted(root, files, allowed)
    for k in ("eval", "reference"):
        if k not in man["data"]:
            raise BundleError(f"bundle manifest: data '{k}' is missing")


def verify(bundle_dir: str | os.PathLike, *, digests: Mapping[str, str] | None = None,
           hashes: bool = True) -> Verified:
    """Check the manifest and every file's size and sha256 before anything is loaded.
    Raises BundleError (exit 2) with one line saying what is wrong. ``digests`` and ``hashes``: see
    ``_check_files`` (both for the fleet, which hashes each file once per node)."""
    root = Path(bundle_dir)
    man = _read_manifest(root)
    _check_structure(man)
    n_bytes = _check_files(root, man["files"], digests, hashes)
    placed, allowed = _drop_ins(root, man)
    _check_references(root, man, allowed)
    _check_torch_files(root, man)
    return Verified(root, man, len(man["files"]), n_bytes, placed, hashed=hashes)
