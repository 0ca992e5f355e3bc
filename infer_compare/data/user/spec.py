"""Preprocessing of the user's images: the spec, its defaults, the user's overrides, the math.

The math is data/bundled.py's photo preprocessing (``data._preprocess``), generalised: shorter side
resized to ``resize`` (the long side rounded, never below ``crop``), centre crop with the
offsets rounded down, raw pixels times ``scale``, then ``(x - mean) / std`` per channel in the
model's channel order (after the RGB->BGR swap when ``bgr``), then the layout.

A model whose input is not square (``size`` = its H x W, e.g. 48 x 192) takes the image resized
to cover H x W and centre-cropped to it; with ``letterbox`` (detectors) the image is resized to
fit inside H x W, aspect kept, and centred on a gray (114) canvas, as YOLO-style detectors expect.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import numpy as np

from infer_compare.base.errors import UsageError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# one-channel ImageNet statistics: the means of the three channels' values
IMAGENET_MEAN_GRAY = (0.449,)
IMAGENET_STD_GRAY = (0.226,)
LAYOUTS = ("nchw", "nhwc")
INTERPOLATIONS = ("bilinear", "bicubic", "nearest", "lanczos", "box", "hamming")


@dataclass(frozen=True)
class PreprocessSpec:
    """How one image becomes one input sample; see the module docstring for the order of the steps."""

    resize: int | None = 256  # shorter side; None: no resize
    crop: int | None = 224  # centre crop size; None: no crop
    mean: tuple[float, ...] = IMAGENET_MEAN  # per channel, in the model's channel order
    std: tuple[float, ...] = IMAGENET_STD
    layout: str = "nchw"  # of one batch: "nchw" or "nhwc"
    bgr: bool = False
    scale: float = 1 / 255  # raw 0..255 pixels are multiplied by it before mean/std
    channels: int = 3  # 3: RGB (or BGR); 1: PIL's "L" (luma)
    interpolation: str = "bilinear"
    source: str = "ImageNet defaults"
    # (H, W) of a non-square input: cover and centre-crop (resize/crop unused)
    size: tuple[int, ...] | None = None
    letterbox: bool = False  # fit inside (H, W) (size, else crop x crop), aspect kept, padded with gray 114

    def target(self) -> tuple[int, int] | None:
        """(H, W) of the fitted image (a non-square size or the letterbox), None for resize + crop."""
        if self.size:
            return int(self.size[0]), int(self.size[1])
        return (self.crop, self.crop) if self.letterbox and self.crop else None

    def __post_init__(self) -> None:
        if self.channels not in (1, 3):
            raise UsageError(f"preprocessing: channels must be 1 or 3, got {self.channels}")
        for name in ("mean", "std"):
            v = getattr(self, name)
            if len(v) != self.channels:
                raise UsageError(f"preprocessing: {name} has {len(v)} values for {self.channels} channel(s)")
        if any(not s > 0 for s in self.std):
            raise UsageError(f"preprocessing: std values must be positive, got {list(self.std)}")
        if self.layout not in LAYOUTS:
            raise UsageError(f"preprocessing: layout must be nchw or nhwc, got {self.layout!r}")
        if self.interpolation not in INTERPOLATIONS:
            raise UsageError(f"preprocessing: interpolation must be one of {', '.join(INTERPOLATIONS)}, "
                             f"got {self.interpolation!r}")
        for name in ("resize", "crop"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise UsageError(f"preprocessing: {name} must be a positive integer or None, got {v!r}")
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise UsageError(f"preprocessing: scale must be a positive number, got {self.scale!r}")
        if self.size is not None and (len(self.size) != 2 or any(int(d) < 1 for d in self.size)):
            raise UsageError(f"preprocessing: size must be (height, width), got {self.size!r}")
        if self.letterbox and self.target() is None:
            raise UsageError("preprocessing: --letterbox needs the input's height and width (or --crop)")

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PreprocessSpec:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise UsageError(f"preprocessing: unknown key(s) {', '.join(unknown)}")
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()})

    def describe(self) -> str:
        """One line for the report, e.g. 'resize 256, centre crop 224, scale 1/255, mean ..., RGB, NCHW'."""
        hw = self.target()
        fit = [f"letterbox to {hw[0]}x{hw[1]} (aspect kept, gray 114 padding)" if self.letterbox else
               f"resize to cover {hw[0]}x{hw[1]}, centre crop {hw[0]}x{hw[1]}"] if hw else \
            [f"resize {self.resize}" if self.resize else "no resize",
             f"centre crop {self.crop}" if self.crop else "no crop"]
        parts = [*fit, f"scale {_fmt_scale(self.scale)}",
                 f"mean {_fmt_floats(self.mean)}", f"std {_fmt_floats(self.std)}",
                 "gray" if self.channels == 1 else ("BGR" if self.bgr else "RGB"),
                 self.layout.upper(), self.interpolation]
        return ", ".join(parts) + f" ({self.source})"


def _fmt_floats(v: Sequence[float]) -> str:
    return "(" + ", ".join(f"{x:g}" for x in v) + ")"


def _fmt_scale(s: float) -> str:
    inv = 1 / s
    return f"1/{round(inv)}" if round(inv) > 1 and abs(inv - round(inv)) < 1e-9 * inv else f"{s:g}"


def imagenet_defaults(input_shape: tuple[int, ...]) -> PreprocessSpec:
    """ImageNet preprocessing for a model input of ``input_shape`` (C,H,W or H,W,C; a leading batch
    axis is dropped): crop = H, resize = crop * 256/224 rounded, ImageNet mean/std, scale 1/255."""
    shape = tuple(input_shape)
    if len(shape) == 4:
        shape = shape[1:]
    layout = _layout_of(shape, input_shape)
    c, h = (shape[0], shape[1]) if layout == "nchw" else (shape[2], shape[0])
    c, h = int(c), (-1 if h is None else int(h))
    source = "ImageNet defaults"
    if h < 1:
        h, source = 224, "ImageNet defaults (crop 224: the input's height is dynamic)"
    gray = c == 1
    w = shape[2] if layout == "nchw" else shape[1]
    w = h if w is None or int(w) < 1 else int(w)
    return PreprocessSpec(resize=round(h * 256 / 224), crop=h,
                          mean=IMAGENET_MEAN_GRAY if gray else IMAGENET_MEAN,
                          std=IMAGENET_STD_GRAY if gray else IMAGENET_STD, layout=layout, channels=c,
                          source=source, size=(h, w) if w != h else None)


def _layout_of(shape: tuple, given: tuple) -> str:
    if len(shape) != 3:
        raise UsageError(f"input shape {fmt_shape(given)} is not an image shape (C,H,W or H,W,C); "
                         "give the preprocessing or use .npy/.npz inputs")
    first, last = shape[0] in (1, 3), shape[-1] in (1, 3)
    if first:
        return "nchw"
    if last:
        return "nhwc"
    raise UsageError(f"cannot tell the channel axis of input shape {fmt_shape(given)} (no axis of 1 or 3 "
                     "at either end); give --layout")


def fmt_shape(shape: Sequence) -> str:
    return "x".join("?" if (d is None or (isinstance(d, int) and d < 0)) else str(d) for d in shape)


def from_preprocess(pre: Any, source: str) -> PreprocessSpec:
    """A spec from data.Preprocess (the built-in models' torchvision weights transforms)."""
    mean, std = tuple(pre.mean[: pre.channels]), tuple(pre.std[: pre.channels])
    return PreprocessSpec(resize=pre.resize, crop=pre.crop, mean=mean, std=std, channels=pre.channels,
                          interpolation=pre.interpolation, source=source)


def preprocess_spec(defaults: PreprocessSpec, *, resize=None, crop=None, mean=None, std=None, layout=None,
                    bgr=None, scale=None, letterbox=None) -> PreprocessSpec:
    """``defaults`` with the user's overrides (``None``: keep the default). resize/crop: a positive int,
    or 0 / "none" to switch the step off; mean/std: 1 number (every channel) or one per channel, as a
    sequence or "0.485,0.456,0.406"; layout: "nchw"/"nhwc"; scale: a number or "1/255"."""
    given = {k: v for k, v in dict(resize=resize, crop=crop, mean=mean, std=std, layout=layout, bgr=bgr,
                                   scale=scale, letterbox=letterbox).items() if v is not None}
    if not given:
        return defaults
    new: dict[str, Any] = {}
    for k in ("resize", "crop"):
        if k in given:
            new[k] = _size(k, given[k])
    for k in ("mean", "std"):
        if k in given:
            new[k] = _per_channel(k, given[k], defaults.channels)
    if "layout" in given:
        lay = str(given["layout"]).strip().lower()
        if lay not in LAYOUTS:
            raise UsageError(f"--layout takes nchw or nhwc, got {given['layout']!r}")
        new["layout"] = lay
    if "bgr" in given:
        new["bgr"] = _flag("--bgr", given["bgr"])
    if "scale" in given:
        new["scale"] = _scale(given["scale"])
    if "letterbox" in given:
        new["letterbox"] = _flag("--letterbox", given["letterbox"])
    if "crop" in given and "letterbox" not in new and defaults.size:  # an explicit square crop replaces H x W
        new["size"] = None
    source = f"{defaults.source} with user overrides: {', '.join(given)}"
    return replace(defaults, **new, source=source)


def _size(name: str, v: Any) -> int | None:
    s = str(v).strip().lower()
    if s in ("none", "0", "off"):
        return None
    if isinstance(v, bool) or not re.fullmatch(r"\+?\d+", s):
        raise UsageError(f"--{name} takes a positive integer (or 0 / none to skip the step), got {v!r}")
    return int(s)


def _per_channel(name: str, v: Any, channels: int) -> tuple[float, ...]:
    items = [p for p in re.split(r"[,\s]+", v.strip()) if p] if isinstance(v, str) else list(v)
    try:
        vals = tuple(float(x) for x in items)
    except (TypeError, ValueError):
        raise UsageError(f"--{name} takes comma-separated numbers such as 0.485,0.456,0.406, "
                         f"got {v!r}") from None
    allowed = "1 number" if channels == 1 else "1 or 3 numbers"
    if len(vals) not in {1, channels}:
        raise UsageError(f"--{name} takes {allowed}, got {len(vals)}")
    if not all(math.isfinite(x) for x in vals):
        raise UsageError(f"--{name} takes finite numbers, got {v!r}")
    if name == "std" and any(x <= 0 for x in vals):
        raise UsageError(f"--std takes positive numbers, got {v!r}")
    return vals * channels if len(vals) == 1 else vals


def _flag(name: str, v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"{name} takes true or false, got {v!r}")


def _scale(v: Any) -> float:
    s = str(v).strip()
    try:
        if "/" in s:
            a, b = s.split("/", 1)
            x = float(a) / float(b)
        else:
            x = float(s)
    except (ValueError, ZeroDivisionError):
        raise UsageError(f"--scale takes a positive number such as 0.00392 or 1/255, got {v!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise UsageError(f"--scale takes a positive number such as 0.00392 or 1/255, got {v!r}")
    return x


def apply(img: Any, spec: PreprocessSpec) -> np.ndarray:
    """One decoded PIL image -> one float32 sample (C,H,W for nchw, H,W,C for nhwc)."""
    from PIL import Image

    img = img.convert("L" if spec.channels == 1 else "RGB")
    if spec.target():
        img = _fitted(img, spec)
    elif spec.resize:
        interp = getattr(Image, spec.interpolation.upper())
        w, h = img.size
        s = spec.resize / min(w, h)
        floor = spec.crop or 1
        img = img.resize((max(floor, round(w * s)), max(floor, round(h * s))), interp)
    if spec.crop and not spec.target():
        w, h = img.size
        left, top = (w - spec.crop) // 2, (h - spec.crop) // 2  # outside the image: zero pixels
        img = img.crop((left, top, left + spec.crop, top + spec.crop))
    a = np.asarray(img, dtype=np.float32)
    a = a[:, :, None] if a.ndim == 2 else a
    a = _scaled(a, spec.scale)
    if spec.bgr and spec.channels == 3:
        a = a[:, :, ::-1]
    a = (a - np.asarray(spec.mean, np.float32)) / np.asarray(spec.std, np.float32)
    return np.ascontiguousarray(a.transpose(2, 0, 1) if spec.layout == "nchw" else a)


def _fitted(img: Any, spec: PreprocessSpec) -> Any:
    """``img`` brought to the spec's H x W: covered and centre-cropped, or letterboxed."""
    from PIL import Image

    interp = getattr(Image, spec.interpolation.upper())
    H, W = spec.target() or (0, 0)
    w, h = img.size
    s = (min if spec.letterbox else max)(H / h, W / w)
    rw, rh = max(1, round(w * s)), max(1, round(h * s))
    img = img.resize((rw, rh), interp)
    if not spec.letterbox:
        left, top = (rw - W) // 2, (rh - H) // 2
        return img.crop((left, top, left + W, top + H))
    canvas = Image.new(img.mode, (W, H), 114 if img.mode == "L" else (114, 114, 114))
    canvas.paste(img, ((W - rw) // 2, (H - rh) // 2))
    return canvas


def _scaled(a: np.ndarray, scale: float) -> np.ndarray:
    inv = 1 / scale
    if abs(inv - round(inv)) < 1e-9 * inv:  # 1/255: divide, exactly as data/bundled.py does
        return a / np.float32(round(inv))
    return a * np.float32(scale)
