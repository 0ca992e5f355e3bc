"""A recognizer's output: class scores at every step of a sequence, [N, steps, classes] (a text recognizer's
CTC head: PaddleOCR's, RapidOCR's, ddddocr's; any per-position classifier), judged on what its user reads from
it.

What a user reads is the greedy decoding of each sample: the class of each step (argmax), repeats merged and
the blank (class 0, CTC's convention) dropped, i.e. the text, and its confidence, the mean probability of the
classes kept (PaddleOCR's score of a text line). A row is judged on:

* **texts equal**: the share of samples whose decoding equals the reference's, against the precision's
``min_top1``
  (0.9 where it has none). A sample whose decoding changed only at steps that are near-ties in the reference
  (the top-two margin under twice the error the precision may make, as for class scores) is not judged, and
  counted;
* **steps agreeing**: the share of steps, near-ties left out, whose class agrees, against the same limit;
* **confidence error**: the mean change of a text's confidence over the samples both read the same, against
the
  precision's ``max_rel_err`` (int8: detections.INT8_SCORE_ERR, 0.1), as a detector's matched scores are
  judged; the largest change is reported.

A cosine far from 1 still fails a row that is not judged (parity/checks.py's floors); a row at float rounding
level never fails. Logits are turned into probabilities (softmax over the classes) for the confidence and the
ties.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from infer_compare.base.records import ParityResult
from infer_compare.catalog.formats import Tolerance
from infer_compare.parity.checks import checks_result, cosines
from infer_compare.parity.detections import INT8_SCORE_ERR
from infer_compare.parity.kinds import SEQUENCE, is_step_distribution
from infer_compare.parity.scores import near_ties

BLANK = 0
DEFAULT_MIN_AGREEMENT = 0.9


def probabilities(a: np.ndarray, softmax: bool) -> np.ndarray:
    """``a`` itself, or with ``softmax`` its softmax over the last axis. Whether is the reference's to say: a
    row's int8 softmax sums to 0.988-0.996 (RapidOCR's recognizer), and a softmax of probabilities is flat."""
    if not softmax:
        return a
    z = a - a.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def _kept(ids: np.ndarray, blank: int = BLANK) -> np.ndarray:
    """Which steps CTC's greedy decoding keeps: the first of each run of one class, not the blank."""
    keep = np.ones(len(ids), dtype=bool)
    keep[1:] = ids[1:] != ids[:-1]
    return keep & (ids != blank)


def decode(ids: np.ndarray, blank: int = BLANK) -> tuple[int, ...]:
    """CTC's greedy decoding of one sample's step classes: repeats merged, then the blank dropped."""
    ids = np.asarray(ids)
    return tuple(int(i) for i in ids[_kept(ids, blank)])


def _confidence(p: np.ndarray, ids: np.ndarray) -> float | None:
    """The mean probability of the steps a decoding keeps; None: no text."""
    keep = _kept(ids)
    return float(p[np.flatnonzero(keep), ids[keep]].mean()) if keep.any() else None


def step_ties(p: np.ndarray, tol: Tolerance) -> np.ndarray:
    """[N, steps]: the reference steps that are near-ties by the class-score rule (scores.near_ties: a top-two
    margin under twice the error the precision may make), each step taken as one sample's class scores."""
    return near_ties(p.reshape(-1, p.shape[-1]), tol).reshape(p.shape[:-1])


def tally(ref: np.ndarray, out: np.ndarray, tol: Tolerance, softmax: bool) -> dict[str, Any]:
    """The figures of the module docstring, sample by sample; ``softmax``: the reference is logits."""
    pr, po = probabilities(ref, softmax), probabilities(out, softmax)
    ri, oi = pr.argmax(-1), po.argmax(-1)
    ties = step_ties(pr, tol)
    firm_diff = (ri != oi) & ~ties
    same, changed, tie_only, conf_errs = 0, [], 0, []
    for i in range(len(ref)):
        if decode(ri[i]) == decode(oi[i]):
            same += 1
            cr, co = _confidence(pr[i], ri[i]), _confidence(po[i], oi[i])
            if cr is not None and co is not None:
                conf_errs.append(abs(co - cr))
        elif firm_diff[i].any():
            changed.append(i)
        else:
            tie_only += 1
    firm = int((~ties).sum())
    return {"samples": len(ref), "same": same, "changed": len(changed), "tie_only": tie_only,
            "first_changed": changed[0] if changed else None,
            "texts_read": int(sum(1 for i in range(len(ref)) if decode(ri[i]))),
            "steps": int(ri.size), "steps_judged": firm, "steps_differing": int(firm_diff.sum()),
            "confidence_error": float(np.mean(conf_errs)) if conf_errs else 0.0,
            "confidence_error_max": max(conf_errs) if conf_errs else 0.0}


def _checks(t: dict[str, Any], tol: Tolerance) -> list[tuple[str, float, float, bool]]:
    limit = float(tol.min_top1) if tol.min_top1 is not None else DEFAULT_MIN_AGREEMENT
    judged = t["samples"] - t["tie_only"]
    checks = [("texts equal", t["same"] / judged if judged else 1.0, limit, True),
              ("steps agreeing", 1.0 - t["steps_differing"] / t["steps_judged"] if t["steps_judged"] else 1.0,
               limit, True)]
    err_limit = tol.max_rel_err if tol.max_rel_err is not None else INT8_SCORE_ERR
    checks.append(("texts' mean confidence error", float(t["confidence_error"]), float(err_limit), False))
    return checks


def summary(t: dict[str, Any]) -> str:
    """e.g. "texts: 31 of 32 read the same (1 changed, first #7); steps: 1 of 1270 differ (10 near-ties)"."""
    judged = t["samples"] - t["tie_only"]
    return (f"texts: {t['same']} of {judged} read the same"
            + (f" ({t['changed']} changed, first #{t['first_changed']})" if t["changed"] else "")
            + (f", {t['tie_only']} changed only at near-tie steps not judged" if t["tie_only"] else "")
            + f"; the reference reads text in {t['texts_read']} of {t['samples']} samples"
            + f"; steps: {t['steps_differing']} of {t['steps_judged']} differ"
            + (f" ({t['steps'] - t['steps_judged']} near-ties left out)"
               if t["steps"] > t["steps_judged"] else "")
            + (f"; confidence changed by {t['confidence_error']:.3g} on average, "
               f"{t['confidence_error_max']:.3g} at most" if t["confidence_error_max"] else ""))


def compare_sequences(ref: np.ndarray, out: np.ndarray, tol: Tolerance, judge: bool = True,
                      note: str = "") -> ParityResult:
    """``out`` against ``ref`` ([N, steps, classes], N first): the checks of the module docstring."""
    ref, out = np.asarray(ref, np.float64), np.asarray(out, np.float64)
    if ref.shape != out.shape:
        raise ValueError(f"output shape {out.shape} differs from the reference's {ref.shape}")
    n = len(ref)
    nonfinite = not np.isfinite(out).all()
    softmax = not is_step_distribution(ref)
    t = tally(ref, np.nan_to_num(out, nan=0.0), tol, softmax)
    r, o = ref.reshape(n, -1), np.nan_to_num(out, nan=0.0).reshape(n, -1)
    diff = np.abs(o - r)
    scale = (float(np.abs(r).max()) or 1.0) if softmax else 1.0
    cos = cosines(r, o, diff)
    worst = int(np.argmin(cos))
    max_abs = float(diff.max()) if diff.size else 0.0
    return checks_result(
        _checks(t, tol), nonfinite=nonfinite, judge=judge, rel=max_abs / scale, tol=tol,
        floor_cos=(float(cos.mean()), float(cos[worst]), worst), n=n, max_abs=max_abs,
        mean_abs=float(diff.mean()) if diff.size else 0.0, rel_max=max_abs / scale,
        cosine_mean=float(cos.mean()), cosine_min=float(cos[worst]), top1_agreement=None, top5_agreement=None,
        note="; ".join(x for x in (note, summary(t)) if x), worst_index=worst, kind=SEQUENCE,
        sequences={**t, "text": summary(t)})
