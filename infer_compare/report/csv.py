"""CSV of the rows, one line per row (skips and failures included), stable column names.

    import pandas as pd
    df = pd.read_csv("results.csv")

Numbers are written in full precision with '.' as decimal point; a missing value
is an empty field. Latency is in milliseconds, throughput in images per second,
sizes in bytes, accuracy and agreement as fractions (0..1). New columns are only
ever appended at the end; existing names never change meaning. A text cell that begins
with ``= + - @``, a tab or a carriage return (a model name, a reason from the input) is
written with a leading ``'`` so that a spreadsheet shows it instead of running it.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

from infer_compare.base.records import PERCENTILE_MIN_SAMPLES, Report, RunRecord
from infer_compare.report.efficiency import efficiency


def _lat(attr: str) -> Callable[[Report, RunRecord, dict], Any]:
    return lambda rep, r, eff: getattr(r.latency, attr) if r.latency is not None else None


def _pct(name: str) -> Callable[[Report, RunRecord, dict], Any]:
    """A percentile only where the row's sample count supports it (records.PERCENTILE_MIN_SAMPLES)."""
    return lambda rep, r, eff: r.latency.percentile(name) if r.latency is not None else None


def _latency_note(r: RunRecord) -> str:
    lat = r.latency
    if lat is None or not lat.omitted_percentiles:
        return ""
    need = ", ".join(f"{k} needs {PERCENTILE_MIN_SAMPLES[k]}" for k in lat.omitted_percentiles)
    return f"{', '.join(lat.omitted_percentiles)} left empty: n = {lat.count} ({need} samples)"


def _par(attr: str) -> Callable[[Report, RunRecord, dict], Any]:
    return lambda rep, r, eff: getattr(r.parity, attr) if r.parity is not None else None


def _per_output(r: RunRecord) -> str:
    outs = r.parity.outputs if r.parity is not None else ()
    keep = ("cosine_mean", "cosine_min", "max_abs", "rel_max", "top1_agreement", "passed", "kind", "metric",
            "margin")
    return json.dumps({p.output: {k: getattr(p, k) for k in keep} for p in outs}) if outs else ""


def _exp(attr: str) -> Callable[[Report, RunRecord, dict], Any]:
    return lambda rep, r, eff: getattr(r.export, attr) if r.export is not None else None


COLUMNS: tuple[tuple[str, Callable[[Report, RunRecord, dict], Any]], ...] = (
    ("label", lambda rep, r, eff: r.label),
    ("model", lambda rep, r, eff: rep.model.name),
    ("backend", lambda rep, r, eff: r.backend),
    ("format", lambda rep, r, eff: r.format),
    ("precision", lambda rep, r, eff: r.precision),
    ("exec_precision", lambda rep, r, eff: r.exec_precision),
    ("device", lambda rep, r, eff: r.device),
    ("batch_size", lambda rep, r, eff: r.batch_size),
    ("status", lambda rep, r, eff: r.status),
    ("threads", lambda rep, r, eff: r.threads),
    ("latency_count", _lat("count")),
    ("latency_mean_ms", _lat("mean_ms")),
    ("latency_std_ms", _lat("std_ms")),
    ("latency_min_ms", _lat("min_ms")),
    ("latency_p50_ms", _lat("p50_ms")),
    ("latency_p90_ms", _pct("p90")),
    ("latency_p95_ms", _pct("p95")),
    ("latency_p99_ms", _pct("p99")),
    ("latency_max_ms", _lat("max_ms")),
    ("throughput_img_s", lambda rep, r, eff: r.throughput),
    ("load_s", lambda rep, r, eff: r.load_s),
    ("first_infer_ms", lambda rep, r, eff: r.first_infer_ms),
    ("peak_rss_mb", lambda rep, r, eff: r.peak_rss_mb),
    ("measured_wall_s", lambda rep, r, eff: r.measured_wall_s),
    ("artifact_path", _exp("path")),
    ("artifact_size_bytes", _exp("size_bytes")),
    ("export_s", _exp("export_s")),
    ("export_cached", _exp("cached")),
    ("parity_n", _par("n")),
    ("parity_max_abs", _par("max_abs")),
    ("parity_mean_abs", _par("mean_abs")),
    ("parity_rel_max", _par("rel_max")),
    ("parity_cosine_mean", _par("cosine_mean")),
    ("parity_cosine_min", _par("cosine_min")),
    ("top1_agreement", _par("top1_agreement")),
    ("top5_agreement", _par("top5_agreement")),
    ("accuracy", _par("accuracy")),
    ("reference_accuracy", _par("reference_accuracy")),
    ("parity_judged", _par("judged")),
    ("parity_passed", _par("passed")),
    ("flops_per_image", lambda rep, r, eff: rep.model.flops_per_image),
    ("achieved_gflops_s", lambda rep, r, eff: eff["gflops_per_s"]),
    ("peak_share", lambda rep, r, eff: eff["peak_share"]),
    ("energy_j_per_image", lambda rep, r, eff: eff["energy_j_per_image"]),
    ("reason", lambda rep, r, eff: r.reason),
    ("hint", lambda rep, r, eff: r.hint),
    ("versions", lambda rep, r, eff: json.dumps(r.versions, sort_keys=True) if r.versions else ""),
    ("created", lambda rep, r, eff: rep.created),
    ("latency_median_ci_low_ms", _lat("median_ci_low_ms")),
    ("latency_median_ci_high_ms", _lat("median_ci_high_ms")),
    ("latency_target_ci", _lat("target_ci")),
    ("latency_stopped_by", _lat("stopped_by")),
    ("latency_note", lambda rep, r, eff: _latency_note(r)),
    ("parity_worst_index", _par("worst_index")),
    ("energy_source", lambda rep, r, eff: eff["energy_source"]),
    ("report_complete", lambda rep, r, eff: rep.complete),  # false on every line of an interrupted run
    # a model with several outputs: the output the row's parity figures are for (its worst), and every
    # output's figures as JSON {name: {cosine_mean, cosine_min, max_abs, rel_max, top1_agreement, passed,
    # kind, metric, margin}}; empty otherwise
    ("parity_output", _par("output")),
    ("parity_per_output", lambda rep, r, eff: _per_output(r)),
    # what the (worst) output means and the check that decided it (parity_detail.py): margin = share of the
    # allowance left, < 0 failed; the first diverging node of a failed fp16/int8 ONNX row
    # (parity/divergence.py)
    ("parity_kind", _par("kind")),
    ("parity_metric", _par("metric")),
    ("parity_margin", _par("margin")),
    ("first_diverging_node", lambda rep, r, eff: ((r.extra or {}).get("first_divergence") or {}).get("node")),
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)


_FORMULA_LEAD = ("=", "+", "-", "@", "\t", "\r")


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return safe_text(str(v))


def safe_text(s: str) -> str:
    """A text cell a spreadsheet will not run: one that begins with ``= + - @``, a tab or a carriage return
    (OWASP's CSV injection) gets a leading ``'``, unless it is a plain number ("-1.5")."""
    if not s.startswith(_FORMULA_LEAD):
        return s
    try:
        float(s)
        return s
    except ValueError:
        return "'" + s


def rows(rep: Report) -> list[dict[str, str]]:
    """The CSV lines as dicts (column name -> text; text that a spreadsheet would take for a formula is
    neutralized, see ``safe_text``)."""
    out = []
    for r in rep.rows:
        eff = efficiency(rep, r)
        out.append({name: _cell(get(rep, r, eff)) for name, get in COLUMNS})
    return out + [_not_run_line(rep, lab) for lab in getattr(rep, "not_run", ())]


def _not_run_line(rep: Report, label: str) -> dict[str, str]:
    """A line for a cell that did not run (an incomplete report): status ``not_run``."""
    backend, fmt, precision, rest = (label.split("/", 3) + ["", "", ""])[:4]
    device, _, batch = rest.rpartition("/")
    line = dict.fromkeys(COLUMN_NAMES, "")
    line.update(label=label, model=rep.model.name, backend=backend, format=fmt, precision=precision,
                device=device, batch_size=batch[1:] if batch.startswith("b") else "", status="not_run",
                reason=rep.incomplete_reason or "the run stopped early", created=rep.created,
                report_complete="false")
    return {k: safe_text(v) for k, v in line.items()}


def render(rep: Report) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(COLUMN_NAMES), lineterminator="\n")
    w.writeheader()
    w.writerows(rows(rep))
    return buf.getvalue()
