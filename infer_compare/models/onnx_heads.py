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
TAIL_OPS = frozenset({"Mul", "Add", "Sub", "Div", "Sigmoid", "Softmax", "Exp", "Reshape", "Transpose",
                      "Concat", "Split", "Slice", "Squeeze", "Unsqueeze", "Flatten", "Gather"})
SHAPE_OPS = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Flatten"})
PROBABILITY_OPS = frozenset({"Sigmoid", "Softmax"})
TAIL_DEPTH = 4
# from an output back to the mixed Concat it is decoded from: the ops a head's decoding and NMS are made of
HEAD_OPS = TAIL_OPS | SHAPE_OPS | frozenset({"GatherND", "TopK", "NonMaxSuppression", "Cast", "Pad"})
WALK_DEPTH = 16


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
    """(node names to keep in float, why) for every Concat of mixed scales that a graph output is decoded from
    (up to WALK_DEPTH nodes of HEAD_OPS back: a YOLO head's output itself, or the same Concat split again into
    boxes and scores, or run through NonMaxSuppression), with every node between it and the output, and the
    element-wise tail before it (TAIL_OPS, up to TAIL_DEPTH nodes back); ([], "") when there is none.
    ``span(tensor)``: the largest |value| calibration saw, to decide on ranges; None decides on the graph."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    producer = {o: n for n in graph.node for o in n.output}
    keep: list[str] = []
    concats: dict[str, tuple] = {}
    why = []
    for out in graph.output:
        node, leads, found = producer.get(out.name), {}, {}
        if node is None or not _leads(node, 0, producer, span, leads, found):
            continue
        direct = node
        while direct is not None and direct.op_type in SHAPE_OPS:
            direct = producer.get(direct.input[0])
        why += [f"{out.name}: {r}" + ("" if c is direct else f" ({c.name})") for c, r in found.values()]
        keep += [n for n, ok in leads.items() if ok and n not in keep]
        concats.update(found)
    for concat, _ in concats.values():
        _tail(concat, producer, keep)
    return keep, "; ".join(why)


def _leads(node, depth: int, producer: dict, span, leads: dict[str, bool], found: dict[str, tuple]) -> bool:
    """Whether ``node``'s output is decoded from a mixed-scale Concat (recorded in ``found``), memoized."""
    if not node.name:
        return False
    if node.name in leads:
        return leads[node.name]
    leads[node.name] = False
    reason = _mixed(node, producer, span) if node.op_type == "Concat" else ""
    if reason:
        found[node.name] = (node, reason)
        leads[node.name] = True
        return True
    if depth < WALK_DEPTH and node.op_type in HEAD_OPS:
        hits = [_leads(producer[i], depth + 1, producer, span, leads, found)
                for i in node.input if i in producer]
        leads[node.name] = any(hits)
    return leads[node.name]


def _tail(concat, producer: dict, keep: list[str]) -> None:
    """The element-wise nodes before a mixed Concat (TAIL_OPS, TAIL_DEPTH back) added to ``keep``."""
    todo = [(concat, 0)]
    while todo:
        n, depth = todo.pop()
        if n is not concat and (not n.name or n.name in keep):
            continue
        if n.name not in keep:
            keep.append(n.name)
        if depth < TAIL_DEPTH:
            todo += [(producer[i], depth + 1)
                     for i in n.input if i in producer and producer[i].op_type in TAIL_OPS]
