"""Which ops of a loaded TFLite interpreter run in XNNPACK and which in LiteRT's built-in kernels.

The interpreter's op list (``_get_ops_details``) holds the file's ops and, after delegation, one
``DELEGATE`` node per partition that XNNPACK took. A partition covers the ops between its input
and output tensors: walk back from each delegate's outputs through the producers until its
inputs; the ops never reached run in the interpreter's own (built-in) kernels.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Delegation:
    partitions: int = 0
    delegated: Counter = field(default_factory=Counter)  # op name -> count, run by XNNPACK
    builtin: Counter = field(default_factory=Counter)  # op name -> count, run by the interpreter's kernels

    @property
    def total(self) -> int:
        return sum(self.delegated.values()) + sum(self.builtin.values())

    def summary(self) -> str:
        d = sum(self.delegated.values())
        if not d:
            return "no op delegated: every op runs in LiteRT's built-in kernels"
        rest = ", ".join(f"{k} {v}" for k, v in sorted(self.builtin.items())) or "none"
        return (f"XNNPACK runs {d} of {self.total} ops in {self.partitions} partition(s); "
                f"built-in kernels: {rest}")

    def to_dict(self) -> dict[str, Any]:
        return {"partitions": self.partitions, "xnnpack": dict(self.delegated), "builtin": dict(self.builtin)}


def delegation(interpreter: Any) -> Delegation | None:
    """The split of ``interpreter``'s ops (None when the interpreter does not list its ops)."""
    try:
        ops = interpreter._get_ops_details()
    except Exception:
        return None
    nodes = [o for o in ops if o["op_name"] != "DELEGATE"]
    delegates = [o for o in ops if o["op_name"] == "DELEGATE"]
    producer = {int(t): o for o in nodes for t in o["outputs"]}
    covered: set[int] = set()
    for d in delegates:
        inputs = {int(t) for t in d["inputs"]}
        stack = [int(t) for t in d["outputs"]]
        while stack:
            t = stack.pop()
            n = producer.get(t)
            if t in inputs or n is None or n["index"] in covered:
                continue
            covered.add(n["index"])
            stack.extend(int(i) for i in n["inputs"] if int(i) >= 0)
    out = Delegation(partitions=len(delegates))
    for n in nodes:
        (out.delegated if n["index"] in covered else out.builtin)[n["op_name"]] += 1
    return out
