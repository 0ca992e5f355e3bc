"""The float file run once on the conversion sample beside the module it was converted from (the converter child's
part; convert.py calls it), so that a file the conversion got wrong says so before any parity sample runs.

Measured (2-core EPYC, litert-torch 0.10.0, torch 2.14.1, 2026-11-27; /tmp scripts, not kept): RapidOCR's PP-OCRv4
text recognizer (onnx2torch's module of the ONNX file), converted by ``litert_torch.convert``, gave files off by
0.17-0.95 of the module's largest output, with NHWC input (``to_channel_last_io``) or without, differing from one
conversion to the next (three in one process: 0.95, 0.93, 0.93); ``torch.export`` of the same module agreed with
ONNX Runtime to 1.9e-6, so the error comes after the export, in litert-torch's lowering or TFLite's kernels. Other
converter children got it right (4.1e-6). Some conversions in a process that had run the module eagerly agreed to
1e-5-2.4e-5, but not in the converter child (0.64-0.68 after such a run): the cause was not found. So the exporter
converts again in a fresh process while the file is off (export.py, ``CONVERT_TRIES``), and a file still off says
so in its notes; its rows' parity judges it on every parity sample.
"""

from __future__ import annotations

from typing import Any

# fp32 files agreed with their modules to about 2.5e-5 of the largest output (the recognizer above, when right)
DIVERGED = 1e-3


def layout_io(model: Any, calib: list[Any]) -> tuple[Any, tuple, list[Any], list[bool]]:
    """(the module to convert, its batch-1 sample, the calibration feeds, which inputs are NHWC): image inputs
    (4-D float, 1 or 3 channels) NHWC in the file, as TFLite and the Edge TPU expect."""
    import litert_torch
    import numpy as np
    import torch

    cl = [c.ndim == 4 and c.dtype.kind == "f" and c.shape[1] in (1, 3) for c in calib]
    feeds = [torch.from_numpy(np.ascontiguousarray(c.transpose(0, 2, 3, 1) if x else c))
             for c, x in zip(calib, cl, strict=True)]
    sample = tuple(f[:1] for f in feeds)  # static batch 1: dynamic batch fails in litert-torch 0.10 (JAX shapes)
    idx = [i for i, x in enumerate(cl) if x]
    wrapped = litert_torch.to_channel_last_io(model, args=idx) if idx else model
    try:
        wrapped = wrapped.eval()
    except NotImplementedError:  # an ExportedProgram's module has no train/eval modes: it is inference-only
        pass
    return wrapped, sample, feeds, cl


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
    """The options that record the check: ``off_its_module`` (the error over the largest output), where measured."""
    err = off_by(edge, module, sample)
    return {} if err is None else {"off_its_module": float(f"{err:.3g}")}
