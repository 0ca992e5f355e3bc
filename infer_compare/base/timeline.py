"""Where a comparison's wall time went.

The parent process works in sequence: probing and preparing (inputs, weights, the reference),
then, per configuration, getting its artifact (found in the cache, or built) and measuring it
in its child process. Each step is a span (what, kind, start, wall) in ``Report.timeline``;
``summary()`` adds them up by kind and splits the configurations' time with the rows' own
figures (load, torch.compile's part of it, cold first calls, measuring): what is left is process start,
imports and the runtime's setup outside ``load()``.
"""

from __future__ import annotations

import time
from typing import Any

from infer_compare.base.progress import phase_of

PREPARE, ARTIFACT, CONFIGURATION = "prepare", "artifact", "configuration"


class Timeline:
    """Spans that follow each other: ``mark`` ends the open span and opens the next."""

    def __init__(self, t0: float | None = None):
        self.t0 = time.perf_counter() if t0 is None else t0
        self._spans: list[dict[str, Any]] = []
        self._open: tuple[str, str, float] | None = None

    def mark(self, what: str, kind: str) -> None:
        self.close()
        self._open = (what, kind, time.perf_counter())

    def close(self) -> None:
        if self._open is not None:
            self._spans.append(self._span(*self._open))
            self._open = None

    def _span(self, what: str, kind: str, start: float) -> dict[str, Any]:
        return {"what": what, "kind": kind, "start_s": round(start - self.t0, 3),
                "wall_s": round(time.perf_counter() - start, 3)}

    def spans(self) -> tuple[dict[str, Any], ...]:
        """The spans so far, the open one up to now."""
        return tuple(self._spans) + ((self._span(*self._open),) if self._open is not None else ())


class TimedProgress:
    """A Progress whose ``task`` calls (the preparation's steps) are also spans of a Timeline."""

    def __init__(self, prog: Any, timeline: Timeline):
        self._prog, self.timeline = prog, timeline

    def task(self, msg: str, total: int | None = None) -> None:
        self.timeline.mark(msg, PREPARE)
        self._prog.task(msg, total)

    def step(self, msg: str) -> None:
        getattr(self._prog, "step", _ignore)(msg)  # an older Progress-like object may lack it

    def phase(self, msg: str) -> Any:
        return phase_of(self._prog, msg)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._prog, name)


def _ignore(*_a: Any) -> None:
    return None


def _sum(spans, kind: str) -> float:
    return sum(float(s.get("wall_s") or 0.0) for s in spans if s.get("kind") == kind)


def summary(rep: Any) -> str:
    """One line: the run's wall time by kind of step, the configurations' part split by the rows'
    load, cold first calls and measuring; "" for a report without a timeline (older files, merges)."""
    spans = tuple(getattr(rep, "timeline", ()) or ())
    if not spans:
        return ""
    conf = _sum(spans, CONFIGURATION)
    rows = [r for r in rep.rows if r.load_s is not None]
    load = sum(float(r.load_s or 0.0) for r in rows)
    # torch.compile, inside load
    compiled = sum(float((getattr(r, "options", None) or {}).get("compile_s") or 0.0) for r in rows)
    beside = sum(float(((r.extra or {}).get("gpu_turn") or {}).get("compiled_beside_s") or 0.0) for r in rows)
    first = sum(float(r.first_infer_ms or 0.0) for r in rows) / 1e3
    warm = sum(float(((r.extra or {}).get("loop") or {}).get("warmup_ns") or 0.0) for r in rows) / 1e9
    meas = sum(float(r.measured_wall_s or 0.0) for r in rows)
    rest = conf - load - first - warm - meas
    parts = [f"preparing {_sum(spans, PREPARE):.1f} s", f"artifacts {_sum(spans, ARTIFACT):.1f} s",
             f"configurations {conf:.1f} s (loading {load:.1f} s"
             + (f" of which torch.compile {compiled:.1f} s" if compiled else "")
             + (f", {beside:.1f} s of it beside another configuration's GPU work" if beside else "")
             + f", cold first calls {first:.1f} s, warm-up "
             f"{warm:.1f} s, measuring {meas:.1f} s, processes, parity and the rest {max(rest, 0.0):.1f} s)"]
    total = rep.elapsed_s if rep.elapsed_s is not None else spans[-1]["start_s"] + spans[-1]["wall_s"]
    return f"time: {total:.1f} s: " + ", ".join(parts)
