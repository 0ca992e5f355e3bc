"""A module of a known architecture holding a state dict's tensors, without the random initialisation that the
state dict overwrites (issue 37, start-up).

``build()`` then ``load_state_dict`` draws every parameter at random (Kaiming initialisation of 25.6 million
values for ResNet-50) and copies the file's tensors over them: 0.3-0.8 s on the development machine, paid by
every PyTorch configuration's load (``models.rebuild``) and by the comparison's own process before measuring.
Here the module is built on PyTorch's meta device (shapes only, no data, no initialisation) and given the
loaded tensors themselves (``load_state_dict(assign=True)``): the same values, dtypes and shapes, contiguous
as before, so what a row measures does not change; only its load gets shorter.

Built and copied into as before wherever that path cannot give the same module: a PyTorch without the meta
device context or ``assign``; a state dict that does not fit (the old path raises its usual error); a
non-contiguous tensor in the file (the copy made it contiguous); a tensor that the constructor computes and
the state dict lacks (a non-persistent buffer, a plain tensor attribute: it would stay on the meta device).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def with_state_dict(build: Callable[[], Any], state_dict: Mapping[str, Any]) -> Any:
    """The module ``build()`` makes, holding ``state_dict``'s values
    (not in eval mode: the caller decides)."""
    model = _assigned(build, state_dict)
    if model is None:
        model = build()
        model.load_state_dict(state_dict)
    return model


def _assigned(build: Callable[[], Any], state_dict: Mapping[str, Any]) -> Any:
    """Built on the meta device and given the state dict's tensors; None where that would not be the module
    the old path makes."""
    import torch

    if not all(t.is_contiguous() for t in state_dict.values() if isinstance(t, torch.Tensor)):
        return None
    try:
        with torch.device("meta"):
            model = build()
        model.load_state_dict(state_dict, assign=True)
    except Exception:  # noqa: BLE001 - any failure here: the old path, which raises its own errors
        return None
    return None if meta_left(model) else model


def meta_left(model: Any) -> list[str]:
    """The names of the module's tensors still on the meta device (parameters, buffers, and tensors kept as
    plain attributes of its submodules, also inside a list, tuple or dict)."""
    import torch

    left = [n for n, t in (*model.named_parameters(), *model.named_buffers()) if t.is_meta]
    for name, sub in model.named_modules():
        for attr, value in vars(sub).items():
            if attr.startswith("_"):  # _parameters, _buffers (named above), _modules, hooks
                continue
            items = (value.values() if isinstance(value, dict)
                     else value if isinstance(value, list | tuple) else [value])
            if any(isinstance(v, torch.Tensor) and v.is_meta for v in items):
                left.append(f"{name}.{attr}" if name else attr)
    return left
