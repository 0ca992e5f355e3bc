"""Topological order of an ONNX graph whose nodes carry subgraphs (If, Loop, Scan).

ONNX Runtime's float16 converter adds a Cast of each graph input at the end of the main
graph; a node of an If branch that reads that Cast names it only inside its subgraph, so
a sort that looks at node inputs alone (``OnnxModel.topological_sort``) leaves the If
before the Cast and ``onnx.checker`` rejects the file ("Nodes in a graph must be
topologically sorted"). Here a node depends on its inputs and on every name its
subgraphs read from the enclosing scope; each subgraph is sorted the same way.
"""

from __future__ import annotations

import collections


def _subgraphs(node) -> list:
    out = []
    for a in node.attribute:
        if a.HasField("g"):
            out.append(a.g)
        out.extend(a.graphs)
    return out


def outer_names(graph) -> set[str]:
    """The names ``graph`` reads from an enclosing scope: inputs of its nodes (and of their
    own subgraphs) that it neither takes as input, holds as initializer nor computes."""
    made = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    used: set[str] = set()
    for n in graph.node:
        used.update(x for x in n.input if x)
        for g in _subgraphs(n):
            used |= outer_names(g)
        made.update(n.output)
    return used - made


def sort_nodes(graph) -> None:
    """Reorder ``graph.node`` (and every subgraph's) so that each node comes after the
    producers of its inputs and of what its subgraphs read from outside. Stable: nodes
    already in order keep it. Raises ValueError on a cycle."""
    nodes = list(graph.node)
    needs = []
    for n in nodes:
        need = {x for x in n.input if x}
        for g in _subgraphs(n):
            sort_nodes(g)
            need |= outer_names(g)
        needs.append(need)
    producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    users: dict[int, list[int]] = collections.defaultdict(list)
    waiting = [0] * len(nodes)
    for i, need in enumerate(needs):
        for p in {producer[x] for x in need if x in producer}:
            users[p].append(i)
            waiting[i] += 1
    ready = collections.deque(i for i, w in enumerate(waiting) if w == 0)
    order = []
    while ready:
        i = ready.popleft()
        order.append(i)
        for j in users[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                ready.append(j)
    if len(order) != len(nodes):
        raise ValueError(f"the graph has a cycle through {len(nodes) - len(order)} nodes")
    del graph.node[:]
    graph.node.extend(nodes[i] for i in order)
