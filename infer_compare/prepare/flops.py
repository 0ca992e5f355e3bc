"""Model FLOPs: :func:`count_flops` counts the forward pass of a PyTorch model at batch 1 with
``torch.utils.flop_counter.FlopCounterMode`` (convolutions, matrix products, attention: 2 FLOPs per
multiply-add; element-wise ops, normalisation and pooling are not counted, as in fvcore and the papers'
"FLOPs" figures). The efficiency figures derived from them are in report/efficiency.py.

Nothing here imports torch at import time.
"""

from __future__ import annotations

FLOPS_SOURCE = ("torch.utils.flop_counter.FlopCounterMode, batch 1 (2 FLOPs per multiply-add; "
                "conv/matmul only)")


def count_flops(model, input_shape) -> tuple[float | None, str]:
    """(FLOPs of one forward pass per image, how it was counted); (None, reason) when it cannot be counted.

    ``input_shape`` is (C, H, W). The model is run once at batch 1 on the CPU in
    inference mode; the model is not modified.
    """
    try:
        import torch
        from torch.utils.flop_counter import FlopCounterMode
    except Exception as e:  # torch missing or too old (< 2.1)
        return None, f"not counted: {type(e).__name__}: {e}"
    try:
        x = torch.zeros((1, *tuple(int(d) for d in input_shape)), dtype=torch.float32)
        try:
            dev = next(model.parameters()).device
            x = x.to(dev)
        except StopIteration:
            pass
        was_training = bool(getattr(model, "training", False))
        model.eval()
        try:
            counter = FlopCounterMode(display=False)
            with torch.inference_mode(), counter:
                model(x)
        finally:
            if was_training:
                model.train()
        total = float(counter.get_total_flops())
    except Exception as e:  # a model FlopCounterMode cannot trace: report, don't fail the run
        msg = (str(e).strip().splitlines() or [""])[0][:200]
        return None, f"not counted: {type(e).__name__}: {msg}"
    if total <= 0:
        return None, "not counted: FlopCounterMode found no convolution or matrix product"
    return total, FLOPS_SOURCE
