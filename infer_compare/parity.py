"""Comparison of a row's outputs with the PyTorch FP32 reference, and accuracy.

A row is judged on the mean **and** on its worst sample: the cosine similarity of
every sample's logits with the reference's must reach ``min_cosine_worst``, so
that one badly wrong image out of 32 fails even when the mean hides it. Where the
precision's :class:`~infer_compare.formats.Tolerance` has no ``min_cosine_worst``,
the worst sample may be :data:`WORST_MARGIN` times as far from 1 as the mean may be
(fp32 0.9997, tf32/fp16 0.997, bf16 0.97, int8 0.85); the reports committed under
reports/ show the real worst samples well inside these (fp16 >= 0.9994,
bf16 >= 0.989, int8 >= 0.948 with random weights).

A row that is not judged (int8 with random weights) still fails below a sanity
floor: non-finite outputs, a mean cosine below :data:`FLOOR_COSINE_MEAN` or a sample
below :data:`FLOOR_COSINE_WORST`.

These are the rules for class scores. Every output is judged by what it means (output_kinds.py:
scores, map, regression, other; :func:`compare_kind`): outputs that are not class scores go to
parity_values.compare_values (errors relative to their scale, cosine only where the reference is not
near zero, mask IoU for dense maps; never failing at float rounding level, :data:`ROUNDING_REL`). Each
result names the check that decided it and its margin (:func:`decide`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .formats import Tolerance
from .output_kinds import SCORES, infer_kind
from .records import ParityResult

WORST_MARGIN = 3.0
# max abs error / max |reference| at or below this is float32 rounding: an output that is not class scores
# (whose cosine and top-1 rules stay as they are) never fails there
ROUNDING_REL = 5e-6
FLOOR_COSINE_MEAN = 0.9
FLOOR_COSINE_WORST = 0.5


def min_cosine_worst(tol: Tolerance) -> float:
    """The worst sample's minimum cosine for ``tol``: its own field where it has one."""
    v = getattr(tol, "min_cosine_worst", None)
    if v is not None:
        return float(v)
    return 1.0 - WORST_MARGIN * (1.0 - float(tol.min_cosine))


def _topk(a: np.ndarray, k: int) -> np.ndarray:
    k = min(k, a.shape[1])
    return np.argsort(-a, axis=1, kind="stable")[:, :k]


def cosines(ref: np.ndarray, out: np.ndarray, diff: np.ndarray) -> np.ndarray:
    dot = (ref * out).sum(1)
    norms = np.linalg.norm(ref, axis=1) * np.linalg.norm(out, axis=1)
    with np.errstate(invalid="ignore"):
        return np.where(norms > 0, dot / np.where(norms > 0, norms, 1.0), np.where(diff.max(1) == 0, 1.0, 0.0))


def _floor(nonfinite: bool, cos_mean: float, cos_min: float, worst: int) -> list[str]:
    out = []
    if nonfinite:
        out.append("outputs contain NaN or Inf")
        return out
    if cos_mean < FLOOR_COSINE_MEAN:
        out.append(f"cosine {cos_mean:.5f} < {FLOOR_COSINE_MEAN} (sanity floor)")
    if cos_min < FLOOR_COSINE_WORST:
        out.append(f"worst sample (#{worst}) cosine {cos_min:.5f} < {FLOOR_COSINE_WORST} (sanity floor)")
    return out


def _judge(tol: Tolerance, nonfinite: bool, cos_mean: float, cos_min: float, worst: int, rel: float,
           top1: float, judge_top1: bool) -> list[str]:
    failures: list[str] = []
    if nonfinite:
        failures.append("outputs contain NaN or Inf")
    if cos_mean < tol.min_cosine:
        failures.append(f"cosine {cos_mean:.5f} < {tol.min_cosine}")
    worst_min = min_cosine_worst(tol)
    if cos_min < worst_min:
        failures.append(f"worst sample (#{worst}) cosine {cos_min:.5f} < {worst_min:.4g}")
    if tol.max_rel_err is not None and rel > tol.max_rel_err:
        failures.append(f"max rel error {rel:.2e} > {tol.max_rel_err:.0e}")
    if judge_top1 and tol.min_top1 is not None and top1 < tol.min_top1:
        failures.append(f"top-1 agreement {top1:.3f} < {tol.min_top1}")
    return failures


def compare(ref: np.ndarray, out: np.ndarray, tol: Tolerance, labels: np.ndarray | None = None, judge: bool = True,
            judge_top1: bool = True, note: str = "") -> ParityResult:
    """All metrics of ``out`` against ``ref`` (both N x classes logits).

    ``judge=False``: report the figures but fail the row only below the sanity floor
    (e.g. int8 with random weights, whose top-1 margins are tiny). ``judge_top1=False``:
    judge cosine and relative error but not top-1 agreement. ``ParityResult.reason``
    says why a row failed.
    """
    ref = np.asarray(ref, dtype=np.float64).reshape(len(ref), -1)
    out = np.asarray(out, dtype=np.float64).reshape(len(out), -1)
    if ref.shape != out.shape:
        raise ValueError(f"output shape {out.shape} differs from the reference's {ref.shape}")
    if ref.shape[0] == 0:
        raise ValueError("no parity samples")
    diff = np.abs(out - ref)
    scale = float(np.abs(ref).max()) or 1.0
    cos = cosines(ref, out, diff)
    worst = int(np.argmin(np.where(np.isfinite(cos), cos, -np.inf)))
    cos_mean, cos_min = float(cos.mean()), float(cos[worst])
    top1 = float((ref.argmax(1) == out.argmax(1)).mean())
    top5 = None
    if ref.shape[1] >= 5:
        r5, o5 = _topk(ref, 5), _topk(out, 5)
        # agreement of the top-5 *sets*: the share of the reference's top-5 classes found in the row's top-5
        top5 = float(np.mean([len(set(a) & set(b)) / 5.0 for a, b in zip(r5, o5, strict=True)]))
    acc = ref_acc = None
    if labels is not None:
        labels = np.asarray(labels)
        acc = float((out.argmax(1) == labels).mean())
        ref_acc = float((ref.argmax(1) == labels).mean())
    nonfinite = not np.isfinite(out).all()
    rel = float(diff.max()) / scale if diff.size else 0.0
    failures = _judge(tol, nonfinite, cos_mean, cos_min, worst, rel, top1, judge_top1)
    floor = _floor(nonfinite, cos_mean, cos_min, worst)
    # class scores keep their rules (no rounding-level pass: there their cosine is ~1 anyway)
    decided = decide(_score_checks(tol, cos_mean, cos_min, worst, rel, top1 if judge_top1 else None))
    passed = not floor and (not failures or not judge)
    return ParityResult(
        n=int(ref.shape[0]),
        max_abs=float(diff.max()) if diff.size else 0.0,
        mean_abs=float(diff.mean()) if diff.size else 0.0,
        rel_max=rel,
        cosine_mean=cos_mean,
        cosine_min=cos_min,
        top1_agreement=top1,
        top5_agreement=top5,
        accuracy=acc,
        reference_accuracy=ref_acc,
        judged=judge,
        passed=passed,
        failures=tuple(failures),
        tolerance={**tol.as_dict(), "min_cosine_worst": min_cosine_worst(tol), "top1_judged": bool(judge and judge_top1),
                   "floor_cosine_mean": FLOOR_COSINE_MEAN, "floor_cosine_worst": FLOOR_COSINE_WORST},
        note=note,
        worst_index=worst,
        floor_failures=tuple(floor),
        kind=SCORES,
        **decided,
    )


def _score_checks(tol: Tolerance, cos_mean: float, cos_min: float, worst: int, rel: float,
                  top1: float | None) -> list[tuple[str, float, float, bool]]:
    """The checks of class scores, as (name, value, limit, higher is better), for :func:`decide`."""
    checks = [("cosine", cos_mean, float(tol.min_cosine), True),
              (f"worst sample (#{worst}) cosine", cos_min, min_cosine_worst(tol), True)]
    if tol.max_rel_err is not None:
        checks.append(("max abs error / max |reference|", rel, float(tol.max_rel_err), False))
    if top1 is not None and tol.min_top1 is not None:
        checks.append(("top-1 agreement", top1, float(tol.min_top1), True))
    return checks


def margin(value: float, limit: float, higher_is_better: bool) -> float:
    """The share of the allowance left: 1 no error, 0 on the limit, < 0 failed (the limit's distance from
    a perfect value, 1 for a cosine or an agreement and 0 for an error, is the allowance)."""
    if not np.isfinite(value):
        return float("-inf")
    if higher_is_better:
        room = (1.0 - limit) if limit < 1.0 else (abs(limit) or 1.0)
        return float((value - limit) / room)
    return float((limit - value) / limit) if limit > 0 else (0.0 if value <= 0 else float("-inf"))


def decide(checks: list[tuple[str, float, float, bool]]) -> dict[str, Any]:
    """The check (name, value, limit, higher is better) nearest to failing, or most failed: the metric that
    judged the output, as ParityResult fields."""
    if not checks:
        return {}
    name, value, limit, hb = min(checks, key=lambda c: margin(c[1], c[2], c[3]))
    m = margin(value, limit, hb)
    return {"metric": name, "metric_value": float(value), "metric_limit": float(limit),
            "margin": m if np.isfinite(m) else -1e9}


def _rounding(rel: float) -> dict[str, Any]:
    return {"metric": "max abs error / max |reference| (float rounding level: never fails)",
            "metric_value": float(rel), "metric_limit": ROUNDING_REL, "margin": margin(rel, ROUNDING_REL, False)}


def checks_result(checks: list[tuple[str, float, float, bool]], *, nonfinite: bool, judge: bool, rel: float,
                  tol: Tolerance, floor_cos: tuple[float, float, int] | None, **fields: Any) -> ParityResult:
    """A ParityResult judged on ``checks`` (name, value, limit, higher is better): it fails on any check
    outside its limit, or below the sanity floor (non-finite outputs; ``floor_cos``: mean and worst cosine
    and the worst sample, where cosine means something); at float rounding level it never fails."""
    failures = ["outputs contain NaN or Inf"] if nonfinite else []
    for name, v, lim, hb in checks:
        if not (v >= lim if hb else v <= lim):
            failures.append(f"{name} {v:.4g} {'<' if hb else '>'} {lim:.4g} (off by {abs(v - lim):.2g})")
    floor = _floor(nonfinite, *floor_cos) if floor_cos is not None else (
        ["outputs contain NaN or Inf"] if nonfinite else [])
    decided = decide(checks)
    if not nonfinite and rel <= ROUNDING_REL:
        failures, floor, decided = [], [], _rounding(rel)
    return ParityResult(
        judged=judge, passed=not floor and (not failures or not judge), failures=tuple(failures),
        floor_failures=tuple(floor), tolerance={**tol.as_dict(), "min_cosine_worst": min_cosine_worst(tol),
                                                "rounding_rel": ROUNDING_REL},
        **decided, **fields)


# ---------------------------------------------------------------- several outputs


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
    return ParityResult(n=n, max_abs=float("inf"), mean_abs=float("inf"), rel_max=float("inf"), cosine_mean=0.0,
                        cosine_min=0.0, top1_agreement=None, top5_agreement=None, judged=judge, passed=False,
                        failures=(why,), floor_failures=(why,), tolerance=tol.as_dict(), output=name)


def compare_kind(ref: np.ndarray, out: np.ndarray, tol: Tolerance, kind: str = "", labels: np.ndarray | None = None,
                 judge: bool = True, judge_top1: bool = True, note: str = "") -> ParityResult:
    """One output judged by what it means (``kind``, output_kinds.py; "" infers it): class scores by
    :func:`compare`, anything else by parity_values.compare_values."""
    kind = kind or infer_kind(ref)
    if kind == SCORES:
        return compare(ref, out, tol, labels=labels, judge=judge, judge_top1=judge_top1, note=note)
    from .parity_values import compare_values

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


def _worst(per: list[ParityResult]) -> ParityResult:
    """The output that decides the row: a failing one first, then the lowest worst-sample cosine."""
    return min(per, key=lambda p: (p.passed, not p.floor_failures, p.margin if p.margin is not None else 1.0,
                                   p.cosine_min, p.cosine_mean, -p.rel_max))


def compare_outputs(ref: dict[str, np.ndarray], out: Any, tol: Tolerance, labels: np.ndarray | None = None,
                    judge: bool = True, judge_top1: bool = True, note: str = "",
                    kinds: dict[str, str] | None = None) -> ParityResult:
    """Every output of a model with several outputs against its reference (``ref``: {name: N x ...}),
    each judged on its own by what it means (``kinds``: {name: kind}, the others inferred; top-1 only
    for class scores), the row's verdict its worst output's (see :class:`~infer_compare.records.ParityResult`).
    ``labels`` go to the first class-score output."""
    outs, how = match_outputs(ref, out)
    kinds = {k: (kinds or {}).get(k) or infer_kind(v) for k, v in ref.items()}
    first_cls = next((k for k in ref if kinds[k] == SCORES), None)
    per = [_one_output(k, ref[k], outs[k], tol, labels if k == first_cls else None, judge, judge_top1, note, kinds[k])
           for k in ref]
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
