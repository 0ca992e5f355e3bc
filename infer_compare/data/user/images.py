"""Folders of images: listing (ImageFolder or flat), the labels file, decoding with skips."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from infer_compare.base.errors import UsageError
from infer_compare.data.user import modes
from infer_compare.data.user.arrays import first_line
from infer_compare.data.user.spec import PreprocessSpec, apply

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp")
MAX_EXAMPLES = 5


SORTED_FOLDERS = "sorted folder names"  # where the labels of class folders come from without --labels


@dataclass
class Listing:
    files: list[Path]
    labels: list[int] | None  # one per file; None for a flat folder
    class_names: tuple[str, ...] = ()  # class_names[label] is its folder ("" for an index no folder maps to)
    classes: int = 0  # folders found
    labels_from: str = ""
    ignored_top: int = 0  # images at the top of an ImageFolder tree (not in a class folder)


@dataclass
class Decoded:
    samples: list[np.ndarray] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)  # indices into Listing.files
    skipped: int = 0
    examples: list[str] = field(default_factory=list)
    converted: dict[str, int] = field(default_factory=dict)  # what modes.standard did -> how many images

    def conversions(self) -> str:
        """'3 images: 16-bit grayscale scaled to 8 bits (value / 257)'; '' when every image was plain."""
        return "; ".join(f"{n} image{'s' if n != 1 else ''}: {what}" for what, n in self.converted.items())


def _visible(p: Path) -> bool:
    return not p.name.startswith(".")


def _is_image(p: Path) -> bool:
    return p.suffix.lower() in IMAGE_SUFFIXES and _visible(p) and p.is_file()


def _images_under(d: Path) -> list[Path]:
    out = []
    for root, dirs, files in os.walk(d, followlinks=True):
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        out += [Path(root) / f for f in files if _is_image(Path(root) / f)]
    return sorted(out)


def list_folder(path: Path, labels_file: str | None) -> Listing:
    """An ImageFolder tree when a visible sub-folder holds images, else a flat folder of images."""
    subdirs = sorted((d for d in path.iterdir() if d.is_dir() and _visible(d)), key=lambda d: d.name)
    per_class = {d.name: _images_under(d) for d in subdirs}
    top = sorted(p for p in path.iterdir() if _is_image(p))
    if not any(per_class.values()):
        if labels_file:
            raise UsageError(f"--labels needs class sub-folders, but {path} has none with images")
        return Listing(top, None)
    mapping, source = (_read_labels_file(labels_file, list(per_class)) if labels_file
                       else ({n: i for i, n in enumerate(per_class)}, SORTED_FOLDERS))
    files, labels = [], []
    for name, paths in per_class.items():
        files += paths
        labels += [mapping[name]] * len(paths)
    names = [""] * (max(mapping.values()) + 1)
    for n, i in mapping.items():
        names[i] = n
    return Listing(files, labels, tuple(names), len(per_class), source, len(top))


def _read_labels_file(labels_file: str, folders: list[str]) -> tuple[dict[str, int], str]:
    p = Path(labels_file)
    if not p.is_file():
        raise UsageError(f"labels file not found: {labels_file}")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read labels file {labels_file}: {first_line(e)}") from None
    table = (_parse_json_labels(text, labels_file) if text.lstrip().startswith(("{", "["))
             else _parse_text_labels(text, labels_file, set(folders)))
    missing = [f for f in folders if f not in table]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise UsageError(f"labels file {labels_file} has no index for folder '{missing[0]}'{more}")
    mapping = {f: table[f] for f in folders}
    seen: dict[int, str] = {}
    for f, i in mapping.items():
        if i in seen:
            raise UsageError(f"labels file {labels_file} gives index {i} to both '{seen[i]}' and '{f}'")
        seen[i] = f
    return mapping, f"labels file {labels_file}"


def _parse_json_labels(text: str, where: str) -> dict[str, int]:
    from pydantic_core import from_json

    try:
        obj = from_json(text)  # nesting bounded (no RecursionError on a hostile file)
    except ValueError as e:
        raise UsageError(f"labels file {where} is not valid JSON: {' '.join(str(e).split())}") from None
    if not isinstance(obj, dict):
        raise UsageError(f"labels file {where} must hold a JSON object {{\"folder\": index}}, "
                         f"got a {type(obj).__name__}")
    out = {}
    for k, v in obj.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise UsageError(f"labels file {where}: folder '{k}' needs a class index (an integer >= 0), "
                             f"got {v!r}")
        out[str(k)] = v
    return out


def _parse_text_labels(text: str, where: str, folders: set[str]) -> dict[str, int]:
    """Lines 'folder index' or 'index folder' (space, tab or comma between); '#' starts a comment.
    Where a line reads both ways ('1 class 5'), the reading that names an existing folder wins."""
    out: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        readings = [m for m in (re.fullmatch(r"(?P<name>.+?)[\s,]+(?P<idx>\d+)", line),
                                re.fullmatch(r"(?P<idx>\d+)[\s,]+(?P<name>.+)", line)) if m]
        if not readings:
            raise UsageError(f"labels file {where} line {n}: expected 'folder index' or 'index folder', "
                             f"got {line!r}")
        m = next((r for r in readings if r["name"].strip() in folders), readings[0])
        name = m["name"].strip()
        if name in out and out[name] != int(m["idx"]):
            raise UsageError(f"labels file {where} line {n}: folder '{name}' already has index {out[name]}")
        out[name] = int(m["idx"])
    return out


def decode_one(path: Path, spec: PreprocessSpec, done: list[str] | None = None) -> np.ndarray:
    """One image as a sample; what was done to bring it to 8 bits (data/user/modes.py) goes to ``done``."""
    from PIL import Image

    with Image.open(path) as img:
        img.load()  # a truncated file fails here, not later
        frames = int(getattr(img, "n_frames", 1) or 1)
        img, notes = modes.standard(img)
        if frames > 1:  # an animated GIF, PNG or WebP, a multi-page TIFF: PIL gives its first frame
            notes.append(f"animated: the first of its {frames} frames used")
        if done is not None:
            done += notes
        return apply(img, spec)


def decode(files: list[Path], order: list[int], want: int, spec: PreprocessSpec,
           progress: Callable[[int, int], None] | None) -> Decoded:
    """Decode files in ``order`` until ``want`` succeed; a file that fails is skipped with its reason
    (and, when fewer than all are wanted, the next file in ``order`` takes its place)."""
    out = Decoded()
    total = min(want, len(order))
    done = 0
    for i in order:
        if len(out.kept) >= want:
            break
        try:
            steps: list[str] = []
            out.samples.append(decode_one(files[i], spec, steps))
            out.kept.append(i)
            for what in steps:
                out.converted[what] = out.converted.get(what, 0) + 1
        except Exception as e:  # any decoder failure is a skipped file, never fatal
            out.skipped += 1
            if len(out.examples) < MAX_EXAMPLES:
                out.examples.append(f"{files[i]}: {first_line(e)}")
            total = min(total + 1, len(order)) if want < len(order) else total
        done += 1
        if progress is not None:
            progress(done, total)
    return out
