"""glibc's malloc held to fixed thresholds in a measuring process (the A/B gate's sides, measure/ab_child.py).

By default glibc's thresholds move with the process's history: freeing a block that was mapped on its own
raises the mmap threshold to that block's size, and the heap's free top is given back to the system once it
exceeds twice that threshold. Whether a runtime's large temporary buffers then come from heap memory used
before or from fresh pages (a page fault per 4 KiB, each page zeroed by the kernel) depends on what the
process did before. Measured on the 2-core development VM (PyTorch 2.14 CPU, MobileNet v2 fp32 batch 1, two
threads, the A/B gate's processes forked from one server): every call faulted about 2,600 pages in some
processes and about 3,400 in others, and took 10.6-11.3 ms in the first and 12.4-12.9 ms in the second, for
the process's whole life: two processes of the same code up to 16 % apart. With the thresholds fixed (below)
the calls faulted 0-7 pages a block of three and took 7.2-9.2 ms; the process pairs of unchanged gates agreed
within a few per cent, as the other runtimes' do (ONNX Runtime and OpenVINO keep their own memory arenas).

``fix()`` sets the mmap threshold to glibc's largest (32 MiB on 64-bit systems: larger blocks are always
mapped on their own, every call alike) and the trim threshold to 1 GiB (the heap's top is kept), which also
turns glibc's adjustment of both off. Only where the C library is glibc (``available()``); elsewhere (musl,
macOS, Windows) nothing is changed and the caller says so.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
TRIM_THRESHOLD = 1 << 30


def mmap_threshold() -> int:
    """glibc's largest mmap threshold: 4 MiB times the size of a long (32 MiB on 64-bit systems)."""
    return 4 * 1024 * 1024 * ctypes.sizeof(ctypes.c_long)


def glibc_version() -> str:
    """'2.36' where the C library is glibc, '' elsewhere."""
    try:
        got = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        return ""
    return got.split()[-1] if got.startswith("glibc") else ""


def _mallopt() -> Any:
    if not glibc_version():
        return None
    try:
        return ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return None


def available() -> bool:
    """Whether ``fix()`` can work here (glibc's mallopt found)."""
    return _mallopt() is not None


def fix() -> str:
    """Fix glibc's mmap and trim thresholds in this process; what was set, in words. OSError where it cannot
    (not glibc, or mallopt refused a value)."""
    mallopt = _mallopt()
    if mallopt is None:
        raise OSError("the C library is not glibc: its malloc thresholds are left as they are")
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    mmap = mmap_threshold()
    for param, value, name in ((M_MMAP_THRESHOLD, mmap, "mmap"), (M_TRIM_THRESHOLD, TRIM_THRESHOLD, "trim")):
        if mallopt(param, value) != 1:
            raise OSError(f"glibc's mallopt refused the {name} threshold {value}")
    return (f"glibc {glibc_version()} malloc: mmap threshold {mmap >> 20} MiB, trim threshold "
            f"{TRIM_THRESHOLD >> 20} MiB, fixed (not moved by the process's history)")
