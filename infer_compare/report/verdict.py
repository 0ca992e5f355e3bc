"""The verdict under the results table: the fastest row at batch 1, the highest throughput and the
smallest artifact, among the rows that passed parity, preferring those whose parity was judged."""

from __future__ import annotations

from dataclasses import dataclass, replace

from infer_compare.base.records import LATENCY, OK, PARITY_FAILED, Report, RunRecord
from infer_compare.report.common import fmt_num, prec_label

REFERENCE = ("pytorch", "pytorch", "fp32")  # backend, format, precision of the reference row (on the CPU)


@dataclass(frozen=True)
class Pick:
    """One line of the verdict: a row, its figure, its speed-up over the reference row."""

    title: str
    row: RunRecord
    value: str
    speedup: float | None
    versus: str  # the reference it is compared with, or why there is none
    caveats: tuple[str, ...] = ()
    with_batch: bool = True  # False for the artifact, which serves every batch size

    def text(self) -> str:
        sp = f"{self.speedup:.3g}× the reference ({self.versus})" if self.speedup is not None else self.versus
        tail = "".join(f"; {c}" for c in self.caveats)
        return f"{self.title}: {row_label(self.row, self.with_batch)}, {self.value}, {sp}{tail}"


@dataclass(frozen=True)
class Verdict:
    picks: tuple[Pick, ...]
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        return [p.text() for p in self.picks] + list(self.notes)


def row_label(r: RunRecord, with_batch: bool = True) -> str:
    b = f", batch {r.batch_size}" if r.batch_size is not None and with_batch else ""
    return f"{r.backend} {r.format} {prec_label(r)} on {r.device}{b}"


def passed_parity(r: RunRecord) -> bool:
    return (r.status == OK and r.batch_size is not None and r.latency is not None and r.parity is not None
            and r.parity.passed)


def reference_rows(rep: Report, device: str, scenario: str = LATENCY) -> list[RunRecord]:
    """The reference for a row on ``device``: PyTorch fp32 on the CPU of the same machine (merged reports
    prefix devices with the machine), or, where that did not run, PyTorch fp32 on ``device`` itself; in
    the scenario asked."""
    prefix = device.split(":", 1)[0] + ":" if getattr(rep, "machines", None) else ""
    ref = [r for r in rep.rows if (r.backend, r.format, r.precision) == REFERENCE and r.status == OK
           and r.latency is not None and r.batch_size is not None and getattr(r, "scenario", LATENCY) == scenario]
    return [r for r in ref if r.device == f"{prefix}cpu"] or [r for r in ref if r.device == device]


def _ref_at(rep: Report, r: RunRecord) -> RunRecord | None:
    """The reference at ``r``'s batch size, in ``r``'s scenario where it was measured, else in the latency one."""
    for scen in dict.fromkeys((getattr(r, "scenario", LATENCY), LATENCY)):
        ref = next((x for x in reference_rows(rep, r.device, scen) if x.batch_size == r.batch_size), None)
        if ref is not None:
            return ref
    return None


def _scen(r: RunRecord) -> str:
    return f", {r.scenario} scenario" if getattr(r, "scenario", LATENCY) != LATENCY else ""


def _caveats(r: RunRecord) -> tuple[str, ...]:
    out = []
    if r.parity is not None and not r.parity.judged:
        out.append("parity reported, not judged")
    if r.latency is not None and r.latency.budget_ran_out:
        out.append("its p50 missed the CI target")
    return tuple(out)


def _fastest(rep: Report, ok: list[RunRecord]) -> Pick | None:
    b1 = sorted((r for r in ok if r.batch_size == 1 and getattr(r, "scenario", LATENCY) == LATENCY),
                key=lambda r: r.latency.p50_ms)  # type: ignore[union-attr]
    if not b1:
        return None
    f = b1[0]
    ref = _ref_at(rep, f)
    caveats = _caveats(f)
    if len(b1) > 1:
        a, b = f.latency, b1[1].latency
        if a and b and a.median_ci_high_ms is not None and b.median_ci_low_ms is not None \
                and b.median_ci_low_ms <= a.median_ci_high_ms:
            caveats += (f"not told apart from {row_label(b1[1])} (their p50 confidence intervals overlap)",)
    if ref is None:
        return Pick("fastest at batch 1", f, f"p50 {fmt_num(f.latency.p50_ms)} ms", None,  # type: ignore[union-attr]
                    "no PyTorch fp32 row at batch 1 to compare with", caveats)
    return Pick("fastest at batch 1", f, f"p50 {fmt_num(f.latency.p50_ms)} ms",  # type: ignore[union-attr]
                ref.latency.p50_ms / f.latency.p50_ms,  # type: ignore[union-attr]
                f"PyTorch fp32 on {ref.device}: {fmt_num(ref.latency.p50_ms)} ms", caveats)  # type: ignore


def _highest_throughput(rep: Report, ok: list[RunRecord]) -> Pick | None:
    cands = [r for r in ok if r.throughput]
    if not cands:
        return None
    f = max(cands, key=lambda r: r.throughput or 0.0)
    value = f"{fmt_num(f.throughput)} img/s"
    ref = _ref_at(rep, f)
    if ref is not None and ref.throughput:
        return Pick("highest throughput", f, value, (f.throughput or 0) / ref.throughput,
                    f"PyTorch fp32 on {ref.device} at batch {ref.batch_size}{_scen(ref)}: {fmt_num(ref.throughput)} "
                    "img/s", _caveats(f))
    refs = [x for x in reference_rows(rep, f.device) if x.throughput]
    if not refs:
        return Pick("highest throughput", f, value, None, "no PyTorch fp32 row to compare with", _caveats(f))
    best = max(refs, key=lambda x: x.throughput or 0.0)
    return Pick("highest throughput", f, value, (f.throughput or 0) / (best.throughput or 1),
                f"PyTorch fp32 on {best.device} has no batch {f.batch_size}; its best, batch {best.batch_size}: "
                f"{fmt_num(best.throughput)} img/s", _caveats(f))


def _smallest(rep: Report, ok: list[RunRecord]) -> Pick | None:
    cands = [r for r in ok if r.export is not None and r.export.size_bytes > 0]
    if not cands:
        return None
    f = min(cands, key=lambda r: r.export.size_bytes)  # type: ignore[union-attr]
    size = f.export.size_bytes  # type: ignore[union-attr]
    refs = [x for x in reference_rows(rep, f.device) if x.export is not None and x.export.size_bytes > 0]
    title, value = "smallest artifact", f"{fmt_num(size / 1e6)} MB"
    if not refs:
        return Pick(title, f, value, None, "no PyTorch fp32 weights to compare with", _caveats(f), False)
    ref_size = refs[0].export.size_bytes  # type: ignore[union-attr]
    return Pick(title, f, value, None, f"{ref_size / size:.3g}× smaller than the PyTorch fp32 weights "
                f"({fmt_num(ref_size / 1e6)} MB)", _caveats(f), False)


def _not_judged(rows: list[RunRecord]) -> str:
    """Why these rows' parity was not judged, in a few words (their parity note names it)."""
    notes = {(r.parity.note if r.parity is not None else "") for r in rows}
    return "random weights" if any("random weights" in n for n in notes) else "parity reported, not judged"


def _pick(find, rep: Report, judged: list[RunRecord], unjudged: list[RunRecord]) -> Pick | None:
    """``find``'s pick among the rows whose parity was judged and passed; where there is none, among the
    rows that passed without being judged, titled so that it does not read as a recommendation."""
    p = find(rep, judged)
    if p is not None or not unjudged:
        return p
    p = find(rep, unjudged)
    if p is None:
        return None
    why = _not_judged([p.row])
    return replace(p, title=f"{p.title} (not judged: {why})",
                   caveats=tuple(c for c in p.caveats if c != "parity reported, not judged"))


def _merge(fast: Pick | None, thr: Pick | None) -> tuple[Pick | None, Pick | None]:
    """One line where the fastest row at batch 1 is also the highest throughput (one batch size, say)."""
    if fast is None or thr is None or fast.row is not thr.row:
        return fast, thr
    title = fast.title.replace("fastest at batch 1", "fastest at batch 1 and highest throughput", 1)
    return replace(fast, title=title, value=f"{fast.value}, {thr.value}"), None


def verdict(rep: Report) -> Verdict:
    """The fastest row at batch 1 and the highest throughput among the rows that passed parity, each with
    its speed-up over the reference (PyTorch fp32 on the CPU at the same batch, see :func:`reference_rows`),
    and the smallest artifact among them. Rows whose parity was judged come first; a pick among rows that
    were not judged (int8 with random weights) says so in its title. No row is named twice for one claim."""
    ok = [r for r in rep.rows if passed_parity(r)]
    judged = [r for r in ok if r.parity is not None and r.parity.judged]
    unjudged = [r for r in ok if r.parity is not None and not r.parity.judged]
    fast, thr = _merge(_pick(_fastest, rep, judged, unjudged), _pick(_highest_throughput, rep, judged, unjudged))
    picks = tuple(p for p in (fast, thr, _pick(_smallest, rep, judged, unjudged)) if p is not None)
    notes = []
    passed_over = [r for r in unjudged if all(p.row is not r for p in picks)]
    if judged and passed_over:
        notes.append(f"not picked: {len(passed_over)} row{'s' if len(passed_over) != 1 else ''} that passed "
                     f"parity without being judged ({_not_judged(passed_over)})")
    failed = [r for r in rep.rows if r.status == PARITY_FAILED]
    if failed:
        notes.append(f"left out: {len(failed)} rows that failed parity")
    if not picks:
        notes.append("no measured row passed parity: nothing to pick")
    return Verdict(picks, tuple(notes))
