"""A stand-in for a compromised node, for tests/fleet_cluster.sh: node-b starts with this folder on its
PYTHONPATH, so every Python process of that node (its Ray workers too) runs this first. Once
infer_compare.fleet.task is imported there, its task functions answer what the file named by
$IC_CRAFTED says, and as the real node would while that file is absent or empty:

    pickle MARKER   an object whose __reduce__ writes MARKER (the argv of the process that unpickles it)
    big N           JSON of N bytes and more
    schema          the real answer with rows[0].batch_size a string (the results schema wants an int)
"""

import importlib.abc
import importlib.machinery
import json
import os
import sys

MODE = os.environ.get("IC_CRAFTED", "")
TASK = "infer_compare.fleet.task"


def _payload() -> list[str]:
    try:
        with open(MODE) as f:
            return f.read().split()
    except OSError:
        return []


class _Reduce:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        code = (f"[__import__('pathlib').Path({self.marker!r}).write_text(' '.join(__import__('sys').argv)), "
                "{'error': 'crafted'}][1]")
        return (eval, (code,))


def _patch(task) -> None:
    real, real_data = task.run_on_node, getattr(task, "run_on_node_data", None)

    def run_on_node(*a, **k):
        p = _payload()
        return _Reduce(p[1]) if p[:1] == ["pickle"] else real(*a, **k)

    def run_on_node_data(*a, **k):
        p = _payload()
        if p[:1] == ["pickle"]:
            return _Reduce(p[1])
        if p[:1] == ["big"]:
            return b'{"error": "' + b"x" * int(p[1]) + b'"}'
        if p[:1] == ["schema"]:
            answer = json.loads(real_data(*a, **k))
            answer["report"]["rows"][0]["batch_size"] = "one"
            return json.dumps(answer).encode()
        return real_data(*a, **k)

    task.run_on_node = run_on_node
    if real_data is not None:
        task.run_on_node_data = run_on_node_data


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TASK:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)
        spec.loader.exec_module = exec_module
        return spec


if MODE:
    sys.meta_path.insert(0, _Finder())
