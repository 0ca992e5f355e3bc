"""Ray's files on a node, private to the user that runs it.

Ray makes its temporary folder, the session folder and twelve folders under it (``sockets``, ``logs``,
``runtime_resources/*``...) mode 777 without the sticky bit (``try_make_directory_shared``: "so others can
use it"), under ``/tmp/ray`` by default: any local user could plant or swap files there (a socket the
driver then connects to, a log it reads). ``fleet join`` gives every node a temporary folder of the tool's
own instead, ``$RAY_TMPDIR/ic-ray-<uid>`` (``/tmp/ic-ray-<uid>`` without RAY_TMPDIR), mode 700 and owned
by this user, with Ray's folder ``ray`` inside it; starts Ray with umask 077 (its files 600, the folders
it does not chmod 700); and, once ``ray start`` has returned, takes the group and other bits off
everything there. That lasts for the files and for eight of the folders (``logs/nsight``,
``runtime_resources/pip``...: made once, at the node's start); the other six (``ray``, the session folder,
``sockets``, ``logs``, ``logs/old``, ``runtime_resources``) Ray makes 777 again each time one of its
workers starts (a worker's ``Node``, ray/_private/node.py). They stay inside the folder of mode 700,
which no other user can enter (root can): that folder is what keeps them out."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from infer_compare.base.errors import UsageError

UMASK = 0o077


def base_dir() -> Path:
    """The tool's folder for Ray on this machine (not created)."""
    return Path(os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()) / f"ic-ray-{os.geteuid()}"


def ray_temp_dir(create: bool = True) -> Path:
    """Ray's ``--temp-dir`` for a node: ``ray`` inside the tool's folder, which is made mode 700 (or checked:
    a folder that is a link, or someone else's, is refused; one of this user's with wider modes is
    tightened). UsageError in one line."""
    base = base_dir()
    if create:
        try:
            base.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(base, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise UsageError(f"cannot make Ray's folder {base}: {e.strerror or e}") from None
        st = os.lstat(base)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            who = "a link" if stat.S_ISLNK(st.st_mode) else "not a folder" if not stat.S_ISDIR(st.st_mode) \
                else f"owned by uid {st.st_uid}"
            raise UsageError(f"Ray's folder {base} is {who}, not this user's: remove it or set RAY_TMPDIR to "
                             "a folder of your own (docs/fleet.md)")
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(base, 0o700)
    return base / "ray"


def tighten(root: Path) -> int:
    """Group and other bits taken off every folder and file of this user's under ``root`` (links left
    alone, ``root`` included); how many were wider."""
    n = 0
    me = os.geteuid()
    for d, dirs, files in os.walk(root, followlinks=False):
        for p in [d, *(os.path.join(d, x) for x in dirs + files)]:
            try:
                st = os.lstat(p)
            except OSError:  # gone meanwhile (a worker's temporary file)
                continue
            if stat.S_ISLNK(st.st_mode) or st.st_uid != me or not st.st_mode & 0o077:
                continue
            try:
                os.chmod(p, stat.S_IMODE(st.st_mode) & 0o700)
                n += 1
            except OSError:
                continue
        dirs[:] = [x for x in dirs if not os.path.islink(os.path.join(d, x))]
    return n


def private_line(temp_dir: Path, tightened: int) -> str:
    return (f"Ray's files: {temp_dir} (inside {temp_dir.parent}, mode 700: this user's only"
            + (f"; {tightened} folder(s) and file(s) Ray made readable by others narrowed to this user)"
               if tightened else ")"))
