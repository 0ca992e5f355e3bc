"""The precision each layer of an engine really runs, from TensorRT's IEngineInspector.

The exporter builds with ``ProfilingVerbosity.DETAILED``; the runner binds the
inspector to its execution context (so the shapes of the selected profile are
resolved) and asks for ``get_engine_information(LayerInformationFormat.JSON)``. That
JSON has one record per fused layer: ``LayerType``, ``ParameterType`` (e.g.
``Convolution``), ``Inputs``/``Outputs`` with a ``Format/Datatype`` text such as
"Row major linear FP32", "Channel major FP16 format where channel % 8 == 0",
"Thirty-two wide channel vectorized row major Int8 format." (older releases) or
"Float"/"Half"/"Int8" (newer ones), and ``TacticName``.

A layer's precision is the data type of its first input (the activation it computes
on: an int8 convolution reads Int8, its output may be fp32); an fp32 layer whose
tactic name says ``tf32`` is counted as tf32. The row's ``exec_precision`` lists the
precisions of the convolution and matrix-multiply layers (all layers when there is
none), most frequent first, e.g. ``int8+fp32``.

Nothing here needs TensorRT: it parses the JSON text (tests/test_tensorrt_static.py).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

_TYPE_RE = re.compile(r"\b(fp32|float|fp16|half|bf16|int8|fp8|int4|fp4|int32|int64|uint8|bool)\b",
                      re.IGNORECASE)
_CANON = {"float": "fp32", "half": "fp16"}
# the precisions a row can be labelled with (index and mask types are not compute precisions)
COMPUTE_TYPES = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8", "int4", "fp4")
_HEAVY = ("convolution", "deconvolution", "matrixmultiply", "fullyconnected", "gemm")


def tensor_type(fmt: str) -> str | None:
    """'Row major linear FP16 format' -> 'fp16'; None when the text names no type."""
    m = _TYPE_RE.search(fmt or "")
    if m is None:
        return None
    t = m.group(1).lower()
    return _CANON.get(t, t)


def layer_precision(layer: dict[str, Any]) -> str | None:
    tensors = layer.get("Inputs") or layer.get("Outputs") or []
    for t in tensors:
        if isinstance(t, dict):
            p = tensor_type(str(t.get("Format/Datatype", "")))
            if p is not None:
                if p == "fp32" and "tf32" in str(layer.get("TacticName", "")).lower():
                    return "tf32"
                return p
    return None


def is_heavy(layer: dict[str, Any]) -> bool:
    """A convolution or matrix multiply (the layers that decide speed and accuracy)."""
    kinds = f"{layer.get('ParameterType', '')} {layer.get('LayerType', '')}".lower().replace("_", "")
    return any(k in kinds for k in _HEAVY)


def summarize(info_json: str) -> dict[str, Any]:
    """Counts of layer precisions from the inspector's JSON (see the module docstring)."""
    try:
        data = json.loads(info_json)
    except ValueError as e:
        return {"layer_info": f"unreadable inspector output: {e}"}
    layers = data.get("Layers", []) if isinstance(data, dict) else []
    if layers and not any(isinstance(x, dict) for x in layers):
        return {"layers": len(layers), "layer_info": "layer names only (the engine was not built with "
                                                     "ProfilingVerbosity.DETAILED)"}
    every: Counter[str] = Counter()
    heavy: Counter[str] = Counter()
    untyped = 0
    for layer in (x for x in layers if isinstance(x, dict)):
        p = layer_precision(layer)
        if p is None:
            untyped += 1
            continue
        every[p] += 1
        if is_heavy(layer):
            heavy[p] += 1
    return {
        "layer_info": "IEngineInspector, JSON, ProfilingVerbosity.DETAILED",
        "layers": len(layers),
        "layer_precisions": dict(every.most_common()),
        "heavy_layer_precisions": dict(heavy.most_common()),
        "reformat_layers": sum(1 for x in layers if isinstance(x, dict) and x.get("LayerType") == "Reformat"),
        "layers_without_type": untyped,
    }


def exec_precision(summary: dict[str, Any], requested: str) -> str:
    """'int8+fp32' from a summary; ``requested`` when the inspector named no compute precision."""
    counts = summary.get("heavy_layer_precisions") or summary.get("layer_precisions") or {}
    found = [p for p in counts if p in COMPUTE_TYPES]
    return "+".join(found) if found else requested
