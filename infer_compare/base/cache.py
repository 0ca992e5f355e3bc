"""Content-keyed artifact cache: atomic, verified, safe to share between runs.

``<root>/<kind>/<key>/`` where key = hash of everything that changes the artifact (model id, weights hash,
input shape and dtype, precision, options, exporter library versions; for TensorRT the GPU name and compute
capability). Each entry holds the artifact files and a ``manifest.json`` with its provenance. Kinds are
formats (``onnx``, ``openvino``...) and the run's own data (``weights``, ``reference``...); all are treated
alike.

Integrity: the manifest records size, sha256 and mtime of every file of the entry (``manifest["files"]``). A
lookup stats each file and hashes it in full when its size or mtime differs from the record, when it is
smaller than ``FULL_HASH_BELOW`` bytes (reference outputs, small models), or always with ``verify="full"``. An
entry that fails is never trusted: the reason goes to ``warn`` in one line, the entry is rebuilt, and
``Entry.rebuilt_because`` says why.

Atomicity and concurrency: a build writes into a temporary directory beside its final place, then renames it
into place in one step, so an interrupted export never leaves a half artifact that a later run trusts.
Builders of one entry take a per-entry lock (``filelock``, when installed); without it two runs may both
build, and the one that loses the rename uses the winner's verified entry and discards its own. A good entry
is never deleted; a stale or corrupt one is renamed aside before it is replaced (a run holding its path then
sees the new entry, and files already open stay readable).

Private builds: ``Cache(enabled=False)`` (``--no-cache``) neither reads nor writes the cache: it builds into a
private temporary directory that lives until ``close()`` (or until the Cache is garbage-collected). A cache
directory that cannot be written (read-only, full, not a directory) gives one warning, and the run goes on the
same way: entries already there are still used, new ones are built privately.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import stat
import tempfile
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infer_compare.base import diskfull
from infer_compare.base.errors import DiskFullError

MANIFEST = "manifest.json"
FULL_HASH_BELOW = 1 << 20  # files smaller than this are hashed on every lookup
_CHUNK = 1 << 20
_log = logging.getLogger(__name__)


def default_root() -> Path:
    env = os.environ.get("INFER_COMPARE_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "infer-compare"


def key_of(parts: dict[str, Any]) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def describe_files(root: Path) -> dict[str, dict[str, Any]]:
    """``{relative path: {size, sha256, mtime_ns}}`` of every file under ``root`` but its manifest."""
    out: dict[str, dict[str, Any]] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if rel == MANIFEST or not p.is_file():
            continue
        digest = sha256_file(p)
        st = p.stat()
        out[rel] = {"size": st.st_size, "sha256": digest, "mtime_ns": st.st_mtime_ns}
    return out


def verify_files(root: Path, manifest: dict[str, Any], full: bool = False) -> str:
    """``""`` when every file the manifest records is present and unchanged, else the first problem."""
    files = manifest.get("files")
    if not isinstance(files, dict):
        return "its manifest records no file hashes (written by an older infer-compare)"
    main = manifest.get("file")
    if isinstance(main, str) and (os.path.isabs(main)
                                  or os.path.normpath(main).split(os.sep)[0] == os.pardir):
        return (f"its main file {main} lies outside the entry (written through a symbolic link by an older "
                "infer-compare)")
    for rel, rec in files.items():
        p = root / rel
        try:
            st = p.stat()
        except FileNotFoundError:
            return f"{rel} is missing"
        except OSError as e:
            return f"{rel} cannot be read ({e.strerror or e})"
        if not stat.S_ISREG(st.st_mode):
            return f"{rel} is not a regular file"
        if st.st_size != rec.get("size"):
            return f"{rel} has {st.st_size} bytes, its manifest says {rec.get('size')}"
        if full or st.st_size < FULL_HASH_BELOW or st.st_mtime_ns != rec.get("mtime_ns"):
            try:
                digest = sha256_file(p)
            except OSError as e:
                return f"{rel} cannot be read ({e.strerror or e})"
            if digest != rec.get("sha256"):
                return f"{rel} does not match the sha256 in its manifest"
    return ""


@dataclass
class Entry:
    path: Path
    manifest: dict[str, Any]
    hit: bool  # built earlier (or by a concurrent run) and reused, not built by this call
    # why the entry that was there was not trusted; "" if none was there or it was fine
    rebuilt_because: str = ""
    # built outside the shared cache (--no-cache, unwritable cache): lives until Cache.close()
    private: bool = False

    def file(self, name: str) -> Path:
        return self.path / name


def read_entry(path: Path, full: bool = False) -> tuple[Entry | None, str]:
    """(the verified entry at ``path`` or None, why an existing one is not trusted; "" when there is none)."""
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (FileNotFoundError, NotADirectoryError):
        return None, ("the entry has no manifest (an interrupted or foreign write)" if path.is_dir() else "")
    except (OSError, ValueError) as e:
        return None, f"its manifest cannot be read ({getattr(e, 'strerror', None) or e})"
    if not isinstance(manifest, dict):
        return None, "its manifest is not a JSON object"
    why = verify_files(path, manifest, full)
    return (None, why) if why else (Entry(path, manifest, True), "")


def entry_dir(path: str | os.PathLike) -> Path | None:
    """The entry directory (shared or private) that holds the file ``path``: its nearest parent with a
    manifest."""
    for d in Path(path).parents:
        if (d / MANIFEST).is_file():
            return d
    return None


class _Unwritable(Exception):
    def __init__(self, path: Path, err: OSError):
        super().__init__(f"{path}: {err.strerror or err}")


class _LockTimeout(Exception):
    pass


def _build_into(d: Path, kind: str, key: str, parts: dict[str, Any], build: Callable[[Path], dict]) -> dict:
    t0 = time.perf_counter()
    fields = build(d) or {}
    manifest = {**fields, "key": key, "kind": kind, "parts": parts,
                "build_s": round(time.perf_counter() - t0, 3),
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "files": describe_files(d)}
    (d / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str))
    return manifest


def _set_aside(final: Path) -> None:
    """Move a stale or corrupt entry out of the way and delete it. A good entry that a
    concurrent run installed in the meantime is put back instead."""
    trash = final.with_name(f".trash-{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(final, trash)
    except FileNotFoundError:
        return
    if read_entry(trash, full=True)[0] is not None:
        with contextlib.suppress(OSError):
            os.rename(trash, final)
            return
    shutil.rmtree(trash, ignore_errors=True)


def _remove_all(paths: list[str], owner_pid: int) -> None:
    if os.getpid() != owner_pid:  # a forked child must not remove its parent's private builds
        return
    for p in paths:
        shutil.rmtree(p, ignore_errors=True)
    paths.clear()


class Cache:
    """The artifact cache at ``root`` (default :func:`default_root`).

    enabled: False (``--no-cache``) builds every entry privately and never touches the cache.
    verify: ``"auto"`` (stat every file; hash it when its size or mtime changed or it is small)
        or ``"full"`` (hash every file on every lookup).
    warn: called with one line per problem: an entry not trusted and rebuilt (with why), a cache
        directory that cannot be written, a lock held too long. Default: this module's logger.
        Every such line is also kept in ``messages``.
    log: called with progress lines (waiting for another run's build). Default: logger.info.
    lock_timeout_s: how long to wait for another run that builds the same entry before
        building it privately.
    locking: take a per-entry lock (needs ``filelock``; without it builds race safely).
    """

    def __init__(self, root: str | os.PathLike | None = None, enabled: bool = True, *, verify: str = "auto",
                 warn: Callable[[str], None] | None = None, log: Callable[[str], None] | None = None,
                 lock_timeout_s: float = 3600.0, locking: bool = True):
        if verify not in ("auto", "full"):
            raise ValueError(f"verify must be 'auto' or 'full', not {verify!r}")
        self.root = Path(root).expanduser() if root else default_root()
        self.enabled = enabled
        self.verify = verify
        self.warn = warn or _log.warning
        self.log = log or _log.info
        self.lock_timeout_s = lock_timeout_s
        self.locking = locking and importlib.util.find_spec("filelock") is not None
        self.messages: list[str] = []
        self.unwritable = ""  # why the cache cannot be written, once found out; then builds are private
        self._scratch: list[str] = []  # private builds, removed by close()
        self._private: dict[tuple[str, str], Entry] = {}
        self._private_root: Path | None = None
        self._finalizer = weakref.finalize(self, _remove_all, self._scratch, os.getpid())

    def close(self) -> None:
        """Remove this Cache's private builds (the shared cache is left as it is)."""
        self._finalizer()
        self._private.clear()
        self._private_root = None
        self._finalizer = weakref.finalize(self, _remove_all, self._scratch, os.getpid())

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _say(self, msg: str) -> None:
        self.messages.append(msg)
        self.warn(msg)

    def check(self, kind: str, parts: dict[str, Any]) -> tuple[Entry | None, str]:
        """(the verified entry or None, why an existing entry is not trusted; "" when absent or fine)."""
        if not self.enabled:
            return None, ""
        return read_entry(self.root / kind / key_of(parts), self.verify == "full")

    def lookup(self, kind: str, parts: dict[str, Any]) -> Entry | None:
        return self.check(kind, parts)[0]

    def get_or_build(self, kind: str, parts: dict[str, Any],
                     build: Callable[[Path], dict[str, Any]]) -> Entry:
        """Return the verified entry for ``parts``; build it with ``build(dir) -> manifest fields`` if absent,
        changed on disk, or when the cache is off.

        ``build`` writes its files into ``dir`` and returns manifest fields; the manifest gets
        ``key``, ``kind``, ``parts``, ``build_s``, ``created`` and ``files`` (size, sha256, mtime of
        each file) added. An entry that failed verification is reported through ``warn`` and rebuilt
        (``Entry.rebuilt_because``); a build that cannot be stored is private (``Entry.private``).
        Exceptions of ``build`` propagate, and nothing of the failed build is left behind.
        """
        key = key_of(parts)
        if not self.enabled:
            return self._private_build(kind, key, parts, build, "")
        found, why = self.check(kind, parts)
        if found is not None:
            return found
        if why:
            self._say(f"cache entry {kind}/{key} is not trusted: {why}; rebuilding it")
        if self.unwritable:
            return self._private_build(kind, key, parts, build, why)
        try:
            with self._lock(kind, key):
                found, why_now = self.check(kind, parts)  # another run may have built it while we waited
                if found is not None:
                    found.rebuilt_because = why
                    return found
                return self._shared_build(kind, key, parts, build, why or why_now)
        except _Unwritable as e:
            self._give_up_sharing(str(e))
        except _LockTimeout:
            self._say(f"another run has been building cache entry {kind}/{key} for over "
                      f"{self.lock_timeout_s:.0f} s; building it privately")
        return self._private_build(kind, key, parts, build, why)

    @contextlib.contextmanager
    def _lock(self, kind: str, key: str) -> Iterator[None]:
        parent = self.root / kind
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise _Unwritable(parent, e) from e
        if not self.locking:
            yield
            return
        from filelock import FileLock, Timeout

        lock = FileLock(str(parent / f".{key}.lock"), timeout=self.lock_timeout_s)
        try:
            try:
                lock.acquire(timeout=0)
            except Timeout:
                self.log(f"waiting for another run that is building cache entry {kind}/{key}")
                lock.acquire()
        except Timeout as e:
            raise _LockTimeout() from e
        except OSError as e:
            raise _Unwritable(parent / f".{key}.lock", e) from e
        try:
            yield
        finally:
            lock.release()

    def _shared_build(self, kind: str, key: str, parts: dict[str, Any], build: Callable, why: str) -> Entry:
        parent = self.root / kind
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=parent))
        except OSError as e:
            raise _Unwritable(parent, e) from e
        try:
            manifest = _build_into(tmp, kind, key, parts, build)
        except BaseException as e:
            shutil.rmtree(tmp, ignore_errors=True)
            # the cache's disk is full (an OSError, or a library's own words for it): retry outside it
            full = diskfull.reason(e, (parent,)) if isinstance(e, Exception) else ""
            if full:
                said = e if isinstance(e, OSError) else OSError(errno.ENOSPC,
                                                                f"{full}: {' '.join(str(e).split())[:200]}")
                raise _Unwritable(parent, said) from e
            raise
        try:
            return self._install(tmp, parent / key, manifest, why)
        except OSError as e:  # the build is complete and verified: use it where it is, for this run only
            self._give_up_sharing(f"{parent / key}: {e.strerror or e}")
            self._scratch.append(str(tmp))
            return Entry(tmp, manifest, False, why, private=True)

    def _install(self, tmp: Path, final: Path, manifest: dict[str, Any], why: str) -> Entry:
        """Rename ``tmp`` into ``final``; if a verified entry got there first, use it and drop ``tmp``."""
        for _ in range(8):
            try:
                os.rename(tmp, final)
                return Entry(final, manifest, False, why)
            except OSError as e:
                if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
            other, _ = read_entry(final, full=True)
            if other is not None:  # a concurrent run installed it meanwhile
                shutil.rmtree(tmp, ignore_errors=True)
                other.rebuilt_because = why
                return other
            _set_aside(final)
        raise OSError(errno.EBUSY, "the entry kept changing under concurrent builds")

    def _private_build(self, kind: str, key: str, parts: dict[str, Any], build: Callable, why: str) -> Entry:
        prev = self._private.get((kind, key))
        if prev is not None and not verify_files(prev.path, prev.manifest, self.verify == "full"):
            return prev
        d = None
        try:
            if self._private_root is None:
                self._private_root = Path(tempfile.mkdtemp(prefix="infer-compare-private-"))
                self._scratch.append(str(self._private_root))
            parent = self._private_root / kind
            parent.mkdir(exist_ok=True)
            d = Path(tempfile.mkdtemp(prefix=f"{key}-", dir=parent))
            manifest = _build_into(d, kind, key, parts, build)
        except BaseException as e:
            if d is not None:
                shutil.rmtree(d, ignore_errors=True)
            full = (diskfull.reason(e, (self._private_root, tempfile.gettempdir()))
                    if isinstance(e, Exception) else "")
            if full:  # nowhere left to write it: one line that says so, whatever the library's words
                said = " ".join(str(e).split())[:200]
                raise DiskFullError(f"cannot build {kind} entry {key[:12]}: {full}"
                                    + (f" (the library said: {said})" if said else "")) from None
            raise
        entry = Entry(d, manifest, False, why, private=True)
        self._private[(kind, key)] = entry
        return entry

    def _give_up_sharing(self, reason: str) -> None:
        if not self.unwritable:
            self.unwritable = reason
            self._say(f"cannot write to the cache ({reason}); going on without caching: new artifacts are "
                      "built in a private temporary directory for this run only")
