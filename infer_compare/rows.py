"""A child's result for one batch size, made into the report's row: latency statistics
from the raw samples, throughput, and parity of its outputs against the reference."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .cells import CellResult
from .formats import Tolerance
from .prepare import Prepared
from .records import OK, PARITY_FAILED, RUN_FAILED, SKIPPED, ExportRecord, LatencyStats, RunRecord, Settings


def _failed(res: CellResult, common: dict[str, Any]) -> RunRecord:
    status = res.status if res.status in (SKIPPED, RUN_FAILED) else RUN_FAILED
    kind = ("unsupported" if "static batch" in res.error else "unavailable") if status == SKIPPED else ""
    extra = {k: v for k, v in (("stderr_tail", res.stderr_tail), ("traceback", res.traceback)) if v}
    return RunRecord(**common, status=status, skip_kind=kind, reason=res.error or "unknown failure", hint=res.hint,
                     extra=extra)


def _parity(res: CellResult, out_path: Path, prep: Prepared, tol: Tolerance, precision: str):
    import numpy as np

    from . import parity

    out = np.load(out_path)
    n = len(out)
    minfo, labels = prep.minfo, prep.ds.eval_labels
    judge = not (precision == "int8" and not minfo.meaningful_top1)
    note = "" if judge else "int8 with random weights: reported, not judged"
    return parity.compare(prep.ref[:n], out, tol, labels=labels[:n] if labels is not None else None, judge=judge,
                          judge_top1=minfo.meaningful_top1, note=note)


def record_from_result(res: CellResult, base: dict[str, Any], art: ExportRecord, prep: Prepared, tol: Tolerance,
                       out_path: Path | None, settings: Settings) -> RunRecord:
    b = res.batch_size
    common = dict(base, batch_size=b, export=art, peak_rss_mb=res.peak_rss_mb)
    if not res.ok:
        return _failed(res, common)
    samples = tuple(int(s) for s in res.samples_ns)
    wall_s = res.wall_ns / 1e9
    par, status, reason = None, OK, ""
    if out_path is not None:
        par = _parity(res, out_path, prep, tol, base["precision"])
        if not par.passed:
            status, reason = PARITY_FAILED, par.reason or "; ".join(par.failures) or "non-finite outputs"
    notes = list(res.notes)
    prec = base["precision"]
    if res.exec_precision and res.exec_precision != prec and prec != "int8":
        notes.append(f"requested {prec}, the runtime executed {res.exec_precision}")
    if res.process > 1:
        notes.append(f"measured in a fresh process (#{res.process}) after the previous one failed")
    return RunRecord(
        **common, status=status, reason=reason, exec_precision=res.exec_precision,
        latency=LatencyStats.from_samples_ns(samples, target_ci=res.loop.get("target_ci"),
                                             stopped_by=res.loop.get("stopped_by", "")), throughput=b * len(samples) / wall_s if wall_s > 0 else None,
        load_s=res.load_s, first_infer_ms=res.first_infer_ms, parity=par, samples_ns=samples, measured_wall_s=wall_s,
        warmup_iters=settings.warmup_iters, versions=dict(res.versions), options=dict(res.settings),
        notes=tuple(notes), extra={**res.extra, "loop": res.loop} if res.loop else dict(res.extra))
