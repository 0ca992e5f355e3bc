"""The converter child's inputs and outputs: an ONNX root as a torch module, the calibration inputs
of a model with one input or several, and the record of which file tensor is which model tensor.

ONNX -> TFLite route (issue 25 a): onnx2torch turns the ONNX graph into a ``torch.fx`` module, op
by op (ENOT's converter, used to bring ONNX models to PyTorch tooling), and the PyTorch route
(litert-torch, full-integer PT2E int8) converts that module. onnx2tf, the route of Ultralytics'
TFLite export, does not resolve against this stack (it needs TensorFlow, whose protobuf and numpy
pins conflict with onnx, OpenVINO and LiteRT here: ``pip install --dry-run`` says
ResolutionImpossible); docs/tflite-edgetpu.md has the comparison. An op onnx2torch has no converter
for stops the conversion with one line naming the op and its opset.
"""

from __future__ import annotations

from typing import Any

from infer_compare.backends.tflite.bindings import match_outputs
from infer_compare.backends.tflite.common import interpreter_module
from infer_compare.backends.tflite.convert_constants import constant_inputs


class UnsupportedModel(Exception):
    """The converter cannot take this model; the message says which op or feature, in one line."""


def fold_constants(model: Any) -> int:
    """Constant nodes and Identity nodes of an initializer become initializers (onnx2torch reads weights
    from initializers only: torch.onnx writes an Identity for a weight shared by two layers); how many."""
    import copy

    from onnx import numpy_helper

    g = model.graph
    inits = {i.name: i for i in g.initializer}
    keep, folded = [], 0
    for node in g.node:
        value = None
        if node.op_type == "Identity" and node.input[0] in inits:
            value = copy.deepcopy(inits[node.input[0]])
        elif node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            value = copy.deepcopy(node.attribute[0].t)
        if value is None:
            keep.append(node)
            continue
        value.name = node.output[0]
        g.initializer.append(numpy_helper.from_array(numpy_helper.to_array(value), node.output[0]))
        inits[node.output[0]] = g.initializer[-1]
        folded += 1
    del g.node[:]
    g.node.extend(keep)
    return folded


def static_onnx(path: str, shapes: dict[str, tuple[int, ...]], out: str) -> str:
    """The ONNX file with every input of one sample's static shape (batch 1), its shape arithmetic folded
    by ONNX Runtime's basic graph optimizations (constant folding; ONNX ops only), saved to ``out``: a
    dynamic-batch export computes Reshape targets from Shape/Gather, which torch.export cannot trace
    through onnx2torch's module (a data-dependent guard)."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(path)
    for inp in model.graph.input:
        if inp.name in shapes and inp.type.HasField("tensor_type"):
            for d, v in zip(inp.type.tensor_type.shape.dim, shapes[inp.name], strict=False):
                d.ClearField("dim_param")
                d.dim_value = int(v)
    fixed = out + ".in.onnx"
    onnx.save(model, fixed)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = out
    ort.InferenceSession(fixed, so, providers=["CPUExecutionProvider"])
    return out


def onnx_module(path: str, shapes: dict[str, tuple[int, ...]] | None = None) -> Any:
    """The ONNX file as a torch module (onnx2torch), or UnsupportedModel naming the op that stopped it.
    With ``shapes`` (one sample per input, batch 1) the graph is made static first (:func:`static_onnx`)."""
    import os

    import onnx
    from onnx2torch import convert

    if shapes:
        path = static_onnx(path, shapes, os.path.abspath("static.onnx"))
    model = onnx.load(path)
    fold_constants(model)
    try:
        gm = convert(model).eval()
        gm.folded_constant_inputs = constant_inputs(gm)  # Reshape/Slice/Resize reading constants (issue 38)
        return gm
    except NotImplementedError as e:
        text = str(e)
        op = text.split("operation_type='")[1].split("'")[0] if "operation_type='" in text else ""
        ver = text.split("version=")[1].split(")")[0] if "version=" in text else "?"
        if op:
            raise UnsupportedModel(f"onnx2torch has no converter for ONNX op {op} (op "
                                   f"version {ver})") from None
        raise UnsupportedModel("onnx2torch cannot convert this graph: "
                               f"{text.splitlines()[0][:200]}") from None
    except (KeyError, ValueError, TypeError, AttributeError) as e:  # a graph form onnx2torch does not read
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise UnsupportedModel(f"onnx2torch could not read the graph: {type(e).__name__} {first}") from None


def load_inputs(spec: dict[str, Any]) -> tuple[list[str], list[Any]]:
    """(input names, one float32/int calibration array per input in the model's order)."""
    import numpy as np

    path = spec["calibration"]
    names = list(spec.get("input_names") or [])
    if path.endswith(".npz"):
        with np.load(path, allow_pickle=False) as z:
            names = names or list(z.files)
            arrays = [np.asarray(z[n]) for n in names]
    else:
        arrays = [np.load(path)]
        names = names[:1] or ["input"]
    return names, [a.astype(np.float32) if a.dtype.kind == "f" else a for a in arrays]


def flat(out: Any) -> list[Any]:
    import torch

    leaves, _ = torch.utils._pytree.tree_flatten(out)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def io_map(module: Any, sample: tuple, path: str, input_names: list[str], output_names: list[str],
           channel_last: list[bool]) -> dict[str, Any]:
    """Which model tensor each of the file's inputs and outputs is (bindings.py reads it at run time):
    inputs in the module's argument order (litert-torch keeps it; shapes checked), outputs by name or by
    shape and order against the module's own outputs on ``sample``."""
    import torch

    it = interpreter_module()[0].Interpreter(model_path=path)
    ins, outs = it.get_input_details(), it.get_output_details()
    want = [tuple(int(v) for v in x.shape) for x in sample]
    got = [tuple(int(v) for v in d["shape"]) for d in ins]
    if len(got) != len(want) or any(a != b for a, b in zip(got, want, strict=False)):
        raise UnsupportedModel(f"the file's inputs {got} are not the model's {want} in order")
    with torch.no_grad():
        model_outs = flat(module(*sample))
    names = list(output_names) if len(output_names) == len(model_outs) else [
        f"output_{i}" for i in range(len(model_outs))] if len(model_outs) > 1 else []
    rec: dict[str, Any] = {"inputs": list(input_names), "channel_last": list(channel_last),
                           "inputs_matched": "in the model's argument order (kept by litert-torch; "
                                             "shapes checked at export)"}
    if names:
        file_names = [str(d["name"]) for d in outs]
        rec["outputs"], rec["matched"] = match_outputs([tuple(o.shape) for o in model_outs],
                                                       [tuple(int(v) for v in d["shape"]) for d in outs],
                                                       names, file_names)
    return rec
