"""The user's data set: loading (folders or arrays), subsets, the evaluation/calibration split."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from infer_compare.base.errors import UsageError
from infer_compare.catalog import deps
from infer_compare.data.user import arrays as arr
from infer_compare.data.user import checks
from infer_compare.data.user import images as im
from infer_compare.data.user.spec import PreprocessSpec, fmt_shape

Inputs = np.ndarray | dict[str, np.ndarray]


@dataclass
class UserData:
    images: Inputs  # N x sample shape (float32 for images), or {input name: array} from a .npz
    labels: np.ndarray | None = None  # int64, one per sample
    # class_names[label] is the folder of that class ("" for an unused index)
    class_names: tuple[str, ...] = ()
    skipped: int = 0  # files that failed to decode
    skipped_examples: tuple[str, ...] = ()  # up to 5 "path: reason"
    description: str = ""
    reference_outputs: dict[str, np.ndarray] | None = None  # output name ("" = the only output) -> N x ...
    labels_from: str = ""  # "sorted folder names" or "labels file PATH" (a folder of class folders)
    folders: int = 0  # its class folders
    arrays: bool = False  # read from a .npy/.npz (fed as they are), not decoded from images

    def __len__(self) -> int:
        return _count(self.images)

    def digest(self) -> str:
        """sha256 (16 hex digits) of the inputs, labels and reference outputs, with names, shapes and
        dtypes."""
        h = hashlib.sha256()
        for name, a in _named_arrays(self):
            a = np.ascontiguousarray(a)
            h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
            h.update(a.tobytes())
        return h.hexdigest()[:16]

    def subset(self, idx: np.ndarray | list[int], description: str | None = None) -> UserData:
        """The samples at ``idx`` (inputs, labels and reference outputs alike)."""
        idx = np.asarray(idx, dtype=np.int64)
        return replace(self, images=_take(self.images, idx),
                       labels=None if self.labels is None else self.labels[idx],
                       reference_outputs=None if self.reference_outputs is None else
                       {k: v[idx] for k, v in self.reference_outputs.items()},
                       description=self.description if description is None else description)


def _count(x: Inputs) -> int:
    return len(next(iter(x.values()))) if isinstance(x, dict) else len(x)


def _take(x: Inputs, idx: np.ndarray) -> Inputs:
    return {k: v[idx] for k, v in x.items()} if isinstance(x, dict) else x[idx]


def _named_arrays(d: UserData):
    yield from (sorted(d.images.items()) if isinstance(d.images, dict) else [("images", d.images)])
    if d.labels is not None:
        yield "labels", d.labels
    for k, v in sorted((d.reference_outputs or {}).items()):
        yield f"reference:{k}", v


def selection_order(n: int, labels: np.ndarray | list[int] | None, seed: int) -> list[int]:
    """Every index of ``n``, in the order a subset takes them: shuffled (seeded) within each class,
    then round-robin over the classes (sorted), so any prefix is as balanced as the classes allow."""
    rng = np.random.default_rng(seed)
    if labels is None:
        return [int(i) for i in rng.permutation(n)]
    lab = np.asarray(labels)
    queues = [list(rng.permutation(np.flatnonzero(lab == c))) for c in np.unique(lab)]
    order: list[int] = []
    depth = 0
    while len(order) < n:
        order += [int(q[depth]) for q in queues if depth < len(q)]
        depth += 1
    return order


def load_data(path, *, preprocess: PreprocessSpec, input_shape: tuple[int, ...] | Mapping | None = None,
              max_images: int | None = None, labels_file: str | None = None,
              progress: Callable[[int, int], None] | None = None, seed: int = 0) -> UserData:
    """A folder of images (ImageFolder tree or flat), a .npy or a .npz -> UserData; see the package
    docstring."""
    p = Path(path).expanduser()
    max_images = None if max_images is None else _positive_int(max_images)
    if not p.exists():
        raise UsageError(f"data path not found: {path}")
    if p.is_dir():
        return _load_folder(p, preprocess, input_shape, max_images, labels_file, progress, seed)
    if labels_file:
        raise UsageError(f"--labels applies to a folder of class sub-folders, not to {path}")
    suffix = p.suffix.lower()
    if suffix not in (".npy", ".npz"):
        raise UsageError(f"--data takes a folder of images, a .npy or a .npz file; got {path}")
    a = arr.load_npy(p, input_shape) if suffix == ".npy" else arr.load_npz(p, input_shape)
    checks.refuse_nonfinite(a.inputs, str(path))  # before anything is measured (data/user/checks.py says why)
    data = UserData(a.inputs, a.labels, skipped=0, reference_outputs=a.reference, arrays=True)
    if progress is not None:
        progress(a.n, a.n)
    n = a.n
    if max_images is not None and max_images < n:
        data = data.subset(sorted(selection_order(n, a.labels, seed)[:max_images]))
        n = max_images
    data.description = _describe_arrays(p, data, n, a.n, a.notes)
    return data


def _positive_int(v) -> int:
    try:
        n = int(v) if not isinstance(v, bool) and float(v) == int(float(v)) else 0
    except (TypeError, ValueError, OverflowError):
        n = 0
    if n < 1:
        raise UsageError(f"--max-images takes a positive integer, got {v!r}")
    return n


def _describe_arrays(p: Path, data: UserData, n: int, total: int, notes: list[str]) -> str:
    if isinstance(data.images, dict):
        what = ", ".join(f"{k} {fmt_shape(v.shape[1:])} {v.dtype}" for k, v in data.images.items())
    else:
        what = f"{fmt_shape(data.images.shape[1:])} {data.images.dtype}"
    of = f" (seeded subset of {total})" if n < total else ""
    extra = ("; with labels" if data.labels is not None else "") + (
        f"; reference outputs: {', '.join(k or '(the only output)' for k in data.reference_outputs)}"
        if data.reference_outputs else "")
    read = f"; converted on reading: {'; '.join(notes)}" if notes else ""
    return f"{n} samples{of} from {p} ({what}), no preprocessing{read}{extra}"


def _load_folder(p: Path, spec: PreprocessSpec, input_shape, max_images: int | None, labels_file: str | None,
                 progress, seed: int) -> UserData:
    deps.require("PIL", "reading image folders")
    try:
        listing = im.list_folder(p, labels_file)
    except OSError as e:
        raise UsageError(f"cannot read the folder {p}: {e.strerror or type(e).__name__}") from None
    if not listing.files:
        suffixes = " ".join(im.IMAGE_SUFFIXES)
        raise UsageError(f"no images in {p} (looked for {suffixes}, in class sub-folders or at the top)")
    if spec.crop or spec.target():  # the sample shape is known before decoding anything
        c, (h, w) = spec.channels, spec.target() or (int(spec.crop or 0), int(spec.crop or 0))
        _check_shape((c, h, w) if spec.layout == "nchw" else (h, w, c), input_shape, spec, p)
    n_files = len(listing.files)
    want = n_files if max_images is None else min(max_images, n_files)
    order = list(range(n_files)) if want == n_files else selection_order(n_files, listing.labels, seed)
    dec = im.decode(listing.files, order, want, spec, progress)
    if not dec.kept:
        raise UsageError(f"no decodable image in {p}: {dec.skipped} file(s) skipped, e.g. {dec.examples[0]}")
    keep = np.argsort(dec.kept, kind="stable")  # back to file order
    kept = [dec.kept[i] for i in keep]
    shapes = {dec.samples[i].shape: listing.files[dec.kept[i]].name for i in keep}
    if len(shapes) > 1:
        (s1, f1), (s2, f2) = list(shapes.items())[:2]
        raise UsageError(f"{p}: the images differ in size after preprocessing ({f1} {fmt_shape(s1)}, {f2} "
                         f"{fmt_shape(s2)}); set --crop")
    images = np.stack([dec.samples[i] for i in keep]).astype(np.float32, copy=False)
    _check_shape(images.shape[1:], input_shape, spec, p)
    labels = None if listing.labels is None else np.asarray([listing.labels[i] for i in kept], np.int64)
    data = UserData(images, labels, listing.class_names, dec.skipped, tuple(dec.examples),
                    labels_from=listing.labels_from if labels is not None else "", folders=listing.classes)
    data.description = _describe_folder(p, listing, data, n_files, spec)
    if dec.converted:  # images of other kinds than 8-bit L/RGB: say how they were brought to 8 bits
        data.description += f"; converted: {dec.conversions()}"
    return data


def _check_shape(sample: tuple[int, ...], input_shape, spec: PreprocessSpec, p: Path) -> None:
    if input_shape is None or isinstance(input_shape, Mapping):
        return
    if not arr.fits(tuple(sample), tuple(input_shape)):
        raise UsageError(f"{p}: the preprocessing makes {fmt_shape(sample)} samples but the model input is "
                         f"{fmt_shape(input_shape)} ({spec.describe()}); set --crop/--layout")


def _describe_folder(p: Path, listing: im.Listing, data: UserData, n_files: int, spec: PreprocessSpec) -> str:
    n = len(data)
    of = f" (class-balanced seeded subset of {n_files} files)" if n + data.skipped < n_files else ""
    if data.labels is None:
        what = f"{n} images{of} from the folder {p}, no labels"
    else:
        used = len(np.unique(data.labels))
        what = (f"{n} labelled images{of} of {used} classes ({listing.classes} class folders; labels from "
                f"{listing.labels_from}) from the ImageFolder {p}")
    if listing.ignored_top:
        what += f"; {listing.ignored_top} images at its top level (outside class folders) ignored"
    if data.skipped:
        what += f"; {data.skipped} files skipped (failed to decode)"
    return f"{what}; preprocessing: {spec.describe()}"


def check_folder_classes(data: UserData, num_classes: int | None, where: str) -> None:
    """Class folders without --labels are the model's classes 0..N-1 in sorted order only when there are
    as many folders as the model has classes (ImageNet's 1000 synset folders): otherwise nothing says
    which class a folder is, and accuracy computed from that guess is meaningless. UsageError (exit 2)."""
    if data.labels_from != im.SORTED_FOLDERS or not num_classes or data.folders == int(num_classes):
        return
    example = next((n for n in data.class_names if n), "cat")
    raise UsageError(
        f"--data {where} has {data.folders} class folders but the model has {num_classes} classes, so the "
        f"folder names cannot say which class each holds (sorted, they would be classes "
        f"0..{data.folders - 1}); pass --labels FILE mapping each folder to the model's class index "
        f"(JSON {{\"{example}\": 281, ...}} or lines \"{example} 281\"), or put the images in one flat "
        f"folder to measure parity without accuracy")


def split_eval_calibration(data: UserData, n_calib: int, seed: int = 0) -> tuple[UserData, UserData]:
    """(evaluation, calibration): disjoint, class-balanced where labelled, seeded. At most half the
    samples calibrate; the skipped-file counts stay with the evaluation part."""
    n = len(data)
    if n < 2:
        raise UsageError(f"cannot split {n} sample(s) into evaluation and calibration: give "
                         "--calibration DIR or more data")
    if isinstance(n_calib, bool) or int(n_calib) < 1:
        raise UsageError(f"the calibration split needs at least 1 sample, got {n_calib!r}")
    k = min(int(n_calib), n // 2)
    calib_idx = sorted(selection_order(n, data.labels, seed)[:k])
    chosen = set(calib_idx)
    eval_idx = [i for i in range(n) if i not in chosen]
    capped = f" ({n_calib} asked; at most half the data calibrates)" if k < int(n_calib) else ""
    used = "parity and accuracy" if data.labels is not None else "parity"
    ev = data.subset(eval_idx, f"{data.description}; split (seeded, disjoint): {len(eval_idx)} for "
                               f"evaluation ({used}), {k} held out for int8 calibration{capped}")
    ca = data.subset(calib_idx, f"{k} calibration samples{capped}, disjoint from the {len(eval_idx)} "
                                f"evaluated, of: {data.description}")
    ca.skipped, ca.skipped_examples = 0, ()
    return ev, ca
