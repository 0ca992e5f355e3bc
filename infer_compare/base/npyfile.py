"""Reading ``.npy`` / ``.npz`` files that came from elsewhere (a bundle, a user's --data) without
trusting their headers: each array's header is read first and checked against the bytes the file
really holds and the memory available, before numpy allocates anything. A header that claims an
enormous shape is refused in one line (ValueError) instead of a MemoryError; so is an object
array (it needs pickle), a header numpy cannot parse, and an archive member that is not an array.

Memory is bounded: the arrays of one file may take at most ``CAP_SHARE`` of the memory available to
this process (base/memory.py: the cgroup's limit where there is one, else the host's available memory).
A compressed ``.npz`` member is checked against the size its zip entry declares before anything is
inflated, and inflated once, straight into its array, never past its array's bytes (zipfile itself
never yields more than the declared size). With ``mmap=True`` a ``.npy`` file and the uncompressed
members of an ``.npz`` are memory-mapped copy-on-write instead of read: nothing is copied, and the
pages are the file's (the files of a bundle or the user's data, which nothing rewrites while a run reads
them; never the tool's own exchange files, which are rewritten).
"""

from __future__ import annotations

import os
import struct
import zipfile
from dataclasses import dataclass
from typing import Any, BinaryIO

from infer_compare.base import memory

NPY_MAGIC = b"\x93NUMPY"
MAX_HEADER_BYTES = 10_000  # numpy's own default bound on a header
CAP_SHARE = 0.8  # of the memory available: the rest is for the runtimes, the models and the outputs
CHUNK = 16 << 20  # bytes inflated per read
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # a zip entry's local header (30 bytes)


@dataclass(frozen=True)
class Member:
    """One array of a file: where it lies and what its header claims."""

    name: str  # "" for a .npy file; the array's name in an .npz
    shape: tuple[int, ...]
    fortran: bool
    dtype: Any
    nbytes: int
    info: zipfile.ZipInfo | None = None  # the .npz entry; None for a .npy file
    header_len: int = 0  # bytes of the .npy header before the data (inside the entry for an .npz)


def _header(f: BinaryIO, where: str) -> tuple[tuple[int, ...], bool, Any]:
    """(shape, fortran order, dtype) of the array whose .npy header ``f`` is at."""
    import numpy as np
    from numpy.lib import format as npformat

    try:
        version = npformat.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = npformat.read_array_header_1_0(f, max_header_size=MAX_HEADER_BYTES)
        elif version in ((2, 0), (3, 0)):  # 3.0: 2.0's layout, a UTF-8 header (its keys are ASCII)
            shape, fortran, dtype = npformat.read_array_header_2_0(f, max_header_size=MAX_HEADER_BYTES)
        else:
            raise ValueError(f"format version {version[0]}.{version[1]} is not one numpy writes")
    except (ValueError, OSError, SyntaxError, TypeError, EOFError) as e:
        raise ValueError(f"{where}: not a valid .npy file (its "
                         f"header: {' '.join(str(e).split())[:160]})") from None
    if dtype.hasobject:
        raise ValueError(f"{where}: holds Python objects (refused: only numeric arrays, loaded "
                         "without pickle)")
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise ValueError(f"{where}: header has a bad shape {shape!r}")
    span = dtype.itemsize
    for d in shape:
        span *= max(d, 1)
    if span > np.iinfo(np.intp).max:  # numpy refuses even an empty array whose other axes overflow
        raise ValueError(f"{where}: header shape {tuple(shape)} is larger than an array can be")
    return tuple(shape), bool(fortran), np.dtype(dtype)


def _need(shape: tuple[int, ...], dtype: Any) -> int:
    n = 1
    for d in shape:
        n *= d
    return n * dtype.itemsize


def _check(shape: tuple[int, ...], dtype: Any, data_bytes: int, where: str) -> int:
    need = _need(shape, dtype)
    if need > data_bytes:
        raise ValueError(f"{where}: header says shape {shape} {dtype} ({need:,} bytes) but the file holds "
                         f"{data_bytes:,} bytes of data: refused (truncated or forged)")
    return need


def cap() -> int:
    """The most bytes the arrays of one file from elsewhere may take (``CAP_SHARE`` of what is available)."""
    return int(memory.available() * CAP_SHARE)


def _too_big(n_bytes: int, where: str, what: str) -> ValueError:
    avail = memory.available()
    return ValueError(f"{where}: {what} {n_bytes / 2**30:.2f} GiB; at most {CAP_SHARE:.0%} of the memory may "
                      f"go to arrays and {memory.describe(avail)}: refused before reading it")


def members(path: str | os.PathLike) -> list[Member]:
    """Every array of ``path`` as its header claims, checked against the file; nothing is inflated."""
    where = os.fspath(path)
    with open(path, "rb") as f:
        lead = f.read(len(NPY_MAGIC))
        f.seek(0)
        if lead == NPY_MAGIC:
            shape, fortran, dtype = _header(f, where)
            need = _check(shape, dtype, os.fstat(f.fileno()).st_size - f.tell(), where)
            return [Member("", shape, fortran, dtype, need, None, f.tell())]
        if zipfile.is_zipfile(f):
            return _zip_members(f, where)
    raise ValueError(f"{where}: not a .npy array or a .npz archive")


def _zip_members(f: BinaryIO, where: str) -> list[Member]:
    out: list[Member] = []
    limit = cap()
    try:
        with zipfile.ZipFile(f) as z:
            for info in z.infolist():
                at = f"{where}:{info.filename}"
                if not info.filename.endswith(".npy"):
                    raise ValueError(f"{where}: archive member {info.filename!r} is not a .npy array")
                if any(o.name == info.filename[:-4] for o in out):
                    raise ValueError(f"{where}: archive member {info.filename!r} appears twice")
                if info.compress_type != zipfile.ZIP_STORED and info.file_size > limit:  # as its entry says
                    raise _too_big(info.file_size, at, "its zip entry declares")
                with z.open(info) as m:
                    shape, fortran, dtype = _header(m, at)
                    # the member's own record of its size, which zipfile enforces while reading it
                    need = _check(shape, dtype, info.file_size - m.tell(), at)
                    out.append(Member(info.filename[:-4], shape, fortran, dtype, need, info, m.tell()))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, RuntimeError) as e:
        why = " ".join(str(e).split())[:160]
        raise ValueError(f"{where}: not a readable .npz archive ({why})") from None
    return out


def need(path: str | os.PathLike) -> int:
    """Bytes the arrays of ``path`` take once read (ValueError, one line, for a file that is not one)."""
    return sum(m.nbytes for m in members(path))


def check(path: str | os.PathLike) -> list[Member]:
    """Raise ValueError (one line naming ``path``) unless every array in it can be read as it claims and
    they fit in the memory available (``cap()``); the arrays, as their headers claim them."""
    got = members(path)
    total = sum(m.nbytes for m in got)
    if total > cap():
        raise _too_big(total, os.fspath(path), "its arrays need")
    return got


def _mapped(path: str | os.PathLike, m: Member, offset: int) -> Any:
    import numpy as np

    order = "F" if m.fortran else "C"
    if m.nbytes == 0:  # mmap cannot map nothing
        return np.empty(m.shape, m.dtype, order=order)
    mm = np.memmap(path, dtype=m.dtype, mode="c", offset=offset, shape=m.shape, order=order)
    return np.asarray(mm)  # a plain ndarray view of the mapping (no copy)


def _entry_data_offset(f: BinaryIO, info: zipfile.ZipInfo, where: str) -> int:
    """Where an uncompressed entry's bytes start in the archive (after its local header)."""
    f.seek(info.header_offset)
    raw = f.read(_LOCAL_HEADER.size)
    if len(raw) != _LOCAL_HEADER.size or raw[:4] != b"PK\x03\x04":
        raise ValueError(f"{where}:{info.filename}: bad local zip header")
    fields = _LOCAL_HEADER.unpack(raw)
    return info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1]


def _inflate(z: zipfile.ZipFile, m: Member, where: str) -> Any:
    """A compressed member read once, straight into its array, never past its array's bytes."""
    import numpy as np

    assert m.info is not None
    flat = np.empty(m.nbytes, np.uint8)
    view, done = memoryview(flat), 0
    with z.open(m.info) as fm:
        fm.read(m.header_len)
        while done < m.nbytes:
            got = fm.readinto(view[done:done + CHUNK])
            if not got:
                raise ValueError(f"{where}:{m.info.filename}: {done:,} of {m.nbytes:,} bytes of data: "
                                 "truncated")
            done += got
    return flat.view(m.dtype).reshape(m.shape, order="F" if m.fortran else "C")


def _read_npz(path: str | os.PathLike, found: list[Member], mmap: bool) -> dict[str, Any]:
    where, out = os.fspath(path), {}
    with open(path, "rb") as f, zipfile.ZipFile(f) as z:
        for m in found:
            info = m.info
            assert info is not None
            if mmap and info.compress_type == zipfile.ZIP_STORED and not info.flag_bits & 0x1:
                out[m.name] = _mapped(path, m, _entry_data_offset(f, info, where) + m.header_len)
            else:
                out[m.name] = _inflate(z, m, where)
    return out


def load(path: str | os.PathLike, *, mmap: bool = False) -> Any:
    """The arrays of ``path`` after :func:`check`, without pickle: a ``.npy`` file's array, or an ``.npz``
    archive's {name: array} in its order. ``mmap``: memory-mapped (copy-on-write) where the bytes lie
    uncompressed in the file. ValueError (one line naming ``path``) for anything unreadable."""
    import numpy as np

    found = check(path)
    try:
        if found and found[0].info is None:
            m = found[0]
            if mmap:
                return _mapped(path, m, m.header_len)
            return np.load(path, allow_pickle=False)
        return _read_npz(path, found, mmap)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, RuntimeError) as e:  # a bad CRC, a short read
        msg = " ".join(str(e).split())[:200]
        raise ValueError(msg if msg.startswith(os.fspath(path)) else f"{os.fspath(path)}: {msg}") from None
