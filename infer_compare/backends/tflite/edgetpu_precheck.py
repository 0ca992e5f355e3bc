"""Static Edge TPU pre-check of a TFLite file: which operations edgetpu_compiler 16 would map.

No compiler runs here. The file is read with :mod:`.tflite_file` and checked, operation by
operation in execution order, against what Coral documents for the Edge TPU compiler
(coral.ai/docs/edgetpu/models-intro, "Model requirements" and "Supported operations"):

* every tensor an operation reads or writes is 8-bit quantized (int8/uint8, with a scale);
  int32 is accepted for constant parameters (bias, shapes, paddings, axes);
* sizes are constant at compile time (no -1 in a shape signature), and the weights and
  bias of CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED and TRANSPOSE_CONV are constants;
* a tensor has at most 3 dimensions larger than 1, and they are the innermost ones;
* the operation is in the supported-operations table, for the Edge TPU runtime that
  compiler 16 targets by default (14), and meets that table's limitation where the file
  lets one check it (fused activations, dilations, batch-dimension reductions and pads,
  strides, softmax size, fully-connected weight format, ...);
* the operation's version is one that compiler 16 can parse: it is built on the TFLite of
  mid-2021, so an op version that TensorFlow introduced after 2.5 (tensorflow/lite/tools/
  versioning/runtime_version.cc) makes it refuse the whole file ("Didn't find op for
  builtin opcode ..."); versions introduced in 2.6 are flagged as uncertain.

Coral documents one Edge TPU segment: the first operation that cannot map ends it, and
that operation and everything after it run on the CPU. The prediction follows that rule:
"N of M ops would map to the Edge TPU; the first that would not is X because Y".
What depends on the compiler's internals (tensor sizes for RESHAPE and RESIZE_*, on-chip
memory, its own heuristics) cannot be checked statically and is listed as caveats.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

from infer_compare.backends.tflite.edgetpu_rules import (
    RUNTIME,
    SUPPORTED,
    UNCHECKABLE,
    limit_problem,
    version_problem,
)
from infer_compare.backends.tflite.tflite_file import Operator, Tensor, TFLiteModel, read_model

WHO = "edgetpu_compiler 16 as documented by Coral (no compiler ran)"
AFTER_FIRST = "after the first operation that cannot map (one Edge TPU segment)"
_PARAM_TYPES = ("int8", "uint8", "int32")  # constants: quantized weights, int32 bias and shape parameters
_ACT_TYPES = ("int8", "uint8")


def _type_problem(t: Tensor) -> str | None:
    if t.constant:
        if t.type not in _PARAM_TYPES:
            return (f"constant tensor '{t.name}' is {t.type} "
                    "(the Edge TPU takes 8-bit tensors, int32 for bias)")
        return None
    if t.type not in _ACT_TYPES:
        return f"tensor '{t.name}' is {t.type}, not 8-bit quantized (int8/uint8)"
    if not t.scale:
        return f"tensor '{t.name}' is {t.type} without quantization parameters"
    if any(d < 0 for d in t.shape_signature) or any(d < 0 for d in t.shape):
        return f"tensor '{t.name}' has a dynamic size (shape signature {t.shape_signature or t.shape})"
    return None


def _rank_problem(t: Tensor) -> str | None:
    if not t.constant and any(d > 1 for d in t.shape[:-3]):
        return f"tensor '{t.name}' has shape {t.shape}: only the 3 innermost dimensions may be larger than 1"
    return None


def op_problem(model: TFLiteModel, op: Operator, runtime: int = RUNTIME) -> str | None:
    """Why this operation alone could not map to the Edge TPU (None when nothing documented forbids it).

    Checked in this order: the op is in the table (for the runtime), its tensors are 8-bit and
    static, the op's own documented limitation, then the 3-innermost-dimensions rule.
    """
    if op.op not in SUPPORTED:
        what = f"custom op '{op.custom}'" if op.op == "CUSTOM" else op.op
        return f"{what} is not in the Edge TPU's supported-operations table"
    need = SUPPORTED[op.op][0]
    if need > runtime:
        return f"{op.op} needs Edge TPU runtime {need} or newer (target: {runtime})"
    tensors = [model.tensors[i] for i in list(op.inputs) + list(op.outputs) if 0 <= i < len(model.tensors)]
    why = next((w for t in tensors if (w := _type_problem(t))), None) or limit_problem(model, op)
    return why or next((w for t in tensors if (w := _rank_problem(t))), None)


def _refusal(model: TFLiteModel) -> tuple[str | None, list[str]]:
    """(why compiler 16 would refuse to parse the file, or None; uncertain op versions)."""
    refused, unsure = None, []
    for oc in model.opcodes:
        verdict, why = version_problem(oc.name, oc.version)
        if verdict == "refused" and refused is None:
            refused = why
        elif verdict == "unsure":
            unsure.append(why)
    return refused, unsure


def _caveats(model: TFLiteModel, upto: int) -> list[str]:
    seen = collections.Counter(op.op for op in model.operators[:upto] if op.op in UNCHECKABLE)
    return [f"{name} x{n}: {UNCHECKABLE[name]}" for name, n in sorted(seen.items())]


def _op_counts(model: TFLiteModel, tpu_upto: int) -> dict[str, dict[str, int]]:
    ops: dict[str, dict[str, int]] = {}
    for op in model.operators:
        rec = ops.setdefault(op.op, {"count": 0, "tpu": 0, "cpu": 0})
        rec["count"] += 1
        rec["tpu" if op.index < tpu_upto else "cpu"] += 1
    return dict(sorted(ops.items()))


def predict(model: TFLiteModel, runtime: int = RUNTIME) -> dict[str, Any]:
    """The pre-check's prediction for a parsed model (see the module docstring)."""
    total = len(model.operators)
    refused, unsure = _refusal(model)
    problems = [(op, why) for op in model.operators if (why := op_problem(model, op, runtime))]
    first = problems[0] if problems else None
    tpu = 0 if refused else (first[0].index if first else total)
    pred: dict[str, Any] = {
        "checked_against": WHO, "runtime": runtime, "total_ops": total, "tpu_ops": tpu,
        "cpu_ops": total - tpu, "refused": refused,
        "first_cpu_op": ({"index": first[0].index, "op": first[0].op, "reason": first[1]}
                         if first and not refused else None),
        "ops": _op_counts(model, tpu),
        "own_problems": [{"index": op.index, "op": op.op, "reason": why} for op, why in problems[:20]],
        "uncertain_versions": unsure,
        "caveats": _caveats(model, tpu),
        "subgraphs_in_file": model.n_subgraphs,
        "min_runtime_version": model.metadata.get("min_runtime_version", b"").rstrip(b"\0").decode(
            "ascii", "replace") or None,
    }
    pred["summary"] = describe(pred)
    return pred


def precheck(source: str | Path | bytes, runtime: int = RUNTIME) -> dict[str, Any]:
    """Read a .tflite file (path or bytes) and predict its Edge TPU mapping. ValueError on a bad file."""
    return predict(read_model(source), runtime)


def describe(pred: dict[str, Any]) -> str:
    """'N of M ops would map to the Edge TPU; the first that would not is X because Y'."""
    n, m = pred["tpu_ops"], pred["total_ops"]
    if pred.get("refused"):
        return (f"0 of {m} ops would map to the Edge TPU: the compiler would refuse the file, "
                f"{pred['refused']}")
    first = pred.get("first_cpu_op")
    text = f"{n} of {m} ops would map to the Edge TPU"
    if first:
        text += f"; the first that would not is {first['op']} (op {first['index']}) because {first['reason']}"
    if pred.get("uncertain_versions"):
        text += "; uncertain: " + "; ".join(pred["uncertain_versions"])
    return text


def precheck_summary(source: str | Path | bytes | None) -> str:
    """One line for a report or the `export` command: the prediction, or why there is none. Never raises."""
    if source is None:
        return ""
    try:
        pred = precheck(source)
    except (OSError, ValueError) as e:
        return f"Edge TPU pre-check could not read the file: {e}"
    except Exception as e:  # a pre-check must never take a run down
        return f"Edge TPU pre-check failed: {type(e).__name__}: {e}"
    return f"Edge TPU pre-check ({WHO}): {pred['summary']}"


def compare_note(pred: dict[str, Any] | None, cov: dict[str, Any] | None) -> str | None:
    """'pre-check predicted N/M, compiler mapped K/M' when both are known."""
    if not pred:
        return None
    said = f"pre-check predicted {pred['tpu_ops']}/{pred['total_ops']}"
    if cov and cov.get("total_ops") is not None and cov.get("tpu_ops") is not None:
        said += f", compiler mapped {cov['tpu_ops']}/{cov['total_ops']}"
        if cov["tpu_ops"] != pred["tpu_ops"]:
            said += " (they differ: the compiler's log has the last word)"
    return said
