"""Where torch.compile keeps what it compiled: under the tool's cache directory.

Inductor (``TORCHINDUCTOR_CACHE_DIR``: FX graphs, generated code) and Triton (``TRITON_CACHE_DIR``:
compiled kernels) keep their work on disk, so that a later process compiling the same graph loads
it instead (measured on the lent H100, ``--model resnet50``: the 12 torch.compile rows loaded in 48 s
with warm caches, 102 s with empty ones). The tool keeps both under its own cache directory, so that
``--cache-dir`` moves them and clearing that directory clears them.

Both are set for the whole comparison, before any torch work, in this process and so in every
child and fork server: torch's ``cache_dir()`` writes its default (``/tmp/torchinductor_<user>``)
into ``os.environ`` the first time anything asks for it (``import torchvision`` does), after which a
child's own late default found the variable set. Measured on the H100 before this: the
compiled code went to ``/tmp/torchinductor_root`` while the tool's cache held only Triton's
kernels, and a run with an emptied cache directory still found Inductor's graphs.

A variable the user set is kept as it is (torch's own default, which ``import torchvision`` already
writes into the environment, is not the user's choice); the previous values are put back afterwards.
"""

from __future__ import annotations

import getpass
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

SUBDIRS = {"TORCHINDUCTOR_CACHE_DIR": "torchinductor", "TRITON_CACHE_DIR": "triton"}


def torch_default() -> str:
    """The directory torch's ``cache_dir()`` falls back to (and writes into the environment); torch is
    asked only where it is imported already."""
    if "torch" in sys.modules:
        try:
            from torch._inductor.runtime.cache_dir_utils import default_cache_dir

            return os.path.abspath(default_cache_dir())
        except Exception:  # a torch without this module: its long-standing default below
            pass
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
    user = re.sub(r'[\\/:*?"<>|]', "_", user)
    return os.path.abspath(os.path.join(tempfile.gettempdir(), "torchinductor_" + user))


def _chosen(key: str) -> bool:
    """True when ``key`` was set by someone other than torch: ``import torchvision`` already makes torch
    write its default Inductor directory into the environment, which is no choice of the user's."""
    value = os.environ.get(key)
    if value is None:
        return False
    return key != "TORCHINDUCTOR_CACHE_DIR" or os.path.abspath(value) != torch_default()


def env_for(cache_root: str | os.PathLike | None) -> dict[str, str]:
    """The variables to set for ``cache_root``: those the user has not set."""
    if not cache_root:
        return {}
    return {k: os.path.join(os.fspath(cache_root), sub) for k, sub in SUBDIRS.items() if not _chosen(k)}


@contextmanager
def kept_under(cache_root: str | os.PathLike | None) -> Iterator[dict[str, str]]:
    """Inductor's and Triton's caches under ``cache_root`` (None: left to torch) while the block runs;
    yields what was set."""
    saved = {k: os.environ.get(k) for k in SUBDIRS}
    env = env_for(cache_root)
    os.environ.update(env)
    try:
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
