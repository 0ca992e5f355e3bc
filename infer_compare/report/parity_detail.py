"""Per-output parity details for the markdown and HTML reports: each output's kind, the metric that
judged it and by how much it passed or failed, and for a failed precision row the first node whose
output diverged from the fp32 graph (parity/divergence.py)."""

from __future__ import annotations

from infer_compare.base.records import ParityResult, Report, RunRecord


def judged_text(p: ParityResult) -> str:
    """e.g. "map, judged by mask IoU 0.9981 (limit 0.99): passed, 81% of the allowance left"."""
    if not p.metric or p.metric_value is None or p.metric_limit is None:
        return ""
    m = p.margin if p.margin is not None else 0.0
    verdict = ("passed" if p.passed else "failed") + ("" if p.judged else " (reported, not judged)")
    how = f"{m:.0%} of the allowance left" if m >= 0 else f"outside the limit by {-m:.3g}× the allowance"
    return (f"{p.kind or 'output'}, judged by {p.metric} {p.metric_value:.5g} (limit {p.metric_limit:.4g}): "
            f"{verdict}, {how}" + (f"; mask IoU {p.mask_iou:.4f}" if p.mask_iou is not None and
                                   p.metric != "mask IoU" else "")
            + (f"; cosine left out on {p.cosine_skipped} near-zero samples" if p.cosine_skipped else "")
            + (f"; {p.sequences['text']}" if (p.sequences or {}).get("text") else ""))


def row_lines(r: RunRecord) -> list[str]:
    """The row's per-output lines (one for a model with one output) and its first diverging node."""
    p = r.parity
    if p is None:
        return []
    out = []
    for q in p.outputs or (p,):
        t = judged_text(q)
        if t:
            out.append(f"{r.label}: " + (f"output '{q.output}' " if q.output else "") + t)
    div = (r.extra or {}).get("first_divergence")
    if isinstance(div, dict) and div.get("text"):
        out.append(f"{r.label}: {div['text']}")
    return out


def lines(rep: Report) -> list[str]:
    """Every failed row's lines, and those of each artifact's first measured row (its smallest batch)."""
    seen: set[tuple] = set()
    out: list[str] = []
    for r in rep.rows:
        if r.parity is None:
            continue
        key = (r.backend, r.format, r.precision, r.device, getattr(r, "scenario", ""))
        if r.parity.passed and key in seen:
            continue
        seen.add(key)
        out += row_lines(r)
    return out
