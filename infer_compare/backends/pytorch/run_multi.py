"""PyTorch with several inputs or outputs: the inputs as a tuple of tensors in the model's order
(each in its own dtype: int64 ids stay int64), passed as the model's arguments; the outputs (a
tuple, list or dict of tensors) read back by the names the reference gives them. A model with one
input and one output takes run.py's and run_cuda.py's own path, unchanged."""

from __future__ import annotations

from typing import Any

import numpy as np

from infer_compare.base.batches import is_multi
from infer_compare.models.user_torch import flatten_outputs


def host_tensors(torch: Any, batch: Any) -> Any:
    """One CPU tensor (one input, as before), or a tuple of them for {input name: array}."""
    if is_multi(batch):
        return tuple(torch.from_numpy(np.ascontiguousarray(v)) for v in batch.values())
    return torch.from_numpy(np.ascontiguousarray(batch))


def on_device(x: Any, device: Any) -> Any:
    """A tensor, or each tensor of a tuple, copied to ``device`` without blocking."""
    if isinstance(x, tuple):
        return tuple(t.to(device, non_blocking=True) for t in x)
    return x.to(device, non_blocking=True)


def to_host(out: Any) -> Any:
    """The model's outputs (a tensor, or a tuple/list/dict of them, nested) copied to the host without
    blocking."""
    if hasattr(out, "is_floating_point"):  # a tensor: the one-output path
        return out.to("cpu", non_blocking=True)
    if isinstance(out, dict):
        return {k: to_host(v) for k, v in out.items()}
    if isinstance(out, tuple | list):
        items = [to_host(v) for v in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)  # a namedtuple takes fields
    return out


def outputs_numpy(outputs: Any) -> dict[str, np.ndarray]:
    """{output name: float32 array}, the names models.user_torch.flatten_outputs gives the reference."""
    return {k: t.detach().float().cpu().numpy() for k, t in flatten_outputs(outputs)}
