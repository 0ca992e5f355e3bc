"""Markdown report: header with the model and the machine, the results table,
skips with their reasons and install hints, failures, notes."""

from __future__ import annotations

from infer_compare.base.records import Report
from infer_compare.report import common, parity_detail
from infer_compare.report.common import md_code as _code
from infer_compare.report.common import md_escape as _esc
from infer_compare.report.soak import markdown_section
from infer_compare.report.verdict import verdict


def _percentiles(rep: Report) -> list[str]:
    rows = [r for r in common.measured_rows(rep) if r.latency is not None]
    if not rows:
        return []
    out = ["Latency percentiles (ms); p50 CI = its 95 % confidence interval:", "",
           "| backend | format | precision | device | batch | n | mean | std | min | p50 | p50 CI | p90 "
           "| p95 | p99 | max |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lat = r.latency
        if lat is None:
            continue
        vals = (lat.mean_ms, lat.std_ms, lat.min_ms, lat.p50_ms)
        tail = (lat.percentile("p90"), lat.percentile("p95"), lat.percentile("p99"), lat.max_ms)
        out.append(f"| {_esc(r.backend)} | {_esc(r.format)} | {_esc(common.prec_label(r))} "
                   f"| {_esc(r.device)} | {r.batch_size} | {lat.count} | "
                   + " | ".join(common.fmt_num(x) for x in vals) + f" | {common.ci_range(lat)} | "
                   + " | ".join(common.fmt_num(x) for x in tail) + " |")
    out.append("")
    return out


def _header(rep: Report) -> list[str]:
    out = [f"# infer-compare: {_esc(rep.model.name)}", "", f"**Model:** {_esc(common.model_line(rep))}", ""]
    if common.incomplete_banner(rep):
        out += [f"> **{_esc(common.incomplete_banner(rep))}**", ""]
    for w in rep.warnings:
        out += [f"> **WARNING:** {_esc(w)}", ""]
    out += ["## Environment", ""]
    out += [f"- {_esc(line)}" for line in common.env_lines(rep)]
    return out + [f"- command: {_code(' '.join(rep.command))}", ""]


def _results(rep: Report) -> list[str]:
    out = ["## Results", "",
           "Latency per call of one batch (host clock); n = measured calls; ±CI = half-width of the 95 % "
           "confidence interval of p50, relative to it; img/s = images / wall time of the measured loop; "
           "cos and top-1 against the PyTorch FP32 reference on the same inputs; acc = accuracy on labelled "
           "data.",
           "", "| " + " | ".join(common.COLUMNS) + " |", "|" + "|".join("---" for _ in common.COLUMNS) + "|"]
    for r in common.measured_rows(rep):
        cells = common.row_cells(r)
        if r.status not in ("ok",):
            cells[-1] = f"**{cells[-1]}**"
        out.append("| " + " | ".join(_esc(c) for c in cells) + " |")
    out.append("")
    out += [f"{_esc(line)}" + "\n" for line in common.latency_notes(rep)]
    v = verdict(rep)
    if v.picks or v.notes:
        out += ["**Verdict**", "", *[f"- {_esc(line)}" for line in v.lines()], ""]
    out += _percentiles(rep)
    if rep.soak:
        out += markdown_section(rep)
    return out


def _failures_and_skips(rep: Report) -> list[str]:
    out: list[str] = []
    fails = common.failures(rep)
    if fails:
        out += ["## Failures", "",
                *[f"- **{_esc(r.label)}** {_code(r.status)}: {_esc(r.reason)}" for r in fails], ""]
    skips = common.grouped_skips(rep)
    if skips:
        out += ["## Skipped", "", "| what | reason | how to get it |", "|---|---|---|"]
        out += [f"| {_esc(what)} | {_esc(reason)} | {_esc(hint) or '–'} |" for what, reason, hint in skips]
        out.append("")
    return out


def _notes(rep: Report) -> list[str]:
    notes = list(rep.notes)
    for r in rep.rows:
        notes += [f"{r.label}: {n}" for n in r.notes]
        first = min(rep.settings.batch_sizes.get(r.device.split(":")[0]) or (1,))
        if r.export is not None and r.export.notes and r.batch_size in (None, first):
            notes += [f"{r.format} {r.export.precision} artifact: {n}" for n in r.export.notes]
    if not notes:
        return []
    return ["## Notes", "", *[f"- {_esc(n)}" for n in dict.fromkeys(notes)], ""]


def _parity_details(rep: Report) -> list[str]:
    details = parity_detail.lines(rep)
    return ["## Parity by output", "", *[f"- {_esc(n)}" for n in details], ""] if details else []


def render(rep: Report) -> str:
    return "\n".join(_header(rep) + _results(rep) + _failures_and_skips(rep) + _parity_details(rep)
                     + _notes(rep))
