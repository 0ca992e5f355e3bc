"""Comparison of a row's outputs with the reference, output by output, each by what it means, and accuracy.

A row is judged on the mean **and** on its worst sample: the cosine similarity of
every sample's logits with the reference's must reach ``min_cosine_worst``, so
that one badly wrong image out of 32 fails even when the mean hides it. Where the
precision's :class:`~infer_compare.catalog.formats.Tolerance` has no ``min_cosine_worst``,
the worst sample may be :data:`WORST_MARGIN` times as far from 1 as the mean may be
(fp32 0.9997, tf32/fp16 0.997, bf16 0.97, int8 0.85); the reports committed under
reports/ show the real worst samples well inside these (fp16 >= 0.9994,
bf16 >= 0.989, int8 >= 0.948 with random weights).

A row that is not judged (int8 with random weights) still fails below a sanity
floor: non-finite outputs, a mean cosine below :data:`FLOOR_COSINE_MEAN` or a sample
below :data:`FLOOR_COSINE_WORST`.

These are the rules for class scores. Every output is judged by what it means (kinds.py:
scores, map, sequence, detections, regression, other; :func:`compare_kind`): a recognizer's sequences go to
sequences.compare_sequences (the text read), a detector's head to detections.compare_detections, the others to
values.compare_values (errors relative to their scale, cosine only where the reference is not
near zero, mask IoU for dense maps; never failing at float rounding level, checks.ROUNDING_REL). Each
result names the check that decided it and its margin (:func:`decide`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from infer_compare.base.records import ParityResult
from infer_compare.catalog.formats import Tolerance
from infer_compare.parity.det_groups import Group, find_groups
from infer_compare.parity.detections import compare_detections, parse_head, recognize
from infer_compare.parity.kinds import DETECTIONS, REGRESSION, SCORES, SEQUENCE, infer_kind
from infer_compare.parity.scores import compare
from infer_compare.parity.sequences import compare_sequences
from infer_compare.parity.values import compare_values


def is_classifier(ref: np.ndarray) -> bool:
    """A classifier-shaped output: [N, classes >= 2]. Only these get top-1/top-5 and accuracy."""
    return infer_kind(ref) == SCORES


def match_outputs(ref: dict[str, np.ndarray], out: Any) -> tuple[dict[str, np.ndarray | None], str]:
    """The row's output for each reference output: by name, else (the same number of outputs) by
    position, with a note saying so; an output the row lacks is None."""
    if not isinstance(out, dict):
        out = {"": out}
    if all(k in out for k in ref):
        return {k: out[k] for k in ref}, ""
    if len(out) == len(ref):
        got = list(out.values())
        pairs = ", ".join(f"{r} <- {o or '(unnamed)'}" for r, o in zip(ref, out, strict=True))
        return {k: got[i] for i, k in enumerate(ref)}, f"outputs matched by position ({pairs})"
    return {k: out.get(k) for k in ref}, ""


def _missing(name: str, why: str, tol: Tolerance, judge: bool, n: int) -> ParityResult:
    return ParityResult(n=n, max_abs=float("inf"), mean_abs=float("inf"),
                        rel_max=float("inf"), cosine_mean=0.0,
                        cosine_min=0.0, top1_agreement=None, top5_agreement=None, judged=judge, passed=False,
                        failures=(why,), floor_failures=(why,), tolerance=tol.as_dict(), output=name)


def compare_kind(ref: np.ndarray, out: np.ndarray, tol: Tolerance, kind: str = "",
                 labels: np.ndarray | None = None,
                 judge: bool = True, judge_top1: bool = True, note: str = "") -> ParityResult:
    """One output judged by what it means (``kind``, parity/kinds.py; "" infers it): class scores by
    :func:`compare`, sequences by sequences.compare_sequences, anything else by values.compare_values."""
    if np.shape(out) != np.shape(ref):  # a failed row that says so, never an exception out of the comparison
        return _missing("", f"output shape {list(np.shape(out))} differs from the reference's "
                            f"{list(np.shape(ref))}", tol, judge, len(ref))
    kind = kind or infer_kind(ref)
    if kind.split(":")[0] == DETECTIONS:
        head = parse_head(kind.partition(":")[2]) if ":" in kind else recognize(ref)
        if head is not None and not head.corners:  # a head of several outputs is judged as a group
            return compare_detections(ref, out, tol, head, judge=judge, note=note)
        kind = infer_kind(ref) if infer_kind(ref) != DETECTIONS else REGRESSION
    if kind == SCORES:
        return compare(ref, out, tol, labels=labels, judge=judge, judge_top1=judge_top1, note=note)
    if kind == SEQUENCE:
        return compare_sequences(ref, out, tol, judge=judge, note=note)
    return compare_values(ref, out, tol, kind, judge=judge, note=note)


def _one_output(name: str, ref: np.ndarray, out: np.ndarray | None, tol: Tolerance, labels: np.ndarray | None,
                judge: bool, judge_top1: bool, note: str, kind: str) -> ParityResult:
    n = len(ref)
    if out is None:
        return _missing(name, "the row gave no such output", tol, judge, n)
    out = np.asarray(out)
    if out.shape != np.shape(ref):
        return _missing(name, f"shape {list(out.shape)} differs from the reference's {list(np.shape(ref))}",
                        tol, judge, n)
    return compare_kind(ref, out, tol, kind, labels=labels, judge=judge, judge_top1=judge_top1,
                        note=note).replace(output=name)


def _group(g: Group, ref: dict[str, np.ndarray], outs: dict[str, Any], tol: Tolerance, judge: bool,
           note: str) -> ParityResult:
    """A detection head of several outputs (parity/det_groups.py), judged on what it detects."""
    n = len(next(iter(ref.values())))
    for k in g.names:
        if outs.get(k) is None:
            return _missing(g.name, f"the row gave no output {k!r}", tol, judge, n)
    width = g.ragged_fit(ref, outs)  # torchvision: K may differ, padded to one; any other: the same shapes
    for k in g.names:
        if not width and np.shape(outs[k]) != np.shape(ref[k]):
            return _missing(g.name, f"output {k!r}: shape {list(np.shape(outs[k]))} differs from the "
                                    f"reference's {list(np.shape(ref[k]))}", tol, judge, n)
    return compare_detections(g.stack(ref, width), g.stack(outs, width), tol, g.head, judge=judge,
                              note=note).replace(output=g.name)


def _worst(per: list[ParityResult]) -> ParityResult:
    """The output that decides the row: a failing one first, then the lowest worst-sample cosine."""
    return min(per, key=lambda p: (p.passed, not p.floor_failures, p.margin if p.margin is not None else 1.0,
                                   p.cosine_min, p.cosine_mean, -p.rel_max))


def compare_outputs(ref: dict[str, np.ndarray], out: Any, tol: Tolerance, labels: np.ndarray | None = None,
                    judge: bool = True, judge_top1: bool = True, note: str = "",
                    kinds: dict[str, str] | None = None) -> ParityResult:
    """Every output of a model with several outputs against its reference (``ref``: {name: N x ...}),
    each judged on its own by what it means (``kinds``: {name: kind}, the others inferred; top-1 only
    for class scores), the row's verdict its worst output's (see
    :class:`~infer_compare.base.records.ParityResult`). ``labels`` go to the first class-score output."""
    outs, how = match_outputs(ref, out)
    groups = find_groups(ref, kinds)
    grouped = {k for g in groups for k in g.names}
    kinds = {k: (kinds or {}).get(k) or infer_kind(v) for k, v in ref.items() if k not in grouped}
    first_cls = next((k for k in kinds if kinds[k] == SCORES), None)
    per = [_group(g, ref, outs, tol, judge, note) for g in groups]
    per += [_one_output(k, ref[k], outs[k], tol, labels if k == first_cls else None, judge, judge_top1, note,
                        kinds[k]) for k in kinds]
    w = _worst(per)
    cls = [p for p in per if p.top1_agreement is not None]
    top5 = [p.top5_agreement for p in cls if p.top5_agreement is not None]
    lab = next((p for p in per if p.output == first_cls), None)
    failures = tuple(f"output '{p.output}': {f}" for p in per for f in p.failures)
    floor = tuple(f"output '{p.output}': {f}" for p in per for f in p.floor_failures)
    return w.replace(
        top1_agreement=min(p.top1_agreement for p in cls) if cls else None,  # type: ignore[type-var]
        top5_agreement=min(top5) if top5 else None,
        accuracy=lab.accuracy if lab is not None else None,
        reference_accuracy=lab.reference_accuracy if lab is not None else None,
        passed=all(p.passed for p in per), failures=failures, floor_failures=floor,
        note="; ".join(x for x in (note, how) if x), outputs=tuple(per))
