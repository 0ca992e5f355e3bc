"""A child's result for one batch size and scenario, made into the report's row: latency
statistics from the raw samples, throughput, and parity of its outputs against the reference.

A throughput-scenario result (``scenario="throughput"``) becomes a row of its own: its
latency statistics are those of the requests under load, its throughput the images
completed over the window's wall time, its settings the concurrency used. Its parity is
the batch size's (the same runner ran the parity inputs) and, in addition, the outputs
of the throughput path itself on the timed batch against the reference."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from infer_compare.base import batches
from infer_compare.base.records import (
    OK,
    PARITY_FAILED,
    RUN_FAILED,
    SKIPPED,
    THROUGHPUT,
    ExportRecord,
    LatencyStats,
    ParityResult,
    RunRecord,
    Settings,
)
from infer_compare.catalog.formats import Tolerance
from infer_compare.measure import windows as load_meter
from infer_compare.measure.cells import CellResult
from infer_compare.parity import divergence
from infer_compare.parity import outputs as parity
from infer_compare.prepare.prepared import Prepared


def _failed(res: CellResult, common: dict[str, Any]) -> RunRecord:
    status = res.status if res.status in (SKIPPED, RUN_FAILED) else RUN_FAILED
    kind = ("unsupported" if "static batch" in res.error else "unavailable") if status == SKIPPED else ""
    extra = {k: v for k, v in (("stderr_tail", res.stderr_tail), ("traceback", res.traceback)) if v}
    return RunRecord(**common, status=status, skip_kind=kind, reason=res.error or "unknown failure",
                     hint=res.hint, extra=extra)


def _compare(prep: Prepared, out: Any, n: int, tol: Tolerance, judge: bool, note: str = "",
             batch: int | None = None) -> ParityResult:
    """The first ``n`` outputs against the reference: one output as always; a model with several (a dict
    reference), output by output, the row's verdict its worst output's. A stream model's reference is the one
    computed in groups of the row's ``batch`` size."""
    minfo, labels = prep.minfo, prep.ds.eval_labels
    if prep.stream is not None and batch is not None:
        prep = replace(prep, ref=prep.stream(batch))
    lab = labels[:n] if labels is not None else None
    kinds = getattr(prep, "output_kinds", None) or {}
    if batches.is_multi(prep.ref):
        return parity.compare_outputs(batches.head(prep.ref, n), out, tol, labels=lab, judge=judge,
                                      judge_top1=minfo.meaningful_top1, note=note, kinds=kinds)
    if batches.is_multi(out):  # a one-output model run from a file with more: its first output, as always
        out = next(iter(out.values()))
    return parity.compare_kind(prep.ref[:n], out, tol, next(iter(kinds.values()), ""), labels=lab,
                               judge=judge, judge_top1=minfo.meaningful_top1, note=note)


def _judged(prep: Prepared, precision: str) -> bool:
    """Every row is judged, but int8 of random weights (a built-in model without its pretrained weights),
    whose top-1 margins are tiny: what the output means is another fact (parity/kinds.py)."""
    return not (precision == "int8" and prep.minfo.weights == "random")


def _parity(res: CellResult, out_path: Path, prep: Prepared, tol: Tolerance, precision: str):
    out = batches.load(out_path)
    judge = _judged(prep, precision)
    note = "" if judge else "int8 with random weights: reported, not judged"
    return _compare(prep, out, batches.count(out), tol, judge, note, batch=res.batch_size)


def _throughput_path_parity(res: CellResult, prep: Prepared, tol: Tolerance,
                            precision: str) -> ParityResult | None:
    """The throughput path's own outputs of the timed batch (the first eval inputs, tiled) against the
    reference."""
    if not res.tp_outputs or not Path(res.tp_outputs).exists():
        return None
    out = batches.load(res.tp_outputs)
    n = min(batches.count(out), batches.count(prep.ref))
    return _compare(prep, batches.head(out, n), n, tol, _judged(prep, precision))


def _status(par: ParityResult | None, tp_par: ParityResult | None) -> tuple[str, str]:
    if par is not None and not par.passed:
        return PARITY_FAILED, par.reason or "; ".join(par.failures) or "non-finite outputs"
    if tp_par is not None and not tp_par.passed:
        return PARITY_FAILED, "the throughput path's outputs: " + (tp_par.reason
                                                                   or "; ".join(tp_par.failures))
    return OK, ""


def _throughput_fields(res: CellResult, tp_par: ParityResult | None) -> tuple[dict[str, Any], list[str]]:
    """A throughput row's extra entries and notes."""
    extra: dict[str, Any] = {"throughput_scenario": {"concurrency": res.settings.get("concurrency"),
                                                     "unit": res.settings.get("concurrency_unit"),
                                                     "api": res.settings.get("throughput_api"),
                                                     "images": res.images, "requests": len(res.samples_ns)}}
    notes = [f"throughput scenario: {res.settings.get('throughput_api', '?')}; latency = each request's time "
             "under that load"]
    if tp_par is not None:
        extra["throughput_path_parity"] = tp_par.to_dict()
        notes.append(f"throughput path checked on its own outputs of the timed batch ({tp_par.n} images): "
                     f"cosine min {tp_par.cosine_min:.5f}, max abs {tp_par.max_abs:.3g}")
    return extra, notes


def record_from_result(res: CellResult, base: dict[str, Any], art: ExportRecord, prep: Prepared,
                       tol: Tolerance, out_path: Path | None, settings: Settings) -> RunRecord:
    b = res.batch_size
    tput = res.scenario == THROUGHPUT
    common = dict(base, batch_size=b, export=art, peak_rss_mb=res.peak_rss_mb, scenario=res.scenario)
    if not res.ok:
        return _failed(res, common)
    samples = tuple(int(s) for s in res.samples_ns)
    wall_s = res.wall_ns / 1e9
    par = _parity(res, out_path, prep, tol, base["precision"]) if out_path is not None else None
    tp_par = _throughput_path_parity(res, prep, tol, base["precision"]) if tput else None
    status, reason = _status(par, tp_par)
    if par is None and prep.ref is not None and status == OK:  # measured, but nothing came back to judge
        status, reason = PARITY_FAILED, ("not judged: the run gave no outputs to compare with the reference "
                                         f"(batch {b}); a row that cannot be judged is not ok")
    reason, div = _explained(status, reason, art, prep, tol, base["precision"])
    tp_extra, notes = _throughput_fields(res, tp_par) if tput else ({}, [])
    notes = list(res.notes) + notes
    prec = base["precision"]
    if res.exec_precision and res.exec_precision != prec and prec != "int8":
        notes.append(f"requested {prec}, the runtime executed {res.exec_precision}")
    if res.process > 1:
        notes.append(f"measured in a fresh process (#{res.process}) after the previous one failed")
    images = res.images if tput else b * len(samples)
    latency = _latency(res, samples)
    notes += window_notes(latency, res.loop)
    return RunRecord(
        **common, status=status, reason=reason, exec_precision=res.exec_precision, latency=latency,
        throughput=images / wall_s if wall_s > 0 and images else None,
        load_s=res.load_s, first_infer_ms=res.first_infer_ms, parity=par, samples_ns=samples,
        measured_wall_s=wall_s,
        warmup_iters=settings.warmup_iters, versions=dict(res.versions), options=dict(res.settings),
        notes=tuple(notes),
        extra={**res.extra, **tp_extra, **({"loop": res.loop} if res.loop else {}), **div})


def _explained(status: str, reason: str, art: ExportRecord, prep: Prepared, tol: Tolerance,
               precision: str) -> tuple[str, dict[str, Any]]:
    """A failed fp16 or int8 ONNX row's reason with its first diverging node (parity/divergence.py), and the
    row's extra entry for it; any other row as it is."""
    if status != PARITY_FAILED or not divergence.eligible(art, precision):
        return reason, {}
    clause, d = divergence.explain(art, prep, precision, tol.max_rel_err)
    sep = " " if clause.startswith("(") else "; "
    return f"{reason}{sep}{clause}", {"first_divergence": d}


def _latency(res: CellResult, samples: tuple[int, ...]) -> LatencyStats | None:
    """The row's latency statistics; from the windows the loop kept where it measured in windows
    (bench.py)."""
    if not samples:
        return None
    ws = [w for w in res.loop.get("windows") or () if w.get("used")]
    sizes = tuple(int(w["n"]) for w in ws) if ws else None
    if sizes is not None and sum(sizes) != len(samples):
        sizes = None  # not the samples the windows describe: the within-window CI alone
    return LatencyStats.from_samples_ns(samples, target_ci=res.loop.get("target_ci"),
                                        stopped_by=res.loop.get("stopped_by", ""), windows=sizes,
                                        disturbed=bool(res.loop.get("disturbed")))


def _range_ms(lo: float, hi: float) -> str:
    """'2.9-4.8': two significant digits, more where they would not tell the ends apart."""
    for d in (2, 3, 4):
        a, b = (f"{v:.{d}g}" if v < 10 ** d else f"{v:.0f}" for v in (lo, hi))
        if a != b:
            break
    return f"{a}-{b}"


def load_text(windows: list[dict[str, Any]]) -> str:
    """What the meter saw while ``windows`` (their readings) were measured: 'other processes 0.41 cores,
    steal 0.02; GPU SM 1980 MHz, 44-46 °C'; '' where nothing was read."""
    got = load_meter.summary(windows)
    parts = []
    if "other_cores" in got:
        parts.append(f"other processes {got['other_cores']:.2f} cores, steal {got['steal_cores']:.2f}")
    for key, fmt in (("gpu_sm_mhz", "GPU SM {} MHz"), ("gpu_temp_c", "{} °C"), ("cpu_mhz", "CPU {} MHz")):
        if key in got:
            lo, hi = got[key]
            parts.append(fmt.format(f"{lo:.0f}" if lo == hi else f"{lo:.0f}-{hi:.0f}"))
    return "; ".join(parts)


def window_notes(lat: LatencyStats | None, loop: dict[str, Any]) -> list[str]:
    """The row's notes on its windows: unstable (the windows disagree beyond the target), disturbed (other
    processes used the cores while windows it keeps were measured), windows measured again; each with the
    load beside it and the clocks and temperature where they were read."""
    ws = list(loop.get("windows") or ())
    if lat is None or not ws or lat.windows is None:
        return []
    kept = [w for w in ws if w.get("used")]
    again = [w for w in ws if not w.get("used")]
    beside = load_text(kept)
    out = []
    if lat.unstable and lat.window_min_ms is not None and lat.window_max_ms is not None:
        aim = f"±{100 * lat.target_ci:g} %" if lat.target_ci else "±2 % (no --target-ci)"
        r = lat.median_ci_rel
        out.append(f"windows {_range_ms(lat.window_min_ms, lat.window_max_ms)} ms: unstable ({lat.windows} "
                   f"windows disagree beyond the {aim} target"
                   + (f": p50 ±{100 * r:.1f} %" if r is not None else "")
                   + (f"; {beside}" if beside else "") + ")")
    if lat.disturbed:
        bad = sum(1 for w in kept if w.get("disturbed"))
        tried = sum(1 for w in ws if w.get("remeasured"))
        out.append(f"disturbed: other processes used the cores while {bad} of its {len(kept)} windows were "
                   f"measured ({tried} measured again, the load persisted"
                   + (f"; {beside}" if beside else "") + "): not a clean measurement")
    elif again:
        out.append(f"{len(again)} window{'s' if len(again) > 1 else ''} measured again: other processes used "
                   f"the cores while {'they' if len(again) > 1 else 'it'} ran ({load_text(again)}); "
                   f"the row keeps {len(kept)} clean ones")
    return out
