"""Plots for the HTML report: matplotlib figures rendered to inline SVG strings.

Every function takes a Report and returns ``(svg, caption)`` or None when there is
nothing to draw. Figures are built with ``matplotlib.figure.Figure`` (no pyplot:
the caller's backend and global state are untouched). Each figure gets its own
``svg.hashsalt`` so that element ids of several inline SVGs never collide, and
text stays text (``svg.fonttype = none``) so that the page stays small and
searchable.
"""

from __future__ import annotations

import io
import logging
import math
import re
from typing import Any

from infer_compare.base.records import OK, PARITY_FAILED, Report, RunRecord
from infer_compare.catalog import deps
from infer_compare.report.terminal import short_precision

MEASURED = (OK, PARITY_FAILED)


def available() -> tuple[bool, str]:
    """(True, "") when matplotlib imports; else (False, reason with the install hint)."""
    # a font list cached without matplotlib's own math fonts (seen on this project's VM: 31 system fonts in
    # ~/.cache/matplotlib) made every report print ~20 "findfont: Font family ... not found" lines before the
    # gate's verdict; the plots fall back to DejaVu Sans either way, so only errors are let through
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    if not deps.has("matplotlib"):
        return False, f"matplotlib is not installed ({deps.hint('matplotlib')})"
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except Exception as e:  # a broken install is a note, not a crash
        return False, f"matplotlib fails to import: {type(e).__name__}: {e}"
    return True, ""


def _short(r: RunRecord) -> str:
    p = short_precision(r)
    dev = "" if r.device == "cpu" else f" {r.device}"
    return f"{r.backend} {r.format} {p}{dev}{_scenario(r)}"


def _scenario(r: RunRecord) -> str:
    """The throughput scenario's rows are series of their own."""
    return f" ({r.scenario})" if getattr(r, "scenario", "latency") != "latency" else ""


def _series(r: RunRecord) -> str:
    return f"{r.backend} / {r.format} / {r.precision} / {r.device}{_scenario(r)}"


def _svg(fig, salt: str) -> str:
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": f"ic-{salt}", "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    s = buf.getvalue()
    s = s[s.index("<svg"):]  # drop the XML declaration and the DOCTYPE (which names a w3.org DTD)
    s = re.sub(r"<metadata>.*?</metadata>", "", s, flags=re.S)  # RDF metadata with external namespace URIs
    # matplotlib names groups figure_1, axes_1... in every figure: prefix every id (and every reference to
    # one) so that several SVGs inline in one page keep their ids unique
    s = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{salt}-{m.group(1)}"', s)
    s = re.sub(r'((?:xlink:)?href)="#([^"]+)"', lambda m: f'{m.group(1)}="#{salt}-{m.group(2)}"', s)
    s = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{salt}-{m.group(1)})", s)
    # scale with the page: the width/height in pt become a max-width, the viewBox keeps the aspect ratio
    m = re.match(r'<svg([^>]*?) width="([\d.]+)pt" height="([\d.]+)pt"', s)
    if m:
        w = float(m.group(2))
        s = s.replace(m.group(0),
                      f'<svg{m.group(1)} style="max-width:{w * 4 / 3:.0f}px;width:100%;height:auto"', 1)
    return s


def _fig(width: float, height: float):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=96, layout="constrained")
    return fig


def _style(ax) -> None:
    ax.grid(True, which="major", alpha=0.3, linewidth=0.6)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def latency_distribution(rep: Report) -> tuple[str, str] | None:
    """Box plots of the raw per-call latencies of every measured row at batch 1."""
    import numpy as np

    rows = [r for r in rep.rows if r.status in MEASURED and r.batch_size == 1 and r.samples_ns]
    if not rows:
        return None
    data = [np.asarray(r.samples_ns, dtype=np.float64) / 1e6 for r in rows]
    order = sorted(range(len(rows)), key=lambda i: float(np.median(data[i])), reverse=True)
    rows = [rows[i] for i in order]
    data = [data[i] for i in order]
    fig = _fig(8.5, 0.9 + 0.36 * len(rows))
    ax = fig.add_subplot()
    ax.boxplot(data, vert=False, whis=(1, 99), showfliers=False, widths=0.6, patch_artist=True,
               boxprops={"facecolor": "#cfe0f3", "edgecolor": "#35608f"}, medianprops={"color": "#c0392b"},
               whiskerprops={"color": "#35608f"}, capprops={"color": "#35608f"})
    maxes = [float(d.max()) for d in data]
    ax.scatter(maxes, range(1, len(rows) + 1), marker="x", s=18, color="#555", zorder=3)
    ax.set_yticks(range(1, len(rows) + 1), [_short(r) for r in rows])
    lo = min(float(np.percentile(d, 1)) for d in data)
    hi = max(maxes)
    if lo > 0 and hi / lo > 20:
        ax.set_xscale("log")
    ax.set_xlabel("latency per call, ms (batch 1)")
    _style(ax)
    caption = ("Latency of every timed call at batch 1, from the raw samples. Box: 25th–75th percentile, "
               "red line: median, whiskers: 1st–99th percentile, ×: slowest call. Rows sorted by median"
               + (", log scale." if ax.get_xscale() == "log" else "."))
    return _svg(fig, "lat"), caption


def throughput_vs_batch(rep: Report) -> tuple[str, str] | None:
    """Images per second against batch size, one line per backend/format/precision/device."""
    groups: dict[str, list[tuple[int, float]]] = {}
    for r in rep.rows:
        if r.status in MEASURED and r.batch_size and r.throughput:
            groups.setdefault(_series(r), []).append((int(r.batch_size), float(r.throughput)))
    if not groups or all(len(v) < 1 for v in groups.values()):
        return None
    fig = _fig(8.5, 4.2)
    ax = fig.add_subplot()
    markers = "osD^v<>pPhX*"
    batches: set[int] = set()
    for i, (name, pts) in enumerate(sorted(groups.items())):
        pts.sort()
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        batches.update(xs)
        ax.plot(xs, ys, marker=markers[i % len(markers)], linewidth=1.4, markersize=5, label=name)
    if len(batches) > 1:
        ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(batches), [str(b) for b in sorted(batches)])
    ax.set_xlabel("batch size")
    ax.set_ylabel("images / s")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7.5, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _style(ax)
    return _svg(fig, "thr"), ("Throughput (images per second of wall time in the measured loop) against "
                              "batch size, one line per backend, format, precision and device.")


def _quality_measure(rep: Report, rows: list[RunRecord]):
    """(quality function, y label, what it is, tie tolerance): accuracy, else top-1 agreement, else cosine."""
    if all(r.parity.accuracy is not None for r in rows):  # type: ignore[union-attr]
        return (lambda r: 100.0 * r.parity.accuracy, "accuracy on labelled data, %",
                "accuracy on the labelled test set", 0.005)
    if rep.model.meaningful_top1 and all(r.parity.top1_agreement is not None  # type: ignore[union-attr]
                                         for r in rows):
        return (lambda r: 100.0 * r.parity.top1_agreement, "top-1 agreement with PyTorch FP32, %",
                "top-1 agreement with the PyTorch FP32 reference", 0.005)
    return (lambda r: r.parity.cosine_mean, "mean cosine similarity to PyTorch FP32",
            "mean cosine similarity of the logits to the reference", 1e-4)


def _label_points(ax, pts: list, front: set[int], log_x: bool) -> None:
    """Stagger the labels of points that sit close together so that they do not print over each other."""
    xs = [p[0] for p in pts]
    ys_all = [p[1] for p in pts]
    yspan = (max(ys_all) - min(ys_all)) or 1.0
    xpos = [math.log10(x) if log_x else x for x in xs]
    xspan = (max(xpos) - min(xpos)) or 1.0
    placed: list[tuple[float, float, int]] = []
    for i in sorted(range(len(pts)), key=lambda k: (xpos[k], -pts[k][1])):
        x, y, r = pts[i]
        near = [lvl for (px, py, lvl) in placed
                if abs(px - xpos[i]) < 0.25 * xspan and abs(py - y) < 0.08 * yspan]
        level = 0
        while level in near:
            level += 1
        placed.append((xpos[i], y, level))
        ax.annotate(_short(r), (x, y), textcoords="offset points", xytext=(6, 4 + 11 * level), fontsize=7.5,
                    color="#222" if i in front else "#777")
        # a leader line to the label's corner: an arrow on an empty text is not clipped to the text's box
        # (0.3 s of a report's 0.6 s of plots did that)
        if level:
            ax.annotate("", (x, y), textcoords="offset points", xytext=(5, 3 + 11 * level),
                        arrowprops={"arrowstyle": "-", "color": "#bbb", "linewidth": 0.6,
                                    "shrinkA": 0, "shrinkB": 2})


def _scatter_front(ax, pts: list, front: set[int]) -> None:
    on = [p for i, p in enumerate(pts) if i in front]
    off = [p for i, p in enumerate(pts) if i not in front]
    if off:
        ax.scatter([p[0] for p in off], [p[1] for p in off], s=30, color="#9aa7b4", label="dominated",
                   zorder=2)
    fr = sorted(on, key=lambda p: p[0])
    ax.plot([p[0] for p in fr], [p[1] for p in fr], "-", drawstyle="steps-post", color="#c0392b",
            linewidth=1.2, zorder=2)
    ax.scatter([p[0] for p in fr], [p[1] for p in fr], s=46, color="#c0392b", label="Pareto front", zorder=3)


def quality_vs_latency(rep: Report) -> tuple[str, str] | None:
    """Accuracy (or agreement with the reference) against batch-1 latency, Pareto front marked."""
    rows = [r for r in rep.rows if r.status in MEASURED and r.batch_size == 1 and r.latency and r.parity]
    if not rows:
        return None
    quality, ylabel, what, tol = _quality_measure(rep, rows)
    pts = [(r.latency.p50_ms, quality(r), r) for r in rows]  # type: ignore[union-attr]
    front = pareto_front([(x, y) for x, y, _ in pts], tol)
    fig = _fig(8.5, 4.4)
    ax = fig.add_subplot()
    _scatter_front(ax, pts, front)
    xs = [p[0] for p in pts]
    log_x = min(xs) > 0 and max(xs) / min(xs) > 20
    if log_x:
        ax.set_xscale("log")
    _label_points(ax, pts, front, log_x)
    ax.set_xlabel("p50 latency at batch 1, ms (lower is better)")
    ax.set_ylabel(ylabel)
    ys = [p[1] for p in pts]
    span = max(ys) - min(ys)
    if span == 0:
        pad = abs(ys[0]) * 0.002 or 0.01
        ax.set_ylim(ys[0] - pad, ys[0] + 4 * pad)
    else:
        ax.set_ylim(min(ys) - 0.15 * span, max(ys) + 0.45 * span)
    ax.margins(x=0.15)
    ax.legend(fontsize=8, frameon=False, loc="best")
    _style(ax)
    cap = (f"{what[0].upper() + what[1:]} against median latency at batch 1. Red: the Pareto front (no "
           f"other row is both faster and at least as good; differences below {tol:g} count as ties).")
    if span == 0:
        cap += " Every row has the same value here."
    return _svg(fig, "pareto"), cap


def pareto_front(points: list[tuple[float, float]], tol: float = 0.0) -> set[int]:
    """Indices of the points not dominated by another (lower x is better, higher y is better).

    y values closer than ``tol`` count as equal, so that a row 1e-9 more similar to the
    reference does not make the front on that alone.
    """
    out = set()
    for i, (x, y) in enumerate(points):
        dominated = any((x2 <= x and y2 >= y - tol) and (x2 < x or y2 > y + tol)
                        for j, (x2, y2) in enumerate(points) if j != i)
        if not dominated:
            out.add(i)
    return out


def artifact_sizes(rep: Report) -> tuple[str, str] | None:
    """Size of each artifact on disk (one bar per format and artifact precision)."""
    seen: dict[tuple[str, str], Any] = {}
    for r in rep.rows:
        if r.export is not None and r.export.size_bytes:
            seen.setdefault((r.export.format, r.export.precision), r.export.size_bytes)
    if not seen:
        return None
    items = sorted(seen.items(), key=lambda kv: -kv[1])
    fig = _fig(8.5, 0.9 + 0.34 * len(items))
    ax = fig.add_subplot()
    names = [f"{f} {p}" for (f, p), _ in items]
    vals = [v / 1e6 for _, v in items]
    ax.barh(range(len(items)), vals, color="#6a8fbf", height=0.6)
    ax.set_yticks(range(len(items)), names)
    ax.invert_yaxis()
    for i, v in enumerate(vals):
        ax.annotate(f"{v:.3g} MB", (v, i), textcoords="offset points", xytext=(4, -3), fontsize=8)
    ax.set_xlabel("artifact size on disk, MB (10⁶ bytes)")
    ax.set_xlim(0, max(vals) * 1.18)
    _style(ax)
    return _svg(fig, "size"), "Size on disk of each artifact (format and stored precision)."


PLOTS = (
    ("Latency distribution", latency_distribution),
    ("Throughput against batch size", throughput_vs_batch),
    ("Accuracy against latency", quality_vs_latency),
    ("Artifact size", artifact_sizes),
)


def render_all(rep: Report) -> tuple[list[tuple[str, str, str]], list[str]]:
    """([(title, svg, caption)], [notes about plots that could not be drawn])."""
    ok, why = available()
    if not ok:
        return [], [f"Plots are omitted: {why}."]
    out, notes = [], []
    for title, fn in PLOTS:
        try:
            res = fn(rep)
        except Exception as e:  # one bad plot must not cost the whole report
            notes.append(f"{title}: not drawn ({type(e).__name__}: {e})")
            continue
        if res is not None:
            out.append((title, res[0], res[1]))
    return out, notes
