"""The soak's part of the reports: a summary per configuration (RSS at the start and the
end, growth per 10,000 calls, latency and throughput drift), its windows, sparklines on
the terminal and a plot per configuration in the HTML report (matplotlib, inline SVG,
through plots.py's figure helpers). html.py and markdown.py call this only when
``Report.soak`` is not empty."""

from __future__ import annotations

from html import escape
from typing import Any

from infer_compare.base.records import Report
from infer_compare.report import common, plots
from infer_compare.report.common import md_escape
from infer_compare.report.terminal import console_for_stdout

SPARK = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 60


def sparkline(values: list[float | None], width: int = SPARK_WIDTH) -> str:
    """Unicode blocks, one per value (values averaged into ``width`` buckets when there are more)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return ""
    if len(values) > width:
        step = len(values) / width
        buckets = [[v for v in values[int(i * step):int((i + 1) * step)] if v is not None]
                   for i in range(width)]
        values = [sum(b) / len(b) if b else None for b in buckets]
    lo, hi = min(vals), max(vals)
    span = (hi - lo) or 1.0
    return "".join(" " if v is None else SPARK[min(len(SPARK) - 1, int((v - lo) / span * len(SPARK)))]
                   for v in values)


def _ratio(v: float | None, slope: float | None) -> str:
    if v is None:
        return "–"
    return f"×{v:.3f}" + (f" ({0.0 if abs(slope) < 0.005 else slope:+.2f} %/min)"
                          if slope is not None else "")


def summary_line(res: Any) -> str:
    """One line: RSS start → end and growth, latency and throughput drift."""
    g = res.rss_growth_mb_per_10k_calls
    rss = (f"RSS {common.fmt_num(res.rss_start_mb)} → {common.fmt_num(res.rss_end_mb)} MB"
           + (f" ({g:+.3g} MB per 10,000 calls)" if g is not None else " (growth: too few windows)"))
    return (f"{rss}; p50 drift {_ratio(res.p50_drift, res.p50_slope_pct_per_min)}; throughput drift "
            f"{_ratio(res.throughput_drift, res.throughput_slope_pct_per_min)}")


def headline(res: Any) -> str:
    how = res.stopped_by + (f": {res.reason}" if res.reason else "")
    return f"{res.label}: {res.calls:,} calls in {len(res.windows)} windows of {res.window_s:g} s ({how})"


def series(res: Any) -> list[tuple[str, list[float | None]]]:
    """(name, value per window) of what was measured: latency, throughput, memory, hottest sensor, clocks."""
    ws = res.windows
    out: list[tuple[str, list[float | None]]] = [("p50 ms", [w.p50_ms for w in ws]),
                                                 ("p99 ms", [w.p99_ms for w in ws]),
                                                 ("img/s", [w.throughput for w in ws]),
                                                 ("RSS MB", [w.rss_mb for w in ws])]
    if any(w.gpu_memory_mib is not None for w in ws):
        out.append(("GPU MiB", [w.gpu_memory_mib for w in ws]))
    if any(w.temperatures_c for w in ws):
        out.append(("max °C", [max(w.temperatures_c.values()) if w.temperatures_c else None for w in ws]))
    for k in sorted({k for w in ws for k in w.clocks_mhz if k in ("cpu min", "gpu sm")}):
        out.append((f"{k} MHz", [w.clocks_mhz.get(k) for w in ws]))
    return [(n, v) for n, v in out if any(x is not None for x in v)]


def print_soak(rep: Report, console: Any = None) -> None:
    """The terminal summary: per configuration, a headline, sparklines with min/max, the summary line."""
    from rich.markup import escape as esc
    from rich.table import Table

    con = console or console_for_stdout(160)
    con.print(f"[bold]{esc(common.model_line(rep))}[/]")
    if common.incomplete_banner(rep):
        con.print(f"[bold red]{esc(common.incomplete_banner(rep))}[/]")
    for w in rep.warnings:
        con.print(f"[bold yellow]WARNING:[/] {esc(w)}")
    for res in rep.soak:
        con.print(f"[bold]{esc(headline(res))}[/]")
        t = Table(show_header=True, header_style="bold", pad_edge=False, box=None)
        for c, j in (("", "left"), ("first", "right"), ("last", "right"), ("min", "right"), ("max", "right"),
                     ("per window", "left")):
            t.add_column(c, justify=j, no_wrap=True)
        for name, vals in series(res):
            v = [x for x in vals if x is not None]
            t.add_row(name, common.fmt_num(v[0]), common.fmt_num(v[-1]), common.fmt_num(min(v)),
                      common.fmt_num(max(v)), sparkline(vals))
        con.print(t)
        con.print(f"  {esc(summary_line(res))}")
    for r in common.failures(rep):
        con.print(f"[red]{r.status}[/] {esc(r.label)}: {esc(r.reason)}")
    for what, reason, hint in common.grouped_skips(rep):
        con.print(f"  [dim]skipped {esc(what)}[/]: {esc(reason)}"
                  + (f"\n      [cyan]→ {esc(hint)}[/]" if hint else ""))


WINDOW_COLUMNS = ("window", "start s", "end s", "calls", "img/s", "p50 ms", "p90 ms", "p99 ms", "max ms",
                  "RSS MB", "GPU MiB", "max °C")


def window_cells(w: Any) -> list[str]:
    f = common.fmt_num
    return [str(w.index + 1), f"{w.start_s:.1f}", f"{w.end_s:.1f}", f"{w.calls:,}", f(w.throughput),
            f(w.p50_ms), f(w.p90_ms), f(w.p99_ms), f(w.max_ms), f(w.rss_mb), f(w.gpu_memory_mib),
            f(max(w.temperatures_c.values())) if w.temperatures_c else "–"]


def markdown_section(rep: Report) -> list[str]:
    out = ["## Soak", ""]
    for res in rep.soak:
        out += [f"### {md_escape(res.label)}", "", f"{md_escape(headline(res))}.", "",
                f"{md_escape(summary_line(res))}.", ""]
        out += [f"Sensors: {md_escape('; '.join(res.sensors))}.", ""] if res.sensors else []
        out += ["| " + " | ".join(WINDOW_COLUMNS) + " |", "|" + "---|" * len(WINDOW_COLUMNS)]
        out += ["| " + " | ".join(md_escape(c) for c in window_cells(w)) + " |" for w in res.windows]
        out.append("")
    return out


def html_section(rep: Report) -> str:
    ok, why = plots.available()
    out = ['<h2 id="soak">Soak</h2>']
    for i, res in enumerate(rep.soak):
        out.append(f"<h3>{escape(res.label)}</h3><p>{escape(headline(res))}.<br>"
                   f"{escape(summary_line(res))}.</p>")
        if res.sensors:
            out.append(f'<p class="muted">Sensors: {escape("; ".join(res.sensors))}.</p>')
        fig = None
        if ok:
            try:
                fig = soak_figure(res, f"soak{i}")
            except Exception as e:  # one bad plot must not cost the whole report
                out.append(f'<p class="warn">Soak plot not drawn ({escape(type(e).__name__)}: '
                           f'{escape(str(e))})</p>')
        if fig is not None:
            out.append(f"<figure>{fig[0]}<figcaption>{escape(fig[1])}</figcaption></figure>")
        out.append(f"<details><summary>{len(res.windows)} windows</summary>"
                   "<div class=\"tablewrap\"><table><thead><tr>"
                   + "".join(f"<th>{escape(c)}</th>" for c in WINDOW_COLUMNS) + "</tr></thead><tbody>")
        out += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in window_cells(w)) + "</tr>"
                for w in res.windows]
        out.append("</tbody></table></div></details>")
    if not ok:
        out.append(f'<p class="warn">Soak plots are omitted: {escape(why)}.</p>')
    return "\n".join(out)


def soak_figure(res: Any, salt: str) -> tuple[str, str] | None:
    """One soaked configuration (a soak.records.SoakResult) over time, one point per window: latency
    p50/p99, throughput, RSS (and GPU memory), and temperatures and clocks where they were read."""
    ws = [w for w in res.windows if w.calls]
    if not ws:
        return None
    minutes = res.duration_s >= 180
    t = [(w.start_s + w.end_s) / 2 / (60 if minutes else 1) for w in ws]
    temps = sorted({k for w in ws for k in w.temperatures_c})
    clocks = sorted({k for w in ws for k in w.clocks_mhz})
    fig = plots._fig(8.5, 2.0 * (3 + bool(temps or clocks)) + 0.4)
    axes = fig.subplots(3 + bool(temps or clocks), 1, sharex=True)
    a = axes[0]
    a.plot(t, [w.p50_ms for w in ws], marker="o", markersize=3, linewidth=1.3, label="p50")
    p99 = [(x, w.p99_ms) for x, w in zip(t, ws, strict=True) if w.p99_ms is not None]
    if p99:
        a.plot([x for x, _ in p99], [y for _, y in p99], marker="s", markersize=3, linewidth=1.0, label="p99")
    a.set_ylabel("latency, ms")
    hi = max([w.p50_ms for w in ws] + [y for _, y in p99])
    if hi / max(min(w.p50_ms for w in ws), 1e-9) > 20:
        a.set_yscale("log")  # a tail far above the median would flatten the median to the axis
    else:
        a.set_ylim(bottom=0)
    a.legend(fontsize=7.5, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[1].plot(t, [w.throughput for w in ws], marker="o", markersize=3, linewidth=1.3, color="#2e7d32")
    axes[1].set_ylabel("images / s")
    axes[1].set_ylim(bottom=0)
    _soak_memory(axes[2], t, ws)
    if temps or clocks:
        _soak_sensors(axes[3], t, ws, temps, clocks)
    axes[-1].set_xlabel("time since the soak began, " + ("min" if minutes else "s")
                        + " (middle of each window)")
    for ax in axes:
        plots._style(ax)
    cap = (f"{res.label}: one point per window of {res.window_s:g} s over {len(ws)} windows. Latency "
           "percentiles and throughput per window; RSS of the soaking process at each window's end")
    cap += (", with the GPU's used memory" if any(w.gpu_memory_mib is not None for w in ws) else "")
    cap += ("; temperatures and clocks as read at each window's end." if temps or clocks else ".")
    return plots._svg(fig, salt), cap


def _soak_memory(ax, t: list[float], ws: list) -> None:
    rss = [(x, w.rss_mb) for x, w in zip(t, ws, strict=True) if w.rss_mb is not None]
    if rss:
        ax.plot([x for x, _ in rss], [y for _, y in rss], marker="o", markersize=3, linewidth=1.3,
                color="#6a1b9a", label="RSS, MB")
    gpu = [(x, w.gpu_memory_mib) for x, w in zip(t, ws, strict=True) if w.gpu_memory_mib is not None]
    if gpu:
        ax.plot([x for x, _ in gpu], [y for _, y in gpu], marker="^", markersize=3, linewidth=1.0,
                color="#ef6c00", label="GPU used, MiB")
    ax.set_ylabel("MB" if not gpu else "MB / MiB")
    ys = [y for _, y in rss + gpu]
    # at least 5 % of the level: noise must not look like a leak
    if ys and max(ys) - min(ys) < 0.05 * max(ys):
        mid, half = (max(ys) + min(ys)) / 2, 0.025 * max(ys)
        ax.set_ylim(mid - half, mid + half)
    if rss or gpu:
        ax.legend(fontsize=7.5, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _soak_sensors(ax, t: list[float], ws: list, temps: list[str], clocks: list[str]) -> None:
    hottest = sorted(temps, key=lambda k: -max(w.temperatures_c.get(k, -1e9) for w in ws))[:6]
    for k in hottest:
        pts = [(x, w.temperatures_c[k]) for x, w in zip(t, ws, strict=True) if k in w.temperatures_c]
        ax.plot([x for x, _ in pts], [y for _, y in pts], linewidth=1.1, label=f"{k}, °C")
    ax.set_ylabel("°C")
    handles, labels = ax.get_legend_handles_labels()
    if clocks:
        ax2 = ax.twinx()
        for j, k in enumerate(clocks[:4]):
            pts = [(x, w.clocks_mhz[k]) for x, w in zip(t, ws, strict=True) if k in w.clocks_mhz]
            ax2.plot([x for x, _ in pts], [y for _, y in pts], linewidth=1.0, linestyle="--",
                     label=f"{k}, MHz", color=f"C{(len(hottest) + j) % 10}")
        ax2.set_ylabel("MHz")
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    ax.legend(handles, labels, fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.08, 1.0))
