"""The verdict under the results table: the fastest row at batch 1, the highest throughput and the
smallest artifact, among the rows that passed parity, preferring those whose parity was judged.

The timings are rankings with ties: a line names one row only where its interval (the 95 % interval of its
p50: from its processes and windows, else the within-loop CI of older files) tells it apart from the next
row's (the ratio of the two outside the interval of that ratio, :func:`tied`); otherwise it names every row
the best's figure does not tell apart from it, as a tie within the noise."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from infer_compare.base.records import LATENCY, OK, PARITY_FAILED, Report, RunRecord
from infer_compare.report.common import fmt_num, prec_label

REFERENCE = ("pytorch", "pytorch", "fp32")  # backend, format, precision of the reference row (on the CPU)
TIE_NAMED = 4  # rows a tie names; the others are counted


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
    ties: tuple[RunRecord, ...] = ()  # the rows whose interval reaches ``row``'s, next best first
    speedups: tuple[float, ...] = ()  # with ties: each tied row's speed-up (``row``'s first)

    def text(self) -> str:
        if self.ties:
            return self._tie_text()
        sp = f"{self.speedup:.3g}× the reference ({self.versus})" if self.speedup is not None else self.versus
        tail = "".join(f"; {c}" for c in self.caveats)
        return f"{self.title}: {row_label(self.row, self.with_batch)}, {self.value}, {sp}{tail}"

    def _tie_text(self) -> str:
        rows = (self.row, *self.ties)
        named, more = rows[:TIE_NAMED], len(rows) - TIE_NAMED
        rest = f" and {more} more row{'s' if more > 1 else ''} within it" if more > 0 else ""
        sp = self.versus
        if self.speedups:
            lo, hi = min(self.speedups), max(self.speedups)
            sp = (f"{lo:.3g}×" if f"{lo:.3g}" == f"{hi:.3g}" else f"{lo:.3g}-{hi:.3g}×") + \
                f" the reference ({self.versus})"
        tail = "".join(f"; {c}" for c in self.caveats)
        return f"{self.title}: tie within the noise: {tied_label(named)} ({self.value}){rest}, {sp}{tail}"


@dataclass(frozen=True)
class Verdict:
    picks: tuple[Pick, ...]
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        return [p.text() for p in self.picks] + list(self.notes)


def row_label(r: RunRecord, with_batch: bool = True) -> str:
    b = f", batch {r.batch_size}" if r.batch_size is not None and with_batch else ""
    return f"{r.backend} {r.format} {prec_label(r)} on {r.device}{b}"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def tied_label(rows) -> str:
    """Rows of a tie in their order, neighbours of one runtime, format, device and batch size together:
    'onnxruntime onnx tf32 and fp16 on cuda:0, batch 1'; groups apart with 'and' (two of one precision
    each), else with ';'."""
    groups: list[tuple[tuple, list[str]]] = []
    for r in rows:
        key = (r.backend, r.format, r.device, r.batch_size)
        if groups and groups[-1][0] == key:
            groups[-1][1].append(prec_label(r))
        else:
            groups.append((key, [prec_label(r)]))
    texts = [f"{b} {f} {_and(precs)} on {d}" + (f", batch {n}" if n is not None else "")
             for (b, f, d, n), precs in groups]
    return _and(texts) if len(texts) <= 2 and all(len(p) == 1 for _, p in groups) else "; ".join(texts)


def interval(r: RunRecord, what: str = "latency") -> tuple[float, float]:
    """The row's 95 % interval of its p50 (``what`` "latency", ms) or of its throughput (img/s: the p50's
    relative interval carried over); the figure itself at both ends where there is none."""
    lat = r.latency
    p50 = lat.p50_ms if lat is not None else None
    lo = lat.median_ci_low_ms if lat is not None else None
    hi = lat.median_ci_high_ms if lat is not None else None
    if what == "latency":
        return (lo, hi) if lo is not None and hi is not None else (p50 or 0.0, p50 or 0.0)
    tp = r.throughput or 0.0
    if not (p50 and lo and hi):
        return tp, tp
    return tp * p50 / hi, tp * p50 / lo


def tied(ranked: list[RunRecord], what: str = "latency") -> tuple[RunRecord, ...]:
    """The rows after the best of ``ranked`` (best first) that its figure does not tell apart from it: the
    ratio of the two within the 95 % interval of that ratio, sqrt(h_best^2 + h_row^2) on the log scale (h: the
    half-width of each one's interval on the side facing the other). Two intervals that merely overlap are
    not a tie: rows 1.9x apart with ±36 % each overlap, and their ratio is still clear of 1."""
    if len(ranked) < 2:
        return ()
    best = _log_half(ranked[0], what, toward_worse=True)
    out = []
    for r in ranked[1:]:
        gap = abs(math.log(_figure(r, what) / _figure(ranked[0], what)))
        if gap <= math.hypot(best, _log_half(r, what, toward_worse=False)):
            out.append(r)
    return tuple(out)


def _figure(r: RunRecord, what: str) -> float:
    lat = r.latency
    return (lat.p50_ms if lat is not None else 0.0) if what == "latency" else (r.throughput or 0.0)


def _log_half(r: RunRecord, what: str, toward_worse: bool) -> float:
    """The half-width of ``r``'s interval on the log scale, on its worse side (``toward_worse``: slower, less
    throughput) or its better."""
    lo, hi = interval(r, what)
    mid = _figure(r, what)
    if not (mid > 0 and lo > 0 and hi > 0):
        return 0.0
    slow_side = hi / mid if what == "latency" else mid / lo
    fast_side = mid / lo if what == "latency" else hi / mid
    return math.log(slow_side if toward_worse else fast_side)


def passed_parity(r: RunRecord) -> bool:
    return (r.status == OK and r.batch_size is not None and r.latency is not None and r.parity is not None
            and r.parity.passed)


def reference_rows(rep: Report, device: str, scenario: str = LATENCY) -> list[RunRecord]:
    """The reference for a row on ``device``: PyTorch fp32 on the CPU of the same machine (merged reports
    prefix devices with the machine), or, where that did not run, PyTorch fp32 on ``device`` itself; in
    the scenario asked."""
    prefix = device.split(":", 1)[0] + ":" if getattr(rep, "machines", None) else ""
    ref = [r for r in rep.rows if (r.backend, r.format, r.precision) == REFERENCE and r.status == OK
           and r.latency is not None and r.batch_size is not None
           and getattr(r, "scenario", LATENCY) == scenario]
    return [r for r in ref if r.device == f"{prefix}cpu"] or [r for r in ref if r.device == device]


def _ref_at(rep: Report, r: RunRecord) -> RunRecord | None:
    """The reference at ``r``'s batch size, in ``r``'s scenario where it was measured, else in the latency
    one."""
    for scen in dict.fromkeys((getattr(r, "scenario", LATENCY), LATENCY)):
        ref = next((x for x in reference_rows(rep, r.device, scen) if x.batch_size == r.batch_size), None)
        if ref is not None:
            return ref
    return None


def _scen(r: RunRecord) -> str:
    return f", {r.scenario} scenario" if getattr(r, "scenario", LATENCY) != LATENCY else ""


def _caveats(r: RunRecord, timing: bool = True) -> tuple[str, ...]:
    """What to know of a pick: parity not judged; for a timing (``timing``), how its figure was measured."""
    out = []
    if r.parity is not None and not r.parity.judged:
        out.append("parity reported, not judged")
    if not timing:
        return tuple(out)
    lat = r.latency
    if lat is not None and lat.budget_ran_out and not lat.processes:
        out.append("its p50 missed the CI target")
    if lat is not None and lat.unstable:
        out.append(f"±{100 * (lat.median_ci_rel or 0):.0f} % over its {lat.processes} processes (unstable)"
                   if lat.processes else "its windows disagree (unstable)")
    if r.latency is not None and r.latency.disturbed:
        out.append("measured while other processes used the cores (disturbed)")
    return tuple(out)


def _fastest(rep: Report, ok: list[RunRecord]) -> Pick | None:
    b1 = sorted((r for r in ok if r.batch_size == 1 and getattr(r, "scenario", LATENCY) == LATENCY),
                key=lambda r: r.latency.p50_ms)  # type: ignore[union-attr]
    if not b1:
        return None
    f = b1[0]
    ties = tied(b1)
    ref = _ref_at(rep, f)
    value = "p50 " + " / ".join(fmt_num(r.latency.p50_ms) for r in (f, *ties)[:TIE_NAMED]) + " ms"  # type: ignore
    if ref is None:
        return Pick("fastest at batch 1", f, value, None, "no PyTorch fp32 row at batch 1 to compare with",
                    _caveats(f), ties=ties)
    sp = tuple(ref.latency.p50_ms / r.latency.p50_ms for r in (f, *ties))  # type: ignore[union-attr]
    return Pick("fastest at batch 1", f, value, sp[0],
                f"PyTorch fp32 on {ref.device}: {fmt_num(ref.latency.p50_ms)} ms", _caveats(f),  # type: ignore
                ties=ties, speedups=sp if ties else ())


def _highest_throughput(rep: Report, ok: list[RunRecord]) -> Pick | None:
    cands = sorted((r for r in ok if r.throughput), key=lambda r: -(r.throughput or 0.0))
    if not cands:
        return None
    f = cands[0]
    ties = tied(cands, "throughput")
    value = " / ".join(fmt_num(r.throughput) for r in (f, *ties)[:TIE_NAMED]) + " img/s"
    ref = _ref_at(rep, f)
    if ref is not None and ref.throughput:
        return Pick("highest throughput", f, value, (f.throughput or 0) / ref.throughput,
                    f"PyTorch fp32 on {ref.device} at batch {ref.batch_size}{_scen(ref)}: "
                    f"{fmt_num(ref.throughput)} img/s", _caveats(f), ties=ties,
                    speedups=tuple((r.throughput or 0) / ref.throughput for r in (f, *ties)) if ties else ())
    refs = [x for x in reference_rows(rep, f.device) if x.throughput]
    if not refs:
        return Pick("highest throughput", f, value, None, "no PyTorch fp32 row to compare with", _caveats(f),
                    ties=ties)
    best = max(refs, key=lambda x: x.throughput or 0.0)
    sp = tuple((r.throughput or 0) / (best.throughput or 1) for r in (f, *ties))
    return Pick("highest throughput", f, value, sp[0],
                f"PyTorch fp32 on {best.device} has no batch {f.batch_size}; its best, batch "
                f"{best.batch_size}: {fmt_num(best.throughput)} img/s", _caveats(f), ties=ties,
                speedups=sp if ties else ())


def _smallest(rep: Report, ok: list[RunRecord]) -> Pick | None:
    cands = [r for r in ok if r.export is not None and r.export.size_bytes > 0]
    if not cands:
        return None
    f = min(cands, key=lambda r: r.export.size_bytes)  # type: ignore[union-attr]
    size = f.export.size_bytes  # type: ignore[union-attr]
    refs = [x for x in reference_rows(rep, f.device) if x.export is not None and x.export.size_bytes > 0]
    title, value = "smallest artifact", f"{fmt_num(size / 1e6)} MB"
    if not refs:
        return Pick(title, f, value, None, "no PyTorch fp32 weights to compare with", _caveats(f, False),
                    False)
    ref_size = refs[0].export.size_bytes  # type: ignore[union-attr]
    return Pick(title, f, value, None, f"{ref_size / size:.3g}× smaller than the PyTorch fp32 weights "
                f"({fmt_num(ref_size / 1e6)} MB)", _caveats(f, False), False)


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
    if fast is None or thr is None or fast.row is not thr.row \
            or [id(r) for r in fast.ties] != [id(r) for r in thr.ties]:
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
    fast, thr = _merge(_pick(_fastest, rep, judged, unjudged),
                       _pick(_highest_throughput, rep, judged, unjudged))
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
