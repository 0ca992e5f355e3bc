"""torchvision's detection models as exported to ONNX: one image [3, H, W] in, ragged detections out.

``torchvision.models.detection`` models (SSD, SSDlite, RetinaNet, FCOS, Faster R-CNN) take a list of
[3, H, W] images and return, per image, ``boxes`` [K, 4] (x1, y1, x2, y2 in pixels), ``labels`` [K]
(int64) and ``scores`` [K] (0-1), K data-dependent. Exported with ``torch.onnx.export`` for one image,
the file has an input without a batch axis and three outputs whose first axis K changes from image to
image (and between runtimes on the same image). Nothing the tool keeps (one sample per row, rows
stacked) can hold that as it is, so such a file is measured through a thin wrapper graph, built once
and cached:

* the input gets a batch axis of 1 ([1, 3, H, W], squeezed in front of the model's own graph): the
  model runs at batch 1 only, other batch sizes are skipped rows that say why;
* each output is padded with zeros to PAD_WIDTH detections and given the batch axis ([1, PAD_WIDTH, 4],
  [1, PAD_WIDTH], [1, PAD_WIDTH]): a zero score is below any score threshold, so padding is never a
  detection; torchvision returns detections sorted by score, so a K above PAD_WIDTH would lose the lowest
  (the reference is checked for it: parity/det_groups.py ``padded_full``).

The three outputs are then judged together as ``detections:torchvision`` (parity/detections.py: the
model's own detections, kept and added against the reference's, never compared position by position).
The wrapper adds one Squeeze, and a Concat, Slice and Unsqueeze per output, to the measured graph.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from infer_compare.models.user_onnx import load_onnx

PAD_WIDTH = 1000  # torchvision's detections_per_img is 100 (Faster R-CNN) or 300 (SSD, RetinaNet, FCOS)
WRAPPER_VERSION = 1
KIND = "detections:torchvision"
MIN_SIDE = 16  # an unbatched image input [C, H, W]: C 1 or 3, H and W at least this
_INTS = (6, 7, 12, 13)  # int32, int64, uint32, uint64


@dataclass(frozen=True)
class Triple:
    image: str
    boxes: str
    labels: str
    scores: str

    @property
    def outputs(self) -> tuple[str, str, str]:
        return self.boxes, self.labels, self.scores


def _dims(vi) -> tuple[Any, ...] | None:
    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim)


def _unbatched_image(vi) -> bool:
    d = _dims(vi)
    return (d is not None and len(d) == 3 and all(isinstance(x, int) and x > 0 for x in d) and d[0] in (1, 3)
            and min(d[1:]) >= MIN_SIDE and vi.type.tensor_type.elem_type == 1)


def find_triple(model) -> Triple | None:
    """The torchvision layout in an ONNX model's declared graph, or None: one float input [C, H, W] (no batch
    axis), exactly three outputs sharing their first axis: float [K, 4], integer [K], float [K]."""
    weights = {t.name for t in model.graph.initializer}
    ins = [vi for vi in model.graph.input if vi.name not in weights]
    outs = list(model.graph.output)
    if len(ins) != 1 or not _unbatched_image(ins[0]) or len(outs) != 3:
        return None
    dims = {vi.name: _dims(vi) for vi in outs}
    if any(d is None or not d for d in dims.values()) or len({d[0] for d in dims.values()}) != 1:
        return None
    elem = {vi.name: vi.type.tensor_type.elem_type for vi in outs}
    boxes = [k for k, d in dims.items() if d[1:] == (4,) and elem[k] == 1]
    labels = [k for k, d in dims.items() if len(d) == 1 and elem[k] in _INTS]
    scores = [k for k, d in dims.items() if len(d) == 1 and elem[k] == 1]
    if len(boxes) != 1 or len(labels) != 1 or len(scores) != 1:
        return None
    return Triple(ins[0].name, boxes[0], labels[0], scores[0])


def _rename(graph, old: str, new: str) -> None:
    """Every use of tensor ``old`` (node inputs and outputs, subgraphs' outer-scope uses too) as ``new``."""
    for node in graph.node:
        node.input[:] = [new if x == old else x for x in node.input]
        node.output[:] = [new if x == old else x for x in node.output]
        for a in node.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                _rename(g, old, new)


def _opset(model) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def _axes_node(helper, numpy_helper, np, op: str, x: str, y: str, opset: int, inits: list) -> Any:
    """Squeeze or Unsqueeze on axis 0, as the opset spells it (an attribute before 13, an input from 13)."""
    if opset < 13:
        return helper.make_node(op, [x], [y], axes=[0], name=f"/batch1/{op}_{y}")
    inits.append(numpy_helper.from_array(np.asarray([0], np.int64), f"{y}__axes"))
    return helper.make_node(op, [x, f"{y}__axes"], [y], name=f"/batch1/{op}_{y}")


def wrap(model, triple: Triple):
    """The model with a batch axis of 1 on its input and its three outputs padded to PAD_WIDTH (module
    docstring); names unchanged."""
    import numpy as np
    from onnx import helper, numpy_helper

    g, opset, inits, nodes = model.graph, _opset(model), [], []
    inner = f"{triple.image}__unbatched"
    _rename(g, triple.image, inner)
    vi = next(v for v in g.input if v.name == triple.image)
    c, h, w = _dims(vi)
    nodes.append(_axes_node(helper, numpy_helper, np, "Squeeze", triple.image, inner, opset, inits))
    vi.CopyFrom(helper.make_tensor_value_info(triple.image, 1, [1, c, h, w]))
    for i, k in enumerate(triple.outputs):
        out = next(v for v in g.output if v.name == k)
        elem, tail = out.type.tensor_type.elem_type, [4] if k == triple.boxes else []
        _rename(g, k, f"{k}__ragged")
        zeros = np.zeros([PAD_WIDTH, *tail], helper.tensor_dtype_to_np_dtype(elem))
        inits += [numpy_helper.from_array(zeros, f"{k}__zeros"),
                  numpy_helper.from_array(np.asarray([0], np.int64), f"{k}__start"),
                  numpy_helper.from_array(np.asarray([PAD_WIDTH], np.int64), f"{k}__end"),
                  numpy_helper.from_array(np.asarray([0], np.int64), f"{k}__axis")]
        nodes += [helper.make_node("Concat", [f"{k}__ragged", f"{k}__zeros"], [f"{k}__long"], axis=0,
                                   name=f"/pad/Concat_{i}"),
                  helper.make_node("Slice", [f"{k}__long", f"{k}__start", f"{k}__end", f"{k}__axis"],
                                   [f"{k}__padded"], name=f"/pad/Slice_{i}"),
                  _axes_node(helper, numpy_helper, np, "Unsqueeze", f"{k}__padded", k, opset, inits)]
        out.CopyFrom(helper.make_tensor_value_info(k, elem, [1, PAD_WIDTH, *tail]))
    g.node.insert(0, nodes[0])
    g.node.extend(nodes[1:])
    g.initializer.extend(inits)
    return model


def adapt(um: Any, cache: Any) -> tuple[Any, dict[str, str]]:
    """(the UserModel to measure, {output: kind}): an ONNX file in torchvision's detection layout becomes its
    cached wrapper (module docstring), its three outputs judged as ``detections:torchvision``; any other
    file is returned as it is, with no kinds."""
    import onnx

    model = onnx.load(um.source, load_external_data=False)
    triple = find_triple(model)
    if triple is None:
        return um, {}
    stem = os.path.basename(um.source)

    def build(tmp):
        full = onnx.load(um.source)  # with its external data, if any
        wrapped = wrap(full, triple)
        onnx.checker.check_model(wrapped)
        onnx.save(wrapped, str(tmp / stem))
        return {"triple": list(triple.outputs)}

    entry = cache.get_or_build("wrapped", {"onnx": um.sha256, "torchvision_detections": WRAPPER_VERSION},
                               build)
    wrapped = load_onnx(str(entry.file(stem)), None)
    _, c, h, w = wrapped.inputs[0].shape
    wrapped.wraps = um.source
    wrapped.notes = [n for n in um.notes if not n.startswith("reference:")] + [
        f"torchvision detection outputs ({', '.join(triple.outputs)}: [K, 4], [K], [K], K changing per "
        f"image) and an input without a batch axis ({triple.image} [{c}, {h}, {w}]): {um.source} measured "
        f"through a wrapper (input [1, {c}, {h}, {w}], outputs padded with zeros to {PAD_WIDTH} detections; "
        "models/torchvision_det.py), batch 1 only; judged on the detections kept and added"]
    return wrapped, {k: KIND for k in triple.outputs}
