"""Shared LiteRT / TFLite helpers: which interpreter is installed, and what a file holds.

No heavy import at module level: the interpreter modules load inside the functions.

``interpreter_module()`` prefers ``ai_edge_litert.interpreter`` and falls back to
``tflite_runtime.interpreter`` (the old standalone wheel, which needs numpy < 2).
``inspect_model(path)`` reads the tensors and the op list of a .tflite file and says
whether it is *full-integer*: int8 input and output, every tensor int8/int32 (int16
allowed only if asked), no DEQUANTIZE and no op that reads or writes a float tensor.
That is the form the Edge TPU compiler accepts.
"""

from __future__ import annotations

import collections
from typing import Any

from infer_compare.backends.tflite.tflite_file import read_model
from infer_compare.base.errors import BackendUnavailable
from infer_compare.catalog import deps

INTEGER_DTYPES = ("int8", "int32")


def _numpy_major() -> int:
    v = deps.version("numpy") or "0"
    try:
        return int(v.split(".")[0])
    except ValueError:
        return 0


def interpreter_module(prefer: str | None = None) -> tuple[Any, str, str]:
    """(module with Interpreter and load_delegate, package name, version).

    Raises BackendUnavailable with the reason and the install hint.
    """
    order = ["ai_edge_litert", "tflite_runtime"]
    if prefer in order:
        order.remove(prefer)
        order.insert(0, prefer)
    problems = []
    for pkg in order:
        if not deps.has(pkg):
            continue
        try:
            mod = deps.require(f"{pkg}.interpreter", "running TFLite files")
        except BackendUnavailable as e:
            reason = e.reason
            if pkg == "tflite_runtime" and _numpy_major() >= 2:
                reason += (f" (tflite-runtime wheels are built against numpy 1.x; this environment has numpy "
                           f"{deps.version('numpy')}: use ai-edge-litert, or numpy<2)")
            problems.append(reason)
            continue
        return mod, pkg, deps.version(pkg) or "?"
    if problems:
        raise BackendUnavailable("; ".join(problems), deps.hint("ai_edge_litert"))
    raise BackendUnavailable("no TFLite interpreter is installed (ai-edge-litert or tflite-runtime)",
                             deps.hint("ai_edge_litert"))


def _dtype_name(dt: Any) -> str:
    import numpy as np

    try:
        return np.dtype(dt).name
    except TypeError:
        return str(dt)


def inspect_model(path: str, interpreter_cls: Any = None) -> dict[str, Any]:
    """Tensor dtypes, op counts and the full-integer verdict of a .tflite file."""
    if interpreter_cls is None:
        interpreter_cls = interpreter_module()[0].Interpreter
    it = interpreter_cls(model_path=str(path))
    tensors = it.get_tensor_details()
    by_index = {t["index"]: t for t in tensors}
    dtypes = collections.Counter(_dtype_name(t["dtype"]) for t in tensors)
    ops = it._get_ops_details()  # the op list with operand indices (no public API gives it)
    op_counts = collections.Counter(o["op_name"] for o in ops)
    float_ops: collections.Counter[str] = collections.Counter()
    for o in ops:
        used = [i for i in list(o["inputs"]) + list(o["outputs"]) if i >= 0 and i in by_index]
        if any(_dtype_name(by_index[i]["dtype"]).startswith(("float", "bfloat")) for i in used):
            float_ops[o["op_name"]] += 1
    inp = it.get_input_details()
    out = it.get_output_details()
    io = {
        "inputs": [{"name": d["name"], "dtype": _dtype_name(d["dtype"]),
                    "shape": [int(s) for s in d["shape"]],
                    "quantization": [float(d["quantization"][0]), int(d["quantization"][1])]} for d in inp],
        "outputs": [{"name": d["name"], "dtype": _dtype_name(d["dtype"]),
                     "shape": [int(s) for s in d["shape"]],
                     "quantization": [float(d["quantization"][0]), int(d["quantization"][1])]} for d in out],
    }
    problems = []
    for side in ("inputs", "outputs"):
        bad = [d["dtype"] for d in io[side] if d["dtype"] != "int8"]
        if bad:
            problems.append(f"{side} are {', '.join(bad)}, not int8")
    odd = {k: v for k, v in dtypes.items() if k not in INTEGER_DTYPES}
    if odd:
        problems.append("tensors of type " + ", ".join(f"{k} x{v}" for k, v in sorted(odd.items())))
    if op_counts.get("DEQUANTIZE"):
        problems.append(f"{op_counts['DEQUANTIZE']} DEQUANTIZE ops")
    if float_ops:
        problems.append("float ops: " + ", ".join(f"{k} x{v}" for k, v in sorted(float_ops.items())))
    return {
        "ops": dict(sorted(op_counts.items())),
        "n_ops": len(ops),
        "tensor_dtypes": dict(sorted(dtypes.items())),
        "float_ops": dict(sorted(float_ops.items())),
        "io": io,
        "full_integer": not problems,
        "problems": problems,
    }


STATE_OPS = ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE")


def resource_variables(path: str) -> str:
    """One line naming the file's resource variables (a stateful file: VAR_HANDLE / READ_VARIABLE /
    ASSIGN_VARIABLE ops), "" when it has none or cannot be read."""
    try:
        model = read_model(path)
    except (OSError, ValueError):
        return ""
    ops = sorted({oc.name for oc in model.opcodes} & set(STATE_OPS))
    resources = sum(1 for t in model.tensors if t.type == "resource")
    if not ops and not resources:
        return ""
    return (f"stateful file: resource variables ({', '.join(ops) or f'{resources} resource tensors'}): "
            "each call reads and updates state kept in the interpreter, so an output depends on the calls "
            "before it; every row's interpreter starts from the file's initial state")
