"""The decoding tail of a model's outputs in its ONNX graph: an output made by a Concat of parts of different
scales (a detector's boxes in pixels beside its 0-1 scores) must not share one int8 scale, so the Concat and
the element-wise nodes just before it stay in float while the rest is quantized. Shared by the int8 recipes of
ONNX Runtime (decided on calibrated ranges) and OpenVINO/NNCF (decided on the graph: one part comes from a
Sigmoid or Softmax, another does not)."""

from __future__ import annotations

from collections.abc import Callable

# parts of one output whose ranges differ more than this do not share a quantization scale
MIXED_SCALE_RATIO = 16.0
# the element-wise and shape ops of a decoding tail (box arithmetic, score sigmoid) left in float with it
TAIL_OPS = frozenset({"Mul", "Add", "Sub", "Div", "Sigmoid", "Softmax", "Exp", "Reshape", "Transpose", "Concat",
                      "Split", "Slice", "Squeeze", "Unsqueeze", "Flatten", "Gather"})
SHAPE_OPS = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Flatten"})
PROBABILITY_OPS = frozenset({"Sigmoid", "Softmax"})
TAIL_DEPTH = 4


def _is_probability(producer: dict, name: str) -> bool:
    node = producer.get(name)
    while node is not None and node.op_type in SHAPE_OPS:
        node = producer.get(node.input[0])
    return node is not None and node.op_type in PROBABILITY_OPS


def _mixed(node, producer: dict, span: Callable[[str], float | None] | None) -> str:
    """Why the Concat's inputs are of different scales ("" when they are not)."""
    if span is not None:
        spans = [s for s in (span(i) for i in node.input) if s is not None]
        if len(spans) >= 2 and max(spans) >= MIXED_SCALE_RATIO * max(min(spans), 1e-6):
            return f"Concat of parts whose ranges span {min(spans):.3g} to {max(spans):.3g}"
        return ""
    probs = [_is_probability(producer, i) for i in node.input]
    return "Concat of probabilities and other values" if any(probs) and not all(probs) else ""


def output_tails(path: str, span: Callable[[str], float | None] | None = None) -> tuple[list[str], str]:
    """(node names to keep in float, why) for every graph output made by a Concat of mixed scales, with the
    element-wise tail before it (TAIL_OPS, up to TAIL_DEPTH nodes back); ([], "") when there is none.
    ``span(tensor)``: the largest |value| calibration saw, to decide on ranges; None decides on the graph."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    producer = {o: n for n in graph.node for o in n.output}
    keep: list[str] = []
    why = []
    for out in graph.output:
        node = producer.get(out.name)
        while node is not None and node.op_type in SHAPE_OPS:
            node = producer.get(node.input[0])
        reason = _mixed(node, producer, span) if node is not None and node.op_type == "Concat" else ""
        if not reason:
            continue
        why.append(f"{out.name}: {reason}")
        todo = [(node, 0)]
        while todo:
            n, depth = todo.pop()
            if not n.name or n.name in keep:
                continue
            keep.append(n.name)
            if depth < TAIL_DEPTH:
                todo += [(producer[i], depth + 1) for i in n.input if i in producer and producer[i].op_type in TAIL_OPS]
    return keep, "; ".join(why)
