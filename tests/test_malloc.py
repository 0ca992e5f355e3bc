"""glibc's malloc thresholds fixed in the A/B gate's processes (host/malloc.py, measure/ab.py ``_malloc``)."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from infer_compare.host import malloc
from infer_compare.measure import ab
from infer_compare.measure.ab_proc import SideFailed

glibc = pytest.mark.skipif(not malloc.available(), reason="the C library is not glibc")

# three 15 MiB buffers made, touched and freed, eight times: with glibc's moving thresholds the heap's top
# goes back to the system after each round and comes back as fresh pages (faults); fixed, it stays
_ROUNDS = """
import resource, sys
import numpy as np
from infer_compare.host import malloc
if sys.argv[1] == "fix":
    print(malloc.fix())
got = []
for _ in range(8):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    xs = [np.ones(15 << 18, dtype=np.float32) for _ in range(3)]
    del xs
    got.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
print(got)
"""


def _faults(mode: str) -> tuple[str, list[int]]:
    out = subprocess.run([sys.executable, "-c", _ROUNDS, mode], capture_output=True, text=True, timeout=120,
                         check=True).stdout.strip().splitlines()
    return (out[0] if mode == "fix" else ""), [int(x) for x in out[-1].strip("[]").split(",")]


@glibc
def test_fixed_thresholds_keep_freed_buffers_and_say_what_was_set():
    said, fixed = _faults("fix")
    _, default = _faults("default")
    assert said.startswith("glibc ") and "mmap threshold 32 MiB" in said and "fixed" in said
    # after the first round nothing is faulted again when fixed; glibc's moving thresholds fault every round
    assert max(fixed[1:]) < 50, fixed
    assert min(default[2:]) > 10 * max(1, max(fixed[1:])), (default, fixed)


def test_where_the_c_library_is_not_glibc_nothing_is_changed(monkeypatch):
    monkeypatch.setattr(malloc, "glibc_version", lambda: "")
    assert not malloc.available()
    with pytest.raises(OSError, match="not glibc"):
        malloc.fix()


class _Kid:
    def __init__(self, can: bool, answer: dict | None = None):
        self.hello = {"hello": 2, "malloc": can} if can is not None else {"hello": 2}
        self.answer = answer or {"ok": True, "malloc": "glibc 2.36 malloc: ... fixed"}
        self.asked: list[dict] = []

    def ask(self, cmd, timeout_s):
        self.asked.append(cmd)
        return self.answer


def test_both_sides_fixed_only_where_both_can():
    kids = {"a": _Kid(True), "b": _Kid(True)}
    assert ab._malloc(kids, ab.PairPlan()) == "glibc 2.36 malloc: ... fixed"
    assert all(k.asked == [{"op": "malloc"}] for k in kids.values())
    # side B's infer-compare (another interpreter) cannot: neither side is changed, and the rows say why
    kids = {"a": _Kid(True), "b": _Kid(None)}
    said = ab._malloc(kids, ab.PairPlan())
    assert "side B cannot" in said and "neither" in said and not any(k.asked for k in kids.values())
    # switched off: nobody is asked
    kids = {"a": _Kid(True), "b": _Kid(True)}
    assert "--malloc default" in ab._malloc(kids, ab.PairPlan(malloc=False))
    assert not any(k.asked for k in kids.values())


def test_a_side_whose_mallopt_fails_is_a_failed_side():
    kids = {"a": _Kid(True),
            "b": _Kid(True, {"ok": False, "status": "run_failed", "error": "malloc: refused"})}
    with pytest.raises(SideFailed, match="side B: malloc: refused") as e:
        ab._malloc(kids, SimpleNamespace(malloc=True, timeout_s=1.0))
    assert e.value.side == "b"
