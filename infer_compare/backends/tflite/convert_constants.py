"""Constant inputs of onnx2torch's modules folded into the traced graph (issue 38), and the one line
that names the node when torch.export still stops.

onnx2torch keeps an ONNX node's shape-like inputs (a Reshape's target, a Resize's scales or sizes, a
Slice's starts, ends, axes and steps) as tensors and reads them at run time (``.tolist()``,
``.numpy()``, ``torch.any(shape == 0)``). torch.export traces them as data-dependent values:
"GuardOnDataDependentSymNode: Could not guard on data-dependent expression Eq(zuf0, 1.0)" (a YOLOv8
Resize), ".numpy() is not supported for tensor subclasses" (a YOLOX Slice). Where such an input is a
constant of the graph (an initializer after ONNX Runtime's constant folding, static_onnx), its value is
read here once, outside the trace, and the module call is replaced by a function of plain Python values.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any


def static_reshape(x: Any, shape: tuple[int, ...]) -> Any:
    """ONNX Reshape with a constant target (0: keep that input dimension), as plain Python ints."""
    return x.reshape([int(x.shape[i]) if d == 0 else d for i, d in enumerate(shape)])


def static_slice(x: Any, flip: tuple[int, ...], pos: tuple, neg: tuple) -> Any:
    """ONNX Slice with constant starts/ends/axes/steps (onnx2torch's own slicing, on Python values)."""
    import torch

    if flip:
        x = torch.flip(x, dims=list(flip))
    if pos:
        x = x[pos]
    if neg:
        x = x[(Ellipsis, *neg)]
    return x


def static_resize(x: Any, mode: str, align_corners: bool | None, size: tuple | None,
                  scale: tuple | None) -> Any:
    """ONNX Resize with constant sizes or scales (spatial axes only), as F.interpolate takes them."""
    import torch

    return torch.nn.functional.interpolate(x, size=list(size) if size else None,
                                           scale_factor=list(scale) if scale else None, mode=mode,
                                           align_corners=align_corners)


def _value(gm: Any, arg: Any) -> Any:
    """The constant behind a get_attr argument as a tensor; None for an absent input; raises KeyError for a
    computed one."""
    if arg is None:
        return None
    if getattr(arg, "op", "") != "get_attr":
        raise KeyError("computed")
    value = gm
    for part in arg.target.split("."):
        value = getattr(value, part)
    return value


def _ints(t: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in t.reshape(-1).tolist())


def _reshape(gm: Any, mod: Any, args: tuple) -> tuple | None:
    if len(args) != 2:
        return None
    return static_reshape, (args[0], _ints(_value(gm, args[1])))


def _slice(gm: Any, mod: Any, args: tuple) -> tuple | None:
    starts, ends = _ints(_value(gm, args[1])), _ints(_value(gm, args[2]))
    axes_t = _value(gm, args[3]) if len(args) > 3 else None
    steps_t = _value(gm, args[4]) if len(args) > 4 else None
    axes = _ints(axes_t) if axes_t is not None else tuple(range(len(starts)))
    steps = _ints(steps_t) if steps_t is not None else (1,) * len(starts)
    slices, flip = {}, []
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        if st < 0:
            flip.append(a)
            s, e, st = -s - 1, -e - 1, -st
        slices[a] = slice(s, e, st)
    pos = tuple(slices.get(a, slice(None)) for a in range(max(axes) + 1)) if max(axes) >= 0 else ()
    neg = tuple(slices.get(a, slice(None)) for a in range(min(axes), 0))
    return static_slice, (args[0], tuple(flip), pos, neg)


def _resize(gm: Any, mod: Any, args: tuple) -> tuple | None:
    from onnx2torch.node_converters.resize import _onnx_mode_to_torch_mode

    inner = getattr(mod, "_resize", mod)  # OnnxResizeV10 (input, scales) wraps OnnxResize
    if inner is not mod:
        roi, scales, sizes = None, args[1] if len(args) > 1 else None, None
    else:
        roi, scales, sizes = (list(args[1:]) + [None, None, None])[:3]
    roi_t = _value(gm, roi)
    if roi_t is not None and roi_t.numel() and not inner.ignore_roi:
        return None
    scales_t, sizes_t = _value(gm, scales), _value(gm, sizes)
    size = tuple(int(v) for v in sizes_t.tolist())[2:] if sizes_t is not None and sizes_t.numel() else None
    scale = tuple(float(v) for v in scales_t.tolist()) if scales_t is not None and scales_t.numel() else None
    if scale is not None and scale[:2] != (1.0, 1.0) or size is None and scale is None:
        return None
    rank = len(size or scale[2:])
    return static_resize, (args[0], _onnx_mode_to_torch_mode(inner.onnx_mode, rank), inner.align_corners,
                           size, scale[2:] if scale else None)


def _handlers() -> dict[type, Any]:
    from onnx2torch.node_converters.reshape import OnnxReshape
    from onnx2torch.node_converters.resize import OnnxResize, OnnxResizeV10
    from onnx2torch.node_converters.slice import OnnxSlice

    return {OnnxReshape: _reshape, OnnxSlice: _slice, OnnxResize: _resize, OnnxResizeV10: _resize}


def constant_inputs(gm: Any) -> dict[str, int]:
    """onnx2torch's Reshape, Slice and Resize modules whose shape-like inputs are all constants, replaced by
    :func:`static_reshape`, :func:`static_slice` and :func:`static_resize` on their values. How many of each
    (by ONNX op). A module that reads a computed input stays as it is (torch.export may then stop on it:
    :func:`stopped_at` names it)."""
    handlers = _handlers()
    done: Counter[str] = Counter()
    for node in list(gm.graph.nodes):
        if node.op != "call_module":
            continue
        mod = gm.get_submodule(node.target)
        handler = handlers.get(type(mod))
        if handler is None or node.kwargs:
            continue
        try:
            got = handler(gm, mod, tuple(node.args))
        except KeyError:  # an input computed at run time
            continue
        if got is None:
            continue
        with gm.graph.inserting_before(node):
            new = gm.graph.call_function(got[0], got[1])
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        done[onnx_op(mod)] += 1
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return dict(done)


def onnx_op(mod: Any) -> str:
    """The ONNX op of an onnx2torch module (OnnxResizeV10 -> Resize); the class name for another module."""
    name = type(mod).__name__
    name = name[4:] if name.startswith("Onnx") else name
    return re.sub(r"V\d+$", "", name) or type(mod).__name__


_EXECUTING = re.compile(r"While executing %\S+ : .*?call_(module|function)\[target=([^\]]+)\]")


def stopped_at(error: BaseException, gm: Any, names: dict[str, str] | None = None) -> str | None:
    """'<ONNX node name> (<op>)' of the node torch.export was tracing when ``error`` was raised, from the
    trace's "While executing %node : ... call_module[target=...]" line; None when the error names none.
    ``names`` maps onnx2torch's module names to the ONNX node names where they differ."""
    m = _EXECUTING.search(str(error))
    if not m:
        return None
    kind, target = m.groups()
    if kind == "function":
        return f"{target.rsplit('.', 1)[-1]} (a function of the converted graph)"
    try:
        op = onnx_op(gm.get_submodule(target))
    except AttributeError:
        op = "?"
    return f"{(names or {}).get(target, target)} ({op})"
