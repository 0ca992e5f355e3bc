"""Reading ``.npy`` / ``.npz`` files that came from elsewhere (a bundle, a user's --data) without
trusting their headers: each array's header is read first and checked against the bytes the file
really holds and the memory free, before numpy allocates anything. A header that claims an
enormous shape is refused in one line (ValueError) instead of a MemoryError; so is an object
array (it needs pickle), a header numpy cannot parse, and an archive member that is not an array.
"""

from __future__ import annotations

import os
import zipfile
from typing import Any, BinaryIO

NPY_MAGIC = b"\x93NUMPY"
MAX_HEADER_BYTES = 10_000  # numpy's own default bound on a header


def _header(f: BinaryIO, where: str) -> tuple[tuple[int, ...], Any]:
    """(shape, dtype) of the array whose .npy header ``f`` is at."""
    import numpy as np
    from numpy.lib import format as npformat

    try:
        version = npformat.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = npformat.read_array_header_1_0(f, max_header_size=MAX_HEADER_BYTES)
        elif version in ((2, 0), (3, 0)):  # 3.0: 2.0's layout, a UTF-8 header (its keys are ASCII)
            shape, _, dtype = npformat.read_array_header_2_0(f, max_header_size=MAX_HEADER_BYTES)
        else:
            raise ValueError(f"format version {version[0]}.{version[1]} is not one numpy writes")
    except (ValueError, OSError, SyntaxError, TypeError, EOFError) as e:
        raise ValueError(f"{where}: not a valid .npy file (its header: {' '.join(str(e).split())[:160]})") from None
    if dtype.hasobject:
        raise ValueError(f"{where}: holds Python objects (refused: only numeric arrays, loaded without pickle)")
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise ValueError(f"{where}: header has a bad shape {shape!r}")
    span = dtype.itemsize
    for d in shape:
        span *= max(d, 1)
    if span > np.iinfo(np.intp).max:  # numpy refuses even an empty array whose other axes overflow
        raise ValueError(f"{where}: header shape {tuple(shape)} is larger than an array can be")
    return tuple(shape), np.dtype(dtype)


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


def _free_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


def check(path: str | os.PathLike) -> None:
    """Raise ValueError (one line naming ``path``) unless every array in it can be read as it claims."""
    where = os.fspath(path)
    with open(path, "rb") as f:
        lead = f.read(len(NPY_MAGIC))
        f.seek(0)
        if lead == NPY_MAGIC:
            shape, dtype = _header(f, where)
            need = _check(shape, dtype, os.fstat(f.fileno()).st_size - f.tell(), where)
        elif zipfile.is_zipfile(f):
            need = _check_zip(f, where)
        else:
            raise ValueError(f"{where}: not a .npy array or a .npz archive")
    free = _free_memory()
    if need > free:
        raise ValueError(f"{where}: its arrays need {need / 2**30:.1f} GiB; {free / 2**30:.1f} GiB of memory is free")


def _check_zip(f: BinaryIO, where: str) -> int:
    need = 0
    try:
        with zipfile.ZipFile(f) as z:
            for info in z.infolist():
                if not info.filename.endswith(".npy"):
                    raise ValueError(f"{where}: archive member {info.filename!r} is not a .npy array")
                with z.open(info) as m:
                    shape, dtype = _header(m, f"{where}:{info.filename}")
                    # the member's own record of its size, which zipfile enforces while reading it
                    need += _check(shape, dtype, info.file_size - m.tell(), f"{where}:{info.filename}")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError) as e:
        raise ValueError(f"{where}: not a readable .npz archive ({e})") from None
    return need


def load(path: str | os.PathLike) -> Any:
    """``np.load(path, allow_pickle=False)`` after :func:`check`: an array, or an NpzFile."""
    import numpy as np

    check(path)
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:  # what the header check cannot see (a bad dtype, a short read)
        raise ValueError(f"{os.fspath(path)}: {' '.join(str(e).split())[:200]}") from None
