"""Preparing the fp32 ONNX file for onnxruntime.quantization (export.py quantizes it): dynamic sizes
fixed to the measured ones, an old opset raised to 13, the nodes --onnx-int8-exclude names, and a
detector's decoding tail left in float (models/onnx_heads.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infer_compare.base.batches import is_multi
from infer_compare.base.errors import ExportError
from infer_compare.models.onnx_heads import output_tails

PER_CHANNEL_OPSET = 13  # DequantizeLinear's axis (per-channel weights) exists from opset 13


def fix_sizes(src: str, calib, out: Path) -> tuple[str, dict[str, Any]]:
    """(``src``, {}) when the quantizer can take the file as it is; else a copy saved as ``out`` and what
    changed: each dynamic dimension other than the batch (the symbols of the inputs' first axes) set to the
    size the calibration inputs have, as --input-shape or --data gave it ({"sizes": {input: shape}}), and
    an opset below 13 converted to 13 (the quantizer writes per-channel DequantizeLinear with an axis,
    which older opsets lack: onnx.checker rejects it) ({"opset": "12 -> 13"})."""
    import onnx

    m = onnx.load(src, load_external_data=False)
    external = any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer)
    if external:
        m = onnx.load(src)
    done: dict[str, Any] = {}
    sizes = _set_sizes(m, calib)
    if sizes:
        done["sizes"] = sizes
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), PER_CHANNEL_OPSET)
    if opset < PER_CHANNEL_OPSET:
        m = onnx.version_converter.convert_version(m, PER_CHANNEL_OPSET)
        done["opset"] = f"{opset} -> {PER_CHANNEL_OPSET}"
    if not done:
        return src, {}
    onnx.save(m, str(out), save_as_external_data=external, location=out.name + ".data")
    return str(out), done


def _set_sizes(m, calib) -> dict[str, str]:
    """Sets, in ``m``, every dynamic input dimension but the batch to the calibration inputs' size."""
    arrays = calib if is_multi(calib) else {None: calib}
    weights = {t.name for t in m.graph.initializer}
    inputs = [vi for vi in m.graph.input if vi.name not in weights]
    batch = {vi.type.tensor_type.shape.dim[0].dim_param for vi in inputs
             if len(vi.type.tensor_type.shape.dim)}
    done: dict[str, str] = {}
    for vi in inputs:
        a = arrays.get(vi.name, arrays.get(None) if len(inputs) == 1 else None)
        dims = vi.type.tensor_type.shape.dim
        if a is None or a.ndim != len(dims):
            continue
        free = [i for i, d in enumerate(dims)
                if i and not d.HasField("dim_value") and d.dim_param not in batch]
        for i in free:
            dims[i].dim_value = int(a.shape[i])
        if free:
            done[vi.name] = "x".join(str(d.dim_value) if d.HasField("dim_value") else "N" for d in dims)
    return done


def excluded_nodes(pre: Path, asked: list[str]) -> list[str]:
    """The node names of ``pre`` that --onnx-int8-exclude names, by node name or op type; an entry that
    matches no node is an ExportError (a misspelt name would otherwise build the same file silently)."""
    import onnx

    if not asked:
        return []
    nodes = onnx.load(str(pre), load_external_data=False).graph.node
    names = [n.name for n in nodes if n.name in asked or n.op_type in asked]
    missing = [a for a in asked if not any(a in (n.name, n.op_type) for n in nodes)]
    if missing:
        raise ExportError(f"--onnx-int8-exclude {', '.join(missing)}: no node of that name or op type in "
                          "the graph being quantized (after quant_pre_process)")
    return names


def _span(ranges, name: str) -> float | None:
    """The largest |value| calibration saw in tensor ``name`` (None when it has no range)."""
    import numpy as np

    try:
        lo, hi = ranges[name].range_value
    except (KeyError, AttributeError, TypeError, ValueError):
        return None
    return float(np.max(np.abs(np.concatenate([np.ravel(lo), np.ravel(hi)]))))


def mixed_scale_tails(pre: Path, ranges) -> tuple[list[str], str]:
    """models/onnx_heads.py's tails, decided on the calibrated ranges of each output Concat's inputs."""
    return output_tails(str(pre), lambda name: _span(ranges, name))
