"""The HTML report: one self-contained file that opens offline.

Plots are inline SVG (matplotlib, see plots.py), the table sorts with a few lines
of inline JavaScript (it reads fine without), and nothing is fetched from
anywhere: no external stylesheet, script, font or image. Without matplotlib the
page is written without plots and says why.
"""

from __future__ import annotations

from html import escape

from infer_compare.base.records import OK, PARITY_FAILED, SKIPPED, Report, RunRecord
from infer_compare.report import common, parity_detail, plots
from infer_compare.report.efficiency import efficiency
from infer_compare.report.soak import html_section
from infer_compare.report.terminal import short_precision
from infer_compare.report.verdict import verdict

CSS = """
:root { --fg:#1d232a; --muted:#5b6672; --line:#d9dee4; --bg:#fff; --head:#f3f5f8; --bad:#b3261e; --ok:#1e7b34;
        --warn:#8a5a00; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--fg); background: var(--bg); margin: 0 auto; padding: 24px 24px 48px; max-width: 1500px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 32px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 20px 0 4px; }
.sub { color: var(--muted); margin: 0 0 12px; }
.warn { background: #fff4e0; border-left: 4px solid #e69b00; padding: 6px 10px; margin: 8px 0; }
.warn.incomplete { background: #fde8e8; border-left-color: #c62828; }
.fail { color: var(--bad); font-weight: 600; } .ok { color: var(--ok); } .muted { color: var(--muted); }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 12px 0; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; min-width: 220px; }
.card b { display: block; font-size: 12px; color: var(--muted); font-weight: 500; }
.card span { font-size: 16px; font-weight: 600; }
.tablewrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 12.5px; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 5px; text-align: right; white-space: nowrap; }
th { background: var(--head); position: sticky; top: 0; font-weight: 600; vertical-align: bottom; }
td.prec { white-space: normal; min-width: 60px; max-width: 130px; text-align: left; }
th.l, td.l { text-align: left; }
td.wrap { white-space: normal; text-align: left; overflow-wrap: anywhere; }
table.full { width: 100%; }
details summary { cursor: pointer; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th::after { content: " \\2195"; color: #aab; font-size: 11px; }
table.sortable th.asc::after { content: " \\2191"; color: var(--fg); }
table.sortable th.desc::after { content: " \\2193"; color: var(--fg); }
tr.bad td { background: #fdecea; }
tbody tr:hover td { background: #f6f8fb; }
figure { margin: 16px 0 24px; } figcaption { color: var(--muted); font-size: 13px; max-width: 900px; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
ul.tight { margin: 4px 0; padding-left: 20px; } ul.tight li { margin: 2px 0; }
dl.env { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dl.env dt { color: var(--muted); } dl.env dd { margin: 0; }
@media print { th { position: static; } table.sortable th::after { content: ""; } body { padding: 0; } }
"""

# Click a header to sort by it (numbers by their data-v value), click again to reverse.
JS = """
document.querySelectorAll('table.sortable').forEach(function (t) {
  t.querySelectorAll('th').forEach(function (th, i) {
    th.title = 'click to sort';
    th.addEventListener('click', function () {
      var asc = !th.classList.contains('asc');
      t.querySelectorAll('th').forEach(function (h) { h.classList.remove('asc', 'desc'); });
      th.classList.add(asc ? 'asc' : 'desc');
      var body = t.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      function key(r) { var c = r.cells[i], v = c.getAttribute('data-v');
        if (v === null) { return c.textContent.trim().toLowerCase(); }
        return v === '' ? null : parseFloat(v); }
      rows.sort(function (a, b) { var x = key(a), y = key(b);
        if (x === y) { return 0; } if (x === null) { return 1; } if (y === null) { return -1; }
        return (x < y ? -1 : 1) * (asc ? 1 : -1); });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def _num(v: float | None, text: str | None = None) -> str:
    """A numeric cell: data-v carries the value for sorting ('' sorts last)."""
    shown = text if text is not None else common.fmt_num(v)
    dv = "" if v is None else repr(float(v))
    return f'<td data-v="{dv}">{escape(shown)}</td>'


def _txt(s: str, cls: str = "l") -> str:
    return f'<td class="{cls}">{escape(s)}</td>'


def _prec_cell(r: RunRecord) -> str:
    """The short label (asked→ran, N/M integer); the runtime's full words on hover and under the table."""
    full = common.prec_label(r)
    return f'<td class="l" title="{escape(full)}">{escape(short_precision(r))}</td>'


def _status_cell(r: RunRecord) -> str:
    txt = common.status_text(r)
    cls = "ok" if r.status == OK else "fail"
    title = f' title="{escape(r.reason)}"' if r.reason else ""
    return f'<td class="l {cls}"{title}>{escape(txt)}</td>'


def _rows_table(rep: Report) -> tuple[str, bool, bool]:
    rows = common.measured_rows(rep)
    effs = {id(r): efficiency(rep, r) for r in rows}
    has_peak = any(e["peak_share"] is not None for e in effs.values())
    has_energy = any(e["energy_j_per_image"] is not None for e in effs.values())
    has_flops = rep.model.flops_per_image is not None
    head = [("backend", "l"), ("format", "l"), ("precision", "l"), ("device", "l"), ("batch", ""), ("n", ""),
            ("p50 ms", ""), ("±CI", ""), ("p99 ms", ""), ("img/s", "")]
    if has_flops:
        head.append(("GFLOP/s", ""))
    if has_peak:
        head.append(("% of peak", ""))
    if has_energy:
        head.append(("mJ/img", ""))
    head += [("load s", ""), ("peak RSS MB", ""), ("size MB", ""), ("export s", ""), ("cos", ""),
             ("top-1", ""), ("acc", ""), ("status", "l")]
    out = ['<div class="tablewrap"><table class="sortable" id="results"><thead><tr>']
    out += [f'<th class="{c}">{escape(h)}</th>' for h, c in head]
    out.append("</tr></thead><tbody>")
    for r in rows:
        lat, ex, p, e = r.latency, r.export, r.parity, effs[id(r)]
        cls = ' class="bad"' if r.status not in (OK, SKIPPED) else ""
        cells = [_txt(r.backend), _txt(r.format), _prec_cell(r), _txt(r.device),
                 _num(r.batch_size, str(r.batch_size) if r.batch_size is not None else "–"),
                 _num(lat.count if lat else None, str(lat.count) if lat else "–"),
                 _num(lat.p50_ms if lat else None),
                 _num(lat.median_ci_rel if lat else None, common.ci_text(lat)),
                 _num(lat.percentile("p99") if lat else None), _num(r.throughput)]
        if has_flops:
            cells.append(_num(e["gflops_per_s"]))
        if has_peak:
            ps = e["peak_share"]
            cells.append(_num(None if ps is None else 100 * ps, None if ps is None else f"{100 * ps:.2g}%"))
        if has_energy:
            ej = e["energy_j_per_image"]
            cells.append(_num(None if ej is None else 1e3 * ej))
        export_s = None if ex is None or ex.format == "pytorch" else ex.export_s
        export_txt = "–" if export_s is None else ("cached" if ex is not None and ex.cached
                                                   else common.fmt_num(export_s))
        cells += [_num(r.load_s), _num(r.peak_rss_mb), _num(ex.size_bytes / 1e6 if ex else None),
                  _num(export_s, export_txt),
                  _num(p.cosine_mean if p else None, common.cos_text(p)),
                  _num(p.top1_agreement if p else None, common.top1_text(p)),
                  _num(p.accuracy if p else None,
                       f"{100 * p.accuracy:.2f}%" if p and p.accuracy is not None else "–"),
                  _status_cell(r)]
        out.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out), has_peak, has_energy


def _percentiles_table(rep: Report) -> str:
    rows = [r for r in common.measured_rows(rep) if r.latency is not None]
    if not rows:
        return ""
    cols = ("n", "mean", "std", "min", "p50", "p50 CI", "p90", "p95", "p99", "max")
    out = ['<div class="tablewrap"><table class="sortable" id="percentiles"><thead><tr>',
           "".join(f'<th class="l">{h}</th>' for h in ("backend", "format", "precision", "device")),
           '<th>batch</th>', "".join(f"<th>{h}</th>" for h in cols), "</tr></thead><tbody>"]
    for r in rows:
        lat = r.latency
        if lat is None:
            continue
        vals = (lat.mean_ms, lat.std_ms, lat.min_ms, lat.p50_ms)
        tail = (lat.percentile("p90"), lat.percentile("p95"), lat.percentile("p99"), lat.max_ms)
        out.append("<tr>" + _txt(r.backend) + _txt(r.format) + _txt(common.prec_label(r)) + _txt(r.device)
                   + _num(r.batch_size, str(r.batch_size)) + _num(lat.count, str(lat.count))
                   + "".join(_num(v) for v in vals) + _num(lat.median_ci_low_ms, common.ci_range(lat))
                   + "".join(_num(v) for v in tail) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _highlights(rep: Report) -> str:
    rows = [r for r in rep.rows if r.status in (OK, PARITY_FAILED) and r.latency is not None]
    if not rows:
        return ""
    v = verdict(rep)
    cards = [(p.title, p.value, p.text()[len(p.title) + 2:]) for p in v.picks]
    if rep.model.flops_per_image:
        cards.append(("model FLOPs per image", _flops_text(rep.model.flops_per_image),
                      "forward pass, batch 1, 2 FLOPs per multiply-add"))
    n_ok = sum(1 for r in rep.rows if r.status == OK and r.batch_size is not None)
    n_fail = len(common.failures(rep))
    n_skip = sum(1 for r in rep.rows if r.status == SKIPPED)
    cards.append(("rows", f"{n_ok} ok · {n_fail} failed · {n_skip} skipped",
                  "failures and skips are listed below"))
    out = ['<div class="cards">']
    for title, value, sub in cards:
        out.append(f'<div class="card"><b>{escape(title)}</b><span>{escape(value)}</span>'
                   f'<div class="muted">{escape(sub)}</div></div>')
    out.append("</div>")
    out += [f'<p class="muted">{escape(n)}</p>' for n in v.notes]
    return "".join(out)


def _flops_text(v: float) -> str:
    for unit, scale in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} FLOP"


def _label(r: RunRecord) -> str:
    return f"{r.backend} {r.format} {common.prec_label(r)} on {r.device}"


def _notes(rep: Report) -> list[str]:
    notes = list(rep.notes)
    first_batch = {k: min(v) for k, v in rep.settings.batch_sizes.items() if v}

    for r in rep.rows:
        if r.exec_precision and r.batch_size is not None and short_precision(r) != r.exec_precision:
            notes.append(f"{r.label}: ran {r.exec_precision}")
        notes += [f"{r.label}: {n}" for n in r.notes]
        if (r.export is not None and r.export.notes
                and r.batch_size in (None, first_batch.get(r.device.split(":")[0]))):
            notes += [f"{r.format} {r.export.precision} artifact: {n}" for n in r.export.notes]
    return list(dict.fromkeys(notes))  # unique, in order


def _settings_line(rep: Report) -> str:
    s = rep.settings
    bs = "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in s.batch_sizes.items())
    return (f"threads {s.threads}; batch sizes {bs}; warm-up {s.warmup_iters} calls; "
            f"measure >= {s.min_iters} calls and >= {s.min_time_s} s; parity on {s.parity_samples} inputs; "
            f"cell timeout {s.cell_timeout_s:.0f} s; seed {s.seed}")


def _head(rep: Report) -> list[str]:
    m = rep.model
    title = f"infer-compare: {m.name}"
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
           f"<h1>{escape(title)}</h1>",
           f'<p class="sub">{escape(common.model_line(rep))}<br>measured {escape(rep.created)} on '
           f"{escape(rep.environment.cpu_model)}"
           + (f" with {escape(', '.join(str(g.get('name')) for g in rep.environment.gpus))}"
              if rep.environment.gpus else "") + "</p>"]
    if common.incomplete_banner(rep):
        out.append(f'<div class="warn incomplete" id="incomplete">'
                   f'<b>{escape(common.incomplete_banner(rep))}</b></div>')
    out += [f'<div class="warn"><b>Warning:</b> {escape(w)}</div>' for w in rep.warnings]
    out.append(_highlights(rep))
    return out


def _efficiency_notes(rep: Report, has_peak: bool, has_energy: bool) -> list[str]:
    m = rep.model
    notes = []
    if m.flops_per_image:
        notes.append(f"GFLOP/s = {_flops_text(m.flops_per_image)} per image × img/s; FLOPs counted by "
                     f"{m.flops_source or 'an unknown method'}.")
    elif m.flops_source:
        notes.append(f"Model FLOPs: {m.flops_source}.")
    if has_peak:
        srcs = sorted({efficiency(rep, r)["peak_source"] for r in common.measured_rows(rep)} - {""})
        notes.append("% of peak: achieved FLOP/s over the device's dense peak for the executed precision: "
                     + "; ".join(srcs) + ".")
    if m.flops_per_image:
        notes.append("No peak is given for CPUs: it depends on sustained clocks and vector units too much to "
                     "state honestly.")
    if has_energy:
        srcs = sorted({efficiency(rep, r)["energy_source"] for r in common.measured_rows(rep)} - {""})
        notes.append("mJ/img: energy per image measured over the loop"
                     + (f" ({'; '.join(srcs)})." if srcs else "."))
    return notes + common.latency_notes(rep)


def _results(rep: Report) -> list[str]:
    table, has_peak, has_energy = _rows_table(rep)
    out = ['<h2 id="results-h">Results</h2>',
           '<p class="muted">Latency per call of one batch (host clock); img/s = images / wall time of the '
           "measured loop; cos and top-1 against the PyTorch FP32 reference on the same inputs; acc = "
           "accuracy on labelled data. Click a column header to sort.</p>", table]
    eff_notes = _efficiency_notes(rep, has_peak, has_energy)
    if eff_notes:
        out.append('<p class="muted">' + " ".join(escape(n) for n in eff_notes) + "</p>")
    figs, plot_notes = plots.render_all(rep)
    out.append('<h2 id="plots">Plots</h2>')
    for t, svg, cap in figs:
        out.append(f"<figure><h3>{escape(t)}</h3>{svg}<figcaption>{escape(cap)}</figcaption></figure>")
    if not figs and not plot_notes:
        plot_notes.append("No measured rows to plot.")
    out += [f'<p class="warn">{escape(n)}</p>' for n in plot_notes]
    if rep.soak:
        out.append(html_section(rep))
    pct = _percentiles_table(rep)
    if pct:
        out += ['<h2 id="percentiles-h">Latency percentiles (ms)</h2>', pct]
    return out


def _failures_and_skips(rep: Report) -> list[str]:
    fails = common.failures(rep)
    out = [f'<h2 id="failures">Failures ({len(fails)})</h2>']
    if fails:
        out.append('<div class="tablewrap"><table class="full"><thead><tr><th class="l">row</th>'
                   '<th class="l">status</th><th class="l">reason</th></tr></thead><tbody>')
        for r in fails:
            reason = r.reason + (f" (hint: {r.hint})" if r.hint else "")
            shown = escape(reason)
            if len(reason) > 300:  # long converter errors: the first line, the rest one click away
                shown = f"<details><summary>{escape(reason[:200])}…</summary>{escape(reason)}</details>"
            out.append(f'<tr>{_txt(r.label)}<td class="l fail">{escape(r.status)}</td>'
                       f'<td class="wrap">{shown}</td></tr>')
        out.append("</tbody></table></div>")
    else:
        out.append('<p class="muted">None.</p>')
    skips = common.grouped_skips(rep)
    out.append(f'<h2 id="skipped">Skipped ({sum(1 for r in rep.rows if r.status == SKIPPED)} rows)</h2>')
    if skips:
        out.append('<div class="tablewrap"><table class="full"><thead><tr><th class="l">what</th>'
                   '<th class="l">reason</th><th class="l">how to get it</th></tr></thead><tbody>')
        for what, reason, hint in skips:
            out.append(f'<tr><td class="wrap">{escape(what)}</td><td class="wrap">{escape(reason)}</td>'
                       f'<td class="wrap"><code>{escape(hint) or "–"}</code></td></tr>')
        out.append("</tbody></table></div>")
    else:
        out.append('<p class="muted">None.</p>')
    return out


def _environment(rep: Report) -> list[str]:
    e = rep.environment
    items = [
        ("CPU", f"{e.cpu_model} ({e.cores_physical} physical / {e.cores_logical} logical cores)"),
        ("CPU features", ", ".join(e.cpu_flags) or "none of interest"),
        ("memory", f"{e.ram_gb} GiB"),
        ("GPUs", "; ".join(f"{g.get('name')} ({g.get('memory_mib', '?')} MiB, driver {g.get('driver', '?')})"
                           for g in e.gpus) or "none"),
        ("system", f"{e.os}, kernel {e.kernel}, {e.machine}"),
        ("Python", e.python),
        ("libraries", ", ".join(f"{k} {v}" for k, v in e.libraries.items()) or "–"),
        ("settings", _settings_line(rep)),
        ("tool", f"infer-compare {rep.tool_version}, results schema {rep.schema_version}, run took "
                 f"{rep.elapsed_s if rep.elapsed_s is not None else '?'} s"),
        ("time", common.time_summary(rep).partition(": ")[2] or "–"),
        ("command", " ".join(rep.command)),
    ]
    out = ['<h2 id="environment">Environment</h2><dl class="env">']
    for k, v in items:
        val = f"<code>{escape(v)}</code>" if k == "command" else escape(v)
        out.append(f"<dt>{escape(k)}</dt><dd>{val}</dd>")
    return out + ["</dl>"]


def render(rep: Report) -> str:
    out = _head(rep) + _results(rep) + _failures_and_skips(rep)
    notes = _notes(rep)
    if notes:
        out += ['<h2 id="notes">Notes</h2><ul class="tight">', *[f"<li>{escape(n)}</li>" for n in notes],
                "</ul>"]
    details = parity_detail.lines(rep)
    if details:
        out += ['<h2 id="parity">Parity by output</h2><ul class="tight">',
                *[f"<li>{escape(n)}</li>" for n in details], "</ul>"]
    out += _environment(rep)
    out.append(f"<script>{JS}</script></body></html>")
    return "\n".join(out) + "\n"
