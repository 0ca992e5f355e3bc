"""Real inputs that ship inside packages: no downloads, never random noise.

- Photos: scikit-image's bundled images and scikit-learn's two sample photos,
  preprocessed with the model's own transforms (shorter side resized, centre crop,
  mean/std normalisation). Several seeded crops per photo give distinct inputs.
  Evaluation (parity) crops come from photos that calibration never sees.
- Digits: scikit-learn's 8x8 handwritten digits, resized to 32x32 (bilinear) and
  scaled to [0, 1], split 1347 train / 450 test (stratified, seed 0), for LeNet-5.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infer_compare.base.batches import digest_update
from infer_compare.catalog import deps

# Held-out photos for parity/evaluation; the rest calibrate (int8) and re-estimate BatchNorm.
EVAL_PHOTOS = ("chelsea", "coffee", "rocket", "astronaut", "sklearn:china", "stereo_motorcycle")
CALIB_PHOTOS = (
    "cat", "sklearn:flower", "hubble_deep_field", "immunohistochemistry", "retina", "colorwheel",
    "camera", "brick", "grass", "gravel", "coins", "moon", "clock", "text", "page", "logo",
)


@dataclass(frozen=True)
class Preprocess:
    kind: str = "imagenet"  # "imagenet" (photos) or "digits"
    resize: int = 256
    crop: int = 224
    mean: tuple[float, ...] = (0.485, 0.456, 0.406)
    std: tuple[float, ...] = (0.229, 0.224, 0.225)
    channels: int = 3
    interpolation: str = "bilinear"

    def as_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Preprocess:
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()})


@dataclass
class DataSets:
    # N, C, H, W float32; a model with several inputs: {input name: N x ...} (base/batches.py)
    calibration: np.ndarray
    eval: np.ndarray
    eval_labels: np.ndarray | None = None
    train: np.ndarray | None = None
    train_labels: np.ndarray | None = None
    description: str = ""
    sources: dict[str, Any] = field(default_factory=dict)

    def digest(self) -> str:
        h = hashlib.sha256()
        for a in (self.calibration, self.eval, self.eval_labels):
            digest_update(h, a)
        return h.hexdigest()[:16]


def _photo(name: str) -> np.ndarray:
    if name.startswith("sklearn:"):
        deps.require("sklearn", "sample photos")
        from sklearn.datasets import load_sample_image

        im = load_sample_image(name.split(":", 1)[1] + ".jpg")
    else:
        deps.require("skimage", "sample photos")
        import skimage.data

        im = getattr(skimage.data, name)()
        if isinstance(im, tuple):
            im = im[0]
    im = np.asarray(im)
    if im.dtype == bool:
        im = im.astype(np.uint8) * 255
    if im.ndim == 2:
        im = np.stack([im] * 3, axis=-1)
    return np.ascontiguousarray(im[..., :3].astype(np.uint8))


def _preprocess(region, pre: Preprocess) -> np.ndarray:
    from PIL import Image

    interp = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC,
              "nearest": Image.NEAREST}[pre.interpolation]
    w, h = region.size
    s = pre.resize / min(w, h)
    region = region.resize((max(pre.crop, round(w * s)), max(pre.crop, round(h * s))), interp)
    w, h = region.size
    left, top = (w - pre.crop) // 2, (h - pre.crop) // 2
    region = region.crop((left, top, left + pre.crop, top + pre.crop))
    a = np.asarray(region, dtype=np.float32) / 255.0
    if pre.channels == 1:
        a = a.mean(axis=2, keepdims=True)
    a = ((a - np.asarray(pre.mean[: pre.channels], np.float32))
         / np.asarray(pre.std[: pre.channels], np.float32))
    return a.transpose(2, 0, 1).copy()


def photo_crops(names: tuple[str, ...], n: int, pre: Preprocess | Callable[[Any], np.ndarray],
                seed: int) -> tuple[np.ndarray, list[str]]:
    """``n`` preprocessed crops, spread over ``names``: first the full photo, then
    seeded random crops (area 20-100 %, aspect 3/4-4/3). ``pre``: a Preprocess, or a function of
    one PIL image that gives one sample (the user's preprocessing, data.user.apply)."""
    from PIL import Image

    prep = pre if callable(pre) else (lambda region: _preprocess(region, pre))

    rng = np.random.default_rng(seed)
    photos = [Image.fromarray(_photo(nm)) for nm in names]
    out, src = [], []
    i = 0
    while len(out) < n:
        k = i % len(photos)
        img = photos[k]
        W, H = img.size
        if i < len(photos):
            box = (0, 0, W, H)
        else:
            area = rng.uniform(0.2, 1.0) * W * H
            ratio = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
            w = int(min(W, round(np.sqrt(area * ratio))))
            h = int(min(H, round(np.sqrt(area / ratio))))
            x0 = int(rng.integers(0, W - w + 1))
            y0 = int(rng.integers(0, H - h + 1))
            box = (x0, y0, x0 + w, y0 + h)
        out.append(prep(img.crop(box)))
        src.append(f"{names[k]}{list(box)}")
        i += 1
    return np.stack(out).astype(np.float32), src


def photo_sets(pre: Preprocess | Callable[[Any], np.ndarray], n_eval: int, n_calib: int, seed: int = 0,
               how: str | None = None) -> DataSets:
    """Evaluation and calibration crops; ``how`` describes a callable ``pre``."""
    ev, ev_src = photo_crops(EVAL_PHOTOS, n_eval, pre, seed)
    ca, ca_src = photo_crops(CALIB_PHOTOS, n_calib, pre, seed + 1)
    how = how or f"resize {pre.resize}, centre crop {pre.crop}, ImageNet mean/std"  # type: ignore[union-attr]
    return DataSets(
        calibration=ca,
        eval=ev,
        description=(
            f"{n_eval} evaluation crops of {len(EVAL_PHOTOS)} held-out photos and {n_calib} calibration "
            f"crops of {len(CALIB_PHOTOS)} other photos (scikit-image / scikit-learn bundled images), {how}"
        ),
        sources={"eval": ev_src, "calibration": ca_src},
    )


def digits(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test): N,1,32,32 float32 in [0, 1]."""
    deps.require("sklearn", "the digits data set")
    from PIL import Image
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    imgs = np.stack(
        [np.asarray(Image.fromarray(im.astype(np.float32), mode="F").resize((32, 32), Image.BILINEAR))
         for im in d.images]
    )
    x = (imgs / 16.0).clip(0, 1).astype(np.float32)[:, None]
    xtr, xte, ytr, yte = train_test_split(x, d.target, test_size=450, random_state=seed, stratify=d.target)
    return xtr, ytr.astype(np.int64), xte, yte.astype(np.int64)


def digit_sets(n_calib: int = 200, seed: int = 0) -> DataSets:
    xtr, ytr, xte, yte = digits(seed)
    return DataSets(
        calibration=xtr[:n_calib],
        eval=xte,
        eval_labels=yte,
        train=xtr,
        train_labels=ytr,
        description=(
            "scikit-learn digits, 8x8 resized to 32x32 (bilinear), scaled to [0, 1]; "
            f"{len(xtr)} train / {len(xte)} test (stratified, seed {seed}); "
            f"calibration = first {n_calib} train digits"
        ),
    )
