"""torchvision classification models (ResNet, MobileNet v2/v3, and any other
torchvision classification model by name). Pretrained weights come only from the
local torch hub cache: nothing is downloaded."""

from __future__ import annotations

import os


def classification_names() -> list[str]:
    import torchvision

    return sorted(torchvision.models.list_models(module=torchvision.models))


def default_weights(name: str):
    from torchvision.models import get_model_weights

    try:
        return get_model_weights(name).DEFAULT
    except (ValueError, KeyError, AttributeError):
        return None


def cached_weights_file(name: str) -> tuple[str | None, str]:
    """(path of the cached pretrained file or None, where it was looked for)."""
    import torch

    w = default_weights(name)
    if w is None:
        return None, "torchvision has no pretrained weights for it"
    path = os.path.join(torch.hub.get_dir(), "checkpoints", os.path.basename(w.url))
    return (path if os.path.isfile(path) else None), path


def preprocessing(name: str) -> dict:
    w = default_weights(name)
    if w is None:
        return {}
    t = w.transforms()
    out = {}
    for attr, key in (("resize_size", "resize"), ("crop_size", "crop")):
        v = getattr(t, attr, None)
        if v:
            out[key] = int(v[0])
    for attr in ("mean", "std"):
        v = getattr(t, attr, None)
        if v:
            out[attr] = tuple(float(a) for a in v)
    interp = getattr(t, "interpolation", None)
    if interp is not None:
        out["interpolation"] = str(getattr(interp, "value", interp)).lower()
    return out


def build(name: str, num_classes: int = 1000):
    import torchvision

    return torchvision.models.get_model(name, weights=None, num_classes=num_classes)
