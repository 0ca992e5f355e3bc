"""Two guards of the converter child (convert.py calls them) against a file that computes something else than
the module it was converted from.

Found on RapidOCR's PP-OCRv4 text recognizer (onnx2torch's module of the ONNX file; 2-core EPYC, litert-torch
0.10.0, torch 2.14.1, 2026-11-27; /tmp scripts, not kept): ``litert_torch.convert`` gave files off by
0.17-0.95 of the module's largest output in some processes and right (2.5e-5) in others, NHWC or not, while
``torch.export`` of the module agreed with ONNX Runtime to 1.9e-6. Running two files on one input with every
tensor kept, the first output that differed was a FULLY_CONNECTED's: its weight in the wrong file was another
layer's of the same shape (``p2o/MatMul/10``'s in place of ``p2o/MatMul/22``'s). litert-torch's constant cache
(backend/inline_consts.py, ``_ConstantFingerprint``) keys a constant by its storage's ``data_ptr``, shape,
stride and offset after ``.contiguous()``; onnx2torch keeps a Linear's weight as the transposed view of the
ONNX MatMul's (9 such weights here), so each is copied into a temporary, freed after use, whose address the
next same-shape weight's temporary may get: the cache then hands back the first weight. Hence:

* :func:`contiguous_constants`: every parameter and buffer laid out contiguously in storage of its own before
the
  conversion, so no temporary is made;
* :func:`checked`: each float file run once on the sample beside its module, its error kept
(``off_its_module``);
  a file over :data:`DIVERGED` says so in its notes (export.py). int8 files are not checked this way (their
  own rounding hides such an error; their parity judges them).
"""

from __future__ import annotations

from typing import Any

# fp32 files agreed with their modules to 2e-5-4e-6 of the largest output (the recognizer above, ResNet-50)
DIVERGED = 1e-3


def contiguous_constants(module: Any) -> int:
    """Every parameter and buffer of ``module`` made contiguous in storage of its own (shared parameters stay
    shared); how many were not."""
    n = 0
    for p in module.parameters():
        if not p.is_contiguous():
            p.data = p.data.contiguous()
            n += 1
    for mod in module.modules():
        for name, b in list(mod._buffers.items()):
            if b is not None and not b.is_contiguous():
                mod._buffers[name] = b.contiguous()
                n += 1
    return n


def off_by(edge: Any, module: Any, sample: tuple) -> float | None:
    """The converted model's largest output error on ``sample`` over the module's largest |output|; None where
    the outputs cannot be paired here (another count or shape: io_map pairs them later)."""
    import numpy as np
    import torch

    # deferred: the conversion child's start stays light without it (+1 module)
    from infer_compare.backends.tflite.convert_onnx import flat

    with torch.no_grad():
        want = [o.numpy() for o in flat(module(*sample))]
    got = edge(*[s.numpy() for s in sample])
    got = [np.asarray(g) for g in (got if isinstance(got, list | tuple) else [got])]
    if len(got) != len(want) or any(g.shape != w.shape for g, w in zip(got, want, strict=True)):
        return None
    scale = max(float(np.abs(w).max()) for w in want) or 1.0
    return max(float(np.abs(g.astype(np.float64) - w).max()) for g, w in zip(got, want, strict=True)) / scale


def checked(edge: Any, module: Any, sample: tuple) -> dict[str, Any]:
    """The options that record the check: ``off_its_module`` (the error over the largest output), where
    measured."""
    err = off_by(edge, module, sample)
    return {} if err is None else {"off_its_module": float(f"{err:.3g}")}
