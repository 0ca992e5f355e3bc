"""The fp16 ONNX file of a model with If subgraphs (issue 24): the sort counts what a subgraph
reads from the enclosing scope, so onnx.checker accepts the converted file."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from infer_compare.backends.onnxruntime.subgraphs import outer_names, sort_nodes  # noqa: E402


def _branch(name: str, op: str):
    """A branch that reads 'xc' (computed in the main graph, not passed to it) from outside."""
    out = helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, [2])
    return helper.make_graph([helper.make_node(op, ["xc", "xc"], [f"{name}_y"])], name, [], [out])


def _model_with_if_before_its_producer():
    cond = helper.make_node("Constant", [], ["c"],
                            value=helper.make_tensor("cv", TensorProto.BOOL, [], [True]))
    iff = helper.make_node("If", ["c"], ["y"], then_branch=_branch("then", "Add"),
                           else_branch=_branch("else", "Mul"))
    cast = helper.make_node("Identity", ["x"], ["xc"])  # after the If that reads it: the converter's order
    g = helper.make_graph([cond, iff, cast], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_outer_names_are_what_a_branch_reads_from_outside():
    assert outer_names(_branch("then", "Add")) == {"xc"}


def test_if_is_sorted_after_the_producer_of_what_its_branches_read():
    m = _model_with_if_before_its_producer()
    with pytest.raises(Exception, match="topologically sorted"):
        onnx.checker.check_model(m, full_check=True)
    sort_nodes(m.graph)
    assert [n.op_type for n in m.graph.node] == ["Constant", "Identity", "If"]
    onnx.checker.check_model(m, full_check=True)
    ort = pytest.importorskip("onnxruntime")
    out = ort.InferenceSession(m.SerializeToString()).run(None, {"x": np.array([1, 2], np.float32)})[0]
    assert out.tolist() == [2.0, 4.0]


def test_a_cycle_is_refused():
    a = helper.make_node("Identity", ["b"], ["a"])
    b = helper.make_node("Identity", ["a"], ["b"])
    g = helper.make_graph([a, b], "g", [], [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])])
    with pytest.raises(ValueError, match="cycle"):
        sort_nodes(g)
