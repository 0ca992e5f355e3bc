"""The inputs of a model: the user's data options (``--data``, ``--labels``, ``--calibration``,
``--max-images``, the preprocessing overrides, ``--input-value``), read from folders and arrays
(data/user/) or, for an image input, made from the bundled photos (data/bundled.py), into the
evaluation and calibration sets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infer_compare.base.errors import UsageError
from infer_compare.base.progress import Progress
from infer_compare.data.bundled import DataSets, photo_sets
from infer_compare.data.user import (
    PreprocessSpec,
    apply,
    check_folder_classes,
    from_preprocess,
    imagenet_defaults,
    load_data,
    preprocess_spec,
    split_eval_calibration,
)
from infer_compare.data.user.checks import changed_values, converted


@dataclass(frozen=True)
class DataOptions:
    """Where the inputs come from and how images become inputs (the CLI's data flags)."""

    data: str | None = None  # --data: an image folder (ImageFolder or flat), a .npy or .npz file
    labels: str | None = None  # --labels: folder name -> class index
    calibration: str | None = None  # --calibration: int8 calibration data (default: a split of --data)
    max_images: int | None = None
    # resize, crop, mean, std, layout, bgr, scale, letterbox
    overrides: dict[str, Any] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)  # --input-value NAME=VALUE: inputs fed as given


def image_spec_of(inp, opts: DataOptions):
    """The preprocessing of ``inp`` if it is an image input (one float32 or uint8 input of shape C x H x W
    or H x W x C with 1 or 3 channels, any H and W: ImageNet defaults for its shape, raw 0..255 pixels for
    uint8, the user's overrides), else None."""
    from dataclasses import replace

    sample = tuple(inp.shape[1:])
    if len(sample) != 3 or inp.dtype not in ("float32", "uint8") or not ({sample[0], sample[-1]} & {1, 3}):
        return None
    spec = imagenet_defaults(sample)
    if inp.dtype == "uint8":
        spec = replace(spec, scale=1.0, mean=(0.0,) * spec.channels, std=(1.0,) * spec.channels,
                       source="raw 0..255 pixels (the input is uint8)")
    return preprocess_spec(spec, **opts.overrides)


def _image_spec(um, opts: DataOptions):
    """The preprocessing of a model with one input that is an image, or None."""
    return image_spec_of(um.inputs[0], opts) if len(um.inputs) == 1 else None


def as_input_dtype(a: np.ndarray, dtype: str) -> np.ndarray:
    """Preprocessed pixels in the input's dtype (uint8: rounded and clipped to 0..255)."""
    if np.dtype(dtype) == np.uint8:
        return np.clip(np.rint(a), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(a, dtype=dtype)


def bundled_photos(spec, n_eval: int, n_calib: int, seed: int, dtype: str = "float32") -> DataSets:
    """The bundled photos, preprocessed as ``spec`` says (size or letterbox, channels, channel order,
    layout, pixel scale), in the input's ``dtype``."""
    ds = photo_sets(lambda region: apply(region, spec), n_eval=n_eval, n_calib=n_calib, seed=seed,
                    how=f"preprocessing: {spec.describe()}")
    ds.eval, ds.calibration = as_input_dtype(ds.eval, dtype), as_input_dtype(ds.calibration, dtype)
    return ds


def _one_input(images: Any, where: str) -> np.ndarray:
    """The array of a model's one input (a .npz holding exactly one array gives it too)."""
    if not isinstance(images, dict):
        return images
    if len(images) != 1:
        raise UsageError(f"{where} holds {len(images)} inputs ({', '.join(images)}); the model has one")
    return next(iter(images.values()))


def data_sets(shape: tuple[int, ...], opts: DataOptions, spec, n_calib: int, seed: int, prog: Progress,
              num_classes: int | None = None, dtype: str = "float32") -> DataSets:
    """The user's data (--data, --calibration) as DataSets for inputs of ``shape`` (one sample); class
    folders without --labels must be as many as the model's ``num_classes`` (check_folder_classes);
    images come in the input's ``dtype``."""
    images = spec is not None
    spec = spec or PreprocessSpec(source="not used: array inputs")
    prog.task(f"reading {opts.data}")
    data = load_data(opts.data, preprocess=spec, input_shape=shape, max_images=opts.max_images,
                     labels_file=opts.labels, progress=lambda done, total: None, seed=seed)
    data.images = _one_input(data.images, opts.data)
    check_folder_classes(data, num_classes, opts.data)
    if opts.calibration:
        calib = load_data(opts.calibration, preprocess=spec, input_shape=shape, seed=seed)
        calib.images = _one_input(calib.images, opts.calibration)
        ev = data
    else:
        ev, calib = split_eval_calibration(data, n_calib=min(n_calib, max(1, len(data) // 2)), seed=seed)
    if data.skipped:
        prog.warn(f"{data.skipped} file(s) in {opts.data} could not be decoded and were skipped "
                  f"(e.g. {'; '.join(data.skipped_examples[:2])})")
    notes: list[str] = []
    evx = model_dtype(ev.images, dtype, images, data.arrays, notes)
    cax = model_dtype(calib.images, dtype, images, calib.arrays, notes)
    said = "; ".join(dict.fromkeys(notes))
    return DataSets(calibration=cax, eval=evx, eval_labels=ev.labels,
                    description=ev.description + (f"; all {len(ev)} evaluated; int8 calibration: "
                                                  f"{calib.description}" if opts.calibration else "")
                    + (f"; converted to the model's input dtype: {said}" if said else ""))


def model_dtype(x: Any, dtype: str, images: bool, arrays: bool, notes: list[str]) -> np.ndarray:
    """The inputs in the model input's ``dtype``: decoded pixels through ``as_input_dtype``; arrays (a .npy or
    .npz) converted where numpy casts them within their kind, what that did added to ``notes`` ("int8 ->
    float32 (values kept exactly)"), else left as given (the reference refuses them in one line)."""
    a = np.asarray(x)
    if not arrays:
        return as_input_dtype(a, dtype) if images else a
    if np.can_cast(a.dtype, dtype, "same_kind"):
        out, said = converted(a, dtype)
        notes += [said] if said else []
        return out
    if not images:
        return a
    out = as_input_dtype(a, dtype)
    n, _ = changed_values(a, out)
    notes.append(f"{a.dtype} -> {dtype} (rounded and clipped to 0..255: {n} of {a.size} values changed)"
                 if n else f"{a.dtype} -> {dtype} (values kept exactly)")
    return out


def builtin_data_sets(spec, opts: DataOptions, calibration_samples: int | None, seed: int,
                      prog: Progress) -> DataSets:
    """A built-in model on the user's data: its own transforms, with the user's overrides."""
    pre = preprocess_spec(from_preprocess(spec.preprocess, f"{spec.name}'s transforms"), **opts.overrides)
    return data_sets(tuple(spec.input_shape), opts, pre, calibration_samples or 64, seed, prog,
                     spec.num_classes)
