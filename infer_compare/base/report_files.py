"""A Report's files: the format each suffix names, the atomic write, and a run's result folder.

``Report.save(path)`` writes the format that ``path``'s suffix names. JSON is written here; the other
formats (Markdown, CSV, HTML) are rendered by infer_compare/report/, which sits above this layer and
registers its renderers here when it is imported (``register``): the Python API and the CLI import it
before any report is saved. The result folder of a run (``Saver``: results.json after each row, every
format at the end, a temporary folder when the chosen one fails) is the CLI's and
``compare(output_dir=...)``'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infer_compare.base.errors import UsageError

# suffix -> renderer (a Report to its text); ".json" is built in, report/ adds the others
_RENDERERS: dict[str, Callable[[Any], str]] = {}
# the formats of a result folder, as ``results.<format>``
RESULT_FORMATS = ("json", "md", "csv", "html")


def _json(report: Any) -> str:
    return json.dumps(report.to_dict(), indent=1) + "\n"


def register(suffix: str, render: Callable[[Any], str]) -> None:
    """``Report.save`` writes ``render(report)`` to a path ending in ``suffix`` (".md", ...)."""
    _RENDERERS[suffix.lower()] = render


def suffixes() -> tuple[str, ...]:
    """The suffixes ``Report.save`` accepts now: ".json", then those registered."""
    return (".json", *(s for s in _RENDERERS if s != ".json"))


def render_for(report: Any, path: str | os.PathLike) -> str:
    """The text of ``report`` in the format ``path``'s suffix names; ValueError for another suffix."""
    suffix = Path(path).suffix.lower()
    render = _json if suffix == ".json" else _RENDERERS.get(suffix)
    if render is None:
        accepted = ", ".join(suffixes())
        more = "" if _RENDERERS else " (.md, .csv and .html once infer_compare.report is imported)"
        raise ValueError(f"cannot save a report as {os.fspath(path)!r}: the suffix {suffix or '(none)'!r} "
                         f"names no format; accepted: {accepted}{more}")
    return render(report)


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file beside it, renamed into place). On failure
    nothing is left behind and an OSError names the path and the cause (``str(e)`` is one line)."""
    path = os.fspath(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".tmp-",
                                   suffix=Path(path).suffix)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(e, OSError):
            raise OSError(e.errno, e.strerror or str(e), path) from e
        raise


def write_all(report: Any, out_dir: Path, formats=RESULT_FORMATS) -> dict[str, Path]:
    """``report`` as ``out_dir/results.<format>`` for each of ``formats`` (``out_dir`` made if missing);
    the paths by format."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for fmt in formats:
        p = out_dir / f"results.{fmt}"
        report.save(p)
        paths[fmt] = p
    return paths


def made_dirs(out: Path) -> list[Path]:
    """``out.mkdir(parents=True)``; the folders it made, ``out`` first (for ``remove_empty``)."""
    new = [p for p in (out, *out.parents) if not p.exists()]
    out.mkdir(parents=True, exist_ok=True)
    return new


def remove_empty(dirs: list[Path]) -> None:
    """Of ``dirs`` (deepest first), those still empty are removed: an error leaves no empty folder."""
    for p in dirs:
        with contextlib.suppress(OSError):
            p.rmdir()  # only an empty folder


def writable_dir(out: Path, make: Callable[[Path], Any] = made_dirs) -> Path:
    """``out``, made by ``make`` (with its missing parents) and checked writable before any work; a
    UsageError (one line) when it cannot be."""
    try:
        make(out)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"output directory {out} is not writable: {e.strerror or e}") from None
    return out


class Saver:
    """Saves each partial report (``on_row``) and writes the final one: every format, atomically, to the
    output directory, or to a fresh temporary one when that fails (nothing measured is lost)."""

    def __init__(self, out: Path, formats: tuple[str, ...] = RESULT_FORMATS):
        self.out, self.formats = Path(out), formats
        self.last = None

    def __call__(self, rep) -> None:
        self.last = rep
        try:
            rep.save(self.out / "results.json")
        except OSError:
            pass  # write() says so at the end

    def write(self, rep) -> dict[str, Path]:
        try:
            return write_all(rep, self.out, self.formats)
        except OSError as e:
            fallback = Path(tempfile.mkdtemp(prefix="infer-compare-results-"))
            paths = write_all(rep, fallback, self.formats)
            print(f"infer-compare: could not write to {self.out} ({e.strerror or e}); "
                  f"results saved in {fallback}", file=sys.stderr)
            return paths

    def interrupted(self) -> None:
        """On Ctrl-C/SIGTERM: the partial report (marked incomplete by the measuring code) in every format."""
        if self.last is not None:
            paths = self.write(self.last)
            print(f"infer-compare: partial results ({len(self.last.rows)} rows, incomplete) saved: "
                  f"{', '.join(str(p) for p in paths.values())}", file=sys.stderr)
