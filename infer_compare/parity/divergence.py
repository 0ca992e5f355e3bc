"""Where a failed fp16 or int8 ONNX row first departs from the fp32 graph.

As Polygraphy's ``--mark all`` comparison does: every node output of both graphs is made a graph
output, both graphs run in ONNX Runtime (CPU) on a few parity inputs, and the tensors that exist in
both (by name: the fp16 converter's Casts and the quantizer's Q/DQ nodes add tensors of their own,
the original nodes keep their output names) are compared in the fp32 graph's topological order. The
first node whose output's relative error (max abs error over the fp32 tensor's max abs value) exceeds
the threshold (the precision's ``max_rel_err``, :data:`INT8_THRESHOLD` for int8) is named, with its op
type and error, and where one is known the remedy.

The search runs in a child process with a timeout (``python -m infer_compare.parity.divergence``): a crash or
hang there never takes the comparison down; :func:`explain` turns any failure into a clause saying why
the node was not found.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

INT8_THRESHOLD = 0.1
FP16_THRESHOLD = 5e-2
SAMPLES = 4
TIMEOUT_S = 300.0
_MEMO: dict[tuple, dict[str, Any]] = {}


def _marked(path: str):
    """The model at ``path`` with every top-level node output a graph output, and those outputs in order."""
    import onnx

    m = onnx.load(path)
    have = {o.name for o in m.graph.output}
    names = [t for n in m.graph.node for t in n.output if t]
    for t in names:
        if t not in have:
            m.graph.output.append(onnx.ValueInfoProto(name=t))
            have.add(t)
    return m, names


def _run_all(path: str, feed: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], Any]:
    import onnxruntime as ort

    m, _ = _marked(path)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    ins = {i.name: i for i in sess.get_inputs()}
    feed = {k: v for k, v in feed.items() if k in ins}
    return dict(zip(names, sess.run(names, feed), strict=True)), m


def rel_error(ref: np.ndarray, got: np.ndarray) -> float:
    """max |got - ref| / max |ref| (a non-finite value where ref is finite: inf)."""
    r, g = np.asarray(ref, dtype=np.float64), np.asarray(got, dtype=np.float64)
    if not np.isfinite(g).all() and np.isfinite(r).all():
        return float("inf")
    d = np.abs(g - r)
    return float(np.nanmax(d) / max(float(np.nanmax(np.abs(r))), 1e-12)) if d.size else 0.0


def search(fp32_path: str, cand_path: str, feed: dict[str, np.ndarray], threshold: float) -> dict[str, Any]:
    """The first node of the fp32 graph (topological order) whose output in the candidate graph is off by
    more than ``threshold``: {"node", "op", "error", "output", "compared"}; "node" None when none is."""
    ref, m32 = _run_all(fp32_path, feed)
    got, _ = _run_all(cand_path, feed)
    compared = 0
    for node in m32.graph.node:
        for t in node.output:
            a, b = ref.get(t), got.get(t)
            if a is None or b is None or np.shape(a) != np.shape(b):
                continue
            if not (np.issubdtype(np.asarray(a).dtype, np.floating)
                    and np.issubdtype(np.asarray(b).dtype, np.floating)):
                continue
            compared += 1
            e = rel_error(a, b)
            if not e <= threshold:
                return {"node": node.name or t, "op": node.op_type, "error": e, "output": t,
                        "compared": compared}
    return {"node": None, "compared": compared}


def remedy(precision: str, op: str, node: str) -> str:
    if precision == "fp16" and op == "Constant":
        # measured on PaddleOCR's PP-OCRv4 detector: neither --onnx-fp16-keep-fp32 Constant nor keeping its
        # consumer (BatchNormalization) in fp32 changes the row: the converter casts Constant values
        # regardless
        return ("none known here: a constant value fp16 cannot hold (out of range or below its smallest "
                "normal), and the float16 converter converts Constant values whatever its op_block_list "
                "says; keep this model in fp32 or fold the constant into an initializer before converting")
    if precision == "fp16":
        return f"keep {op} in fp32: --onnx-fp16-keep-fp32 {op} (the float16 converter's op_block_list)"
    if precision == "int8":
        return (f"leave it unquantized: --onnx-int8-exclude {node} (onnxruntime.quantization's "
                f"nodes_to_exclude=['{node}'])")
    return ""


def describe(found: dict[str, Any], precision: str, threshold: float, excluded: tuple[str, ...] = ()) -> str:
    """The clause for the row's reason. ``excluded``: the nodes the int8 file already leaves unquantized
    (--onnx-int8-exclude), whose exclusion is not offered again."""
    if found.get("node") is None:
        return (f"no node output of the {precision} graph is off by more than {threshold:.2g} relative to "
                f"the fp32 graph ({found.get('compared', 0)} tensors compared)")
    if precision == "int8" and found["node"] in excluded:
        fix = ("none known here: it is already left unquantized (--onnx-int8-exclude), and the quantized "
               "activations it reads (the Q/DQ pair on its input) still carry the error")
    else:
        fix = remedy(precision, found["op"], found["node"])
    return (f"first diverging node: {found['node']} ({found['op']}), relative error {found['error']:.3g} > "
            f"{threshold:.2g}" + (f"; remedy: {fix}" if fix else ""))


def threshold_for(precision: str, max_rel_err: float | None) -> float:
    if precision == "int8":
        return INT8_THRESHOLD
    return float(max_rel_err) if max_rel_err is not None else FP16_THRESHOLD


def run_child(fp32_path: str, cand_path: str, feed: dict[str, np.ndarray], threshold: float,
              timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """:func:`search` in a child process; raises RuntimeError (one line) when it fails or times out."""
    # deferred: the divergence child's start stays light without it (+2 modules)
    from infer_compare.host import launch

    with tempfile.TemporaryDirectory(prefix="ic-divergence-") as tmp:
        np.savez(os.path.join(tmp, "feed.npz"), **feed)
        result, log = Path(tmp) / "result.json", Path(tmp) / "output.txt"
        args = [fp32_path, cand_path, os.path.join(tmp, "feed.npz"), repr(threshold), str(result)]
        try:
            rc, timed_out = launch.run("infer_compare.parity.divergence", args, timeout_s, log)
        except launch.ChildNotStarted as e:
            raise RuntimeError(str(e)) from None
        if timed_out:
            raise RuntimeError(f"the search took more than {timeout_s:.0f} s")
        if rc != 0 or not result.exists():
            last = (launch.read_tail(log).splitlines() or [launch.describe_exit(rc)])[-1]
            raise RuntimeError(f"the search failed: {last[:200]}")
        return json.loads(result.read_text())


def _feed(prep: Any, cand_path: str) -> dict[str, np.ndarray]:
    import onnx

    # deferred: the divergence child's start stays light without them (+2 modules)
    from infer_compare.base import batches, layout

    graph = onnx.load(cand_path, load_external_data=False).graph
    dim0 = graph.input[0].type.tensor_type.shape.dim[:1]
    # a model of a fixed batch takes that
    static = int(dim0[0].dim_value) if dim0 and dim0[0].dim_value > 0 else 0
    ev = batches.head(prep.ds.eval, min(static or SAMPLES, batches.count(prep.ds.eval)))
    # each input laid along the model's own batch axis (a state [2, batch, 128], a scalar)
    if isinstance(ev, dict):
        return layout.of_model_info(prep.minfo).to_model(ev)  # contiguous, a scalar kept 0-d
    return {graph.input[0].name: np.ascontiguousarray(ev)}


def eligible(art: Any, precision: str) -> bool:
    """An fp16 or int8 ONNX file built from an fp32 ONNX file (ONNX Runtime, or OpenVINO on the QDQ file)."""
    return (art is not None and precision in ("fp16", "int8") and str(art.path).endswith(".onnx")
            and str(art.source).endswith(".onnx") and os.path.exists(art.path) and os.path.exists(art.source))


def explain(art: Any, prep: Any, precision: str, max_rel_err: float | None) -> tuple[str, dict[str, Any]]:
    """(the clause for a failed row's reason, the row's extra entry); never raises. Once per artifact."""
    key = (str(getattr(art, "path", "")), precision)
    if key in _MEMO:
        d = _MEMO[key]
        return d["text"], d
    threshold = threshold_for(precision, max_rel_err)
    try:
        if not eligible(art, precision):
            raise RuntimeError("not an fp16 or int8 ONNX file built from an fp32 ONNX file here")
        found = run_child(str(art.source), str(art.path), _feed(prep, str(art.path)), threshold)
        excluded = tuple(((getattr(art, "options", None) or {}).get("excluded") or {}).get("nodes") or ())
        d = {**found, "threshold": threshold, "text": describe(found, precision, threshold, excluded),
             "fp32_graph": str(art.source), "graph": str(art.path)}
    except Exception as e:  # noqa: BLE001 - the row keeps its reason; this only adds to it
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        d = {"node": None, "error_text": why, "text": f"(first diverging node not found: {why})"}
    _MEMO[key] = d
    return d["text"], d


def main(argv: list[str]) -> int:
    fp32_path, cand_path, feed_path, threshold, result_path = argv
    with np.load(feed_path) as z:
        feed = {k: z[k] for k in z.files}
    Path(result_path).write_text(json.dumps(search(fp32_path, cand_path, feed, float(threshold))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
