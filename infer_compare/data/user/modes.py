"""Images of other kinds than 8-bit RGB or grayscale, brought to 8 bits per channel faithfully, each
step named so that the data description can say what was done:

* 16-bit grayscale (PNG/TIFF ``I;16*``, or ``I`` of values up to 65535) is scaled by its full range
  (value / 257), never clipped (PIL's own ``convert`` saturates every value above 255 to white);
  32-bit integer images with larger values and float images (``F``) are scaled by their own maximum
  (floats already in 0..1 by 255);
* an EXIF orientation is applied, as viewers show the photo;
* CMYK goes through its embedded ICC profile to sRGB where it has one (else PIL's plain formula, said);
* palette images with transparency and images with an alpha channel lose the alpha (the colours
  under it are kept, as PIL's ``convert("RGB")`` does): said, since a transparent area has no
  colour a model was trained on.
"""

from __future__ import annotations

from typing import Any

SIXTEEN_BIT = ("I;16", "I;16B", "I;16L", "I;16N")


def standard(img: Any) -> tuple[Any, list[str]]:
    """(an image in a mode PIL converts to L/RGB without loss of meaning, what was done to it)."""
    from PIL import ImageOps

    notes: list[str] = []
    orientation = img.getexif().get(0x0112, 1) if hasattr(img, "getexif") else 1
    if orientation not in (1, None):
        img = ImageOps.exif_transpose(img)
        notes.append("rotated or flipped per its EXIF orientation")
    if img.mode in SIXTEEN_BIT or img.mode in ("I", "F"):
        img, note = _to_8bit(img)
        notes.append(note)
    elif img.mode == "CMYK":
        img, note = _cmyk(img)
        notes.append(note)
    elif img.mode in ("RGBA", "LA", "PA", "La", "RGBa") or (img.mode == "P" and "transparency" in img.info):
        notes.append("alpha channel dropped (the colours under it kept)")
    return img, notes


def _to_8bit(img: Any) -> tuple[Any, str]:
    import numpy as np
    from PIL import Image

    a = np.asarray(img)
    a = a.astype(np.float64)
    finite = a[np.isfinite(a)]
    top = float(finite.max()) if finite.size else 0.0
    low = float(finite.min()) if finite.size else 0.0
    if img.mode in SIXTEEN_BIT or (img.mode == "I" and low >= 0 and top <= 65535):
        scale, note = 255 / 65535, "16-bit grayscale scaled to 8 bits (value / 257)"
    elif img.mode == "F" and low >= 0 and top <= 1:
        scale, note = 255.0, "float grayscale in 0..1 scaled to 8 bits (value x 255)"
    else:
        scale = 255 / top if top > 0 else 1.0
        note = f"{'float' if img.mode == 'F' else '32-bit'} grayscale scaled by its maximum {top:g} to 8 bits"
    a = np.clip(np.nan_to_num(a * scale, nan=0.0), 0, 255)
    return Image.fromarray(np.rint(a).astype(np.uint8), mode="L"), note


def _cmyk(img: Any) -> tuple[Any, str]:
    icc = img.info.get("icc_profile")
    if icc:
        try:
            import io

            from PIL import ImageCms

            src = ImageCms.ImageCmsProfile(io.BytesIO(icc))
            out = ImageCms.profileToProfile(img, src, ImageCms.createProfile("sRGB"), outputMode="RGB")
            return out, "CMYK converted to sRGB through its ICC profile"
        except Exception:  # a broken or unsupported profile: the plain formula below, said
            pass
    return img.convert("RGB"), "CMYK converted to RGB without a colour profile (colours approximate)"
