"""Shared formatting for the text renderers (terminal, Markdown)."""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any

from infer_compare.base.layout import named_io
from infer_compare.base.printable import printable
from infer_compare.base.records import (
    LATENCY,
    OK,
    PARITY_FAILED,
    SKIPPED,
    THROUGHPUT,
    LatencyStats,
    ParityResult,
    Report,
    RunRecord,
    percentile_rule,
)
from infer_compare.base.timeline import summary as time_summary

COLUMNS = ("backend", "format", "precision", "device", "batch", "n", "p50 ms", "±CI", "p99 ms", "img/s",
           "load s", "peak RSS MB", "size MB", "export s", "cos", "top-1", "acc", "status")


def fmt_num(v, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, int):
        return str(v)
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a >= 0.01:
        return f"{v:.3f}"
    return f"{v:.{digits}g}"


def prec_label(r: RunRecord) -> str:
    """The precision asked (and what ran), then how the row was measured where it is not the default."""
    p = (f"{r.precision} (ran {r.exec_precision})" if r.exec_precision and r.exec_precision != r.precision
         else r.precision)
    mode = mode_label(r)
    return f"{p} · {mode}" if mode else p


def mode_label(r: RunRecord) -> str:
    """'' for the default (latency scenario, GPU I/O device-resident); else e.g. 'throughput ×4',
    'host io'."""
    parts = []
    if getattr(r, "scenario", LATENCY) == THROUGHPUT:
        n = r.options.get("concurrency")
        parts.append(f"throughput ×{n}" if n else "throughput")
    if r.options.get("io") == "host":
        parts.append("host io")
    return ", ".join(parts)


def measured_rows(rep: Report) -> list[RunRecord]:
    return [r for r in rep.rows if r.batch_size is not None and r.status != SKIPPED]


def row_cells(r: RunRecord) -> list[str]:
    lat = r.latency
    ex = r.export
    p = r.parity
    export_s = "–"
    if ex is not None and ex.format != "pytorch":
        export_s = "cached" if ex.cached else fmt_num(ex.export_s)
    return [
        r.backend,
        f"{r.format} ({r.variant})" if r.variant else r.format,
        prec_label(r),
        r.device,
        str(r.batch_size) if r.batch_size is not None else "–",
        str(lat.count) if lat else "–",
        fmt_num(lat.p50_ms) if lat else "–",
        ci_text(lat),
        fmt_num(lat.percentile("p99")) if lat else "–",
        fmt_num(r.throughput) if r.throughput else "–",
        fmt_num(r.load_s) if r.load_s is not None else "–",
        fmt_num(r.peak_rss_mb) if r.peak_rss_mb else "–",
        fmt_num(ex.size_bytes / 1e6) if ex else "–",
        export_s,
        cos_text(p),
        top1_text(p),
        f"{100 * p.accuracy:.2f}%" if p and p.accuracy is not None else "–",
        status_text(r),
    ]


def cos_text(p: ParityResult | None) -> str:
    """The mean cosine; for a model with several outputs, its worst output's, with that output's name."""
    if p is None:
        return "–"
    cos = f"{p.cosine_mean:.5f}" if p.cosine_mean < 0.99999 else "1.00000"
    return f"{cos} ({p.output})" if p.output else cos


def top1_text(p: ParityResult | None) -> str:
    """Top-1 agreement; – where there is none (several outputs, none of them [N, classes])."""
    return f"{p.top1_agreement:.3f}" if p is not None and p.top1_agreement is not None else "–"


def ci_text(lat: LatencyStats | None) -> str:
    """The median's 95 % CI as ± % of it; '*' where the budget ran out before the target."""
    r = lat.median_ci_rel if lat is not None else None
    if r is None:
        return "–"
    # windows 100 times apart (a thread pool beside a busy neighbour): a log-scale interval of thousands of %
    txt = "<0.1%" if r < 0.001 else (">999%" if r >= 9.995 else f"{100 * r:.1f}%")
    return txt + ("*" if lat is not None and lat.budget_ran_out else "")


def ci_range(lat: LatencyStats | None) -> str:
    """The p50's 95 % interval as 'low–high' (ms); measured in windows, with how many and their medians'
    range: '1.76–1.82 (15 windows 1.70–1.90)'."""
    if lat is None or lat.median_ci_low_ms is None or lat.median_ci_high_ms is None:
        return "–"
    got = f"{fmt_num(lat.median_ci_low_ms)}–{fmt_num(lat.median_ci_high_ms)}"
    if (lat.processes or 0) > 1 and lat.process_min_ms is not None and lat.process_max_ms is not None:
        spread = f"{fmt_num(lat.process_min_ms)}–{fmt_num(lat.process_max_ms)}"
        return got + (f" ({lat.processes} processes {spread}"
                      + (f", {lat.windows} windows" if lat.windows else "") + ")")
    if lat.windows and lat.window_min_ms is not None and lat.window_max_ms is not None:
        got += f" ({lat.windows} windows {fmt_num(lat.window_min_ms)}–{fmt_num(lat.window_max_ms)})"
    return got


def latency_notes(rep: Report) -> list[str]:
    """Why some percentiles show '–', and which rows ran out of budget: one line each, only when it
    applies."""
    lats = [r.latency for r in measured_rows(rep) if r.latency is not None]
    out = []
    short = [lat for lat in lats if lat.omitted_percentiles]
    if short:
        out.append(f"– in a percentile column: {percentile_rule()}; {len(short)} of {len(lats)} rows have "
                   f"fewer samples than p99 needs (fewest: n = {min(lat.count for lat in short)}).")
    if any(lat.median_ci_rel is not None for lat in lats):
        out.append(_ci_note(lats))
    out += mode_notes(rep)
    over = [lat for lat in lats if lat.budget_ran_out]
    if over:
        out.append(f"*: {len(over)} rows ran out of their time budget before the p50's interval reached the "
                   "target; their p50 is less certain than the target asks.")
    return out + window_flag_notes(lats)


def _ci_note(lats: list[LatencyStats]) -> str:
    """What the ±CI column means: from the windows where the rows were measured in them."""
    targets = sorted({lat.target_ci for lat in lats if lat.target_ci})
    aim = f"; the loop measured until it was within {', '.join(f'±{100 * t:g} %' for t in targets)}" \
        if targets else ""
    if not any(lat.windows for lat in lats):  # a file written before windows
        return f"±CI: half-width of the 95 % confidence interval of the median (p50), relative to it{aim}."
    old = sum(1 for lat in lats if not lat.windows)
    if any(lat.processes for lat in lats):
        one = sum(1 for lat in lats if not lat.processes)
        single = sum(1 for lat in lats if lat.processes == 1)
        return ("±CI: half-width of the 95 % interval of the p50, relative to it. Each configuration was "
                "measured in several processes, a whole pass of the plan apart; the interval comes from how "
                "far one process's median moves, pooled over the rows of its device and batch band, never "
                "narrower than the range of the row's own processes (results.md's p50 CI gives them)"
                + (f"; {single} rows measured in one process (a slow start: an engine build) take their "
                   "band's spread" if single else "")
                + (f"; {one} rows of one process: their windows' interval, which does not cover a rerun"
                   if one else "") + ".")
    return ("±CI: half-width of the 95 % interval of the p50, relative to it, from the spread between the "
            "medians of the row's windows (its loop split into at least 3, a t-interval of their centre, "
            "never narrower than the within-window interval of the median; results.md's p50 CI gives the "
            f"windows' range){aim}"
            + (f"; {old} rows without windows: the within-loop interval" if old else "") + ".")


def window_flag_notes(lats: list[LatencyStats]) -> list[str]:
    """The unstable and disturbed rows, one line each, only where there are some."""
    out = []
    unstable = sum(1 for lat in lats if lat.unstable)
    if unstable:
        what = "whose interval is wider than the target" if any(lat.processes for lat in lats) else \
            "whose windows disagree beyond the target"
        out.append(f"unstable: {unstable} rows {what} (their notes give the processes' or windows' figures "
                   "and what ran beside them); a rerun may differ by as much.")
    disturbed = sum(1 for lat in lats if lat.disturbed)
    if disturbed:
        out.append(f"disturbed: {disturbed} rows measured while other processes used the cores, still after "
                   "windows measured again: not a clean measurement (exit status 3).")
    return out


def mode_notes(rep: Report) -> list[str]:
    """What the marks in the precision column mean, only where they appear."""
    rows = measured_rows(rep)
    out = []
    if any(getattr(r, "scenario", LATENCY) == THROUGHPUT for r in rows):
        out.append("throughput ×N: the throughput scenario, N requests in flight with the runtime's own "
                   "concurrency (the row's settings say how); img/s = images completed / wall time; p50/p99 "
                   "are each request's latency under that load.")
    gpu = [r for r in rows if "cuda" in r.device]  # merged reports prefix the machine: "h200:cuda:0"
    if gpu:
        host = any(r.options.get("io") == "host" for r in gpu)
        out.append("GPU rows: " + ("host io = the host->device and device->host copies inside each timed "
                                   "call; rows without it keep input and output on the device." if host else
                                   "input and output device-resident (copied before and after the timed "
                                   "calls)."))
    return out


def status_text(r: RunRecord) -> str:
    """'ok', with what to know of it in brackets: parity not judged, windows unstable, measured disturbed."""
    if r.status == OK:
        marks = [m for m, on in (("not judged", r.parity is not None and not r.parity.judged),
                                 ("unstable", r.latency is not None and r.latency.unstable),
                                 ("disturbed", r.latency is not None and r.latency.disturbed)) if on]
        return f"ok ({', '.join(marks)})" if marks else "ok"
    return r.status


def grouped_skips(rep: Report) -> list[tuple[str, str, str]]:
    """[(what, reason, hint)] with rows of one backend/device/reason folded into one line."""
    groups: OrderedDict[tuple[str, str, str, str], list[str]] = OrderedDict()
    for r in rep.rows:
        if r.status != SKIPPED:
            continue
        k = (r.backend, r.device, r.reason, r.hint)
        groups.setdefault(k, [])
        tag = f"{r.format} {r.precision}" + (f" b{r.batch_size}" if r.batch_size is not None else "")
        if tag not in groups[k]:
            groups[k].append(tag)
    return [(f"{b} on {d}: {', '.join(tags)}", reason, hint) for (b, d, reason, hint), tags in groups.items()]


def failures(rep: Report) -> list[RunRecord]:
    return [r for r in rep.rows if r.status not in (OK, SKIPPED)]


def env_lines(rep: Report) -> list[str]:
    e = rep.environment
    s = rep.settings
    libs = ", ".join(f"{k} {v}" for k, v in e.libraries.items())
    gpus = "; ".join(f"{g.get('name')} ({g.get('memory_mib', '?')} MiB, driver {g.get('driver', '?')})"
                     for g in e.gpus)
    bs = "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in s.batch_sizes.items())
    machines = getattr(rep, "machines", None) or {}
    if machines:  # a merged report: one line per machine; their settings are in the notes
        lines = [f"machine {lab}: {m.cpu_model} ({m.cores_physical} physical / {m.cores_logical} logical "
                 f"cores, {m.ram_gb} GiB RAM), {m.os}, {m.machine}, {m.python}"
                 for lab, m in machines.items()]
        return lines + [
            f"GPUs: {gpus or 'none'}",
            f"libraries: {libs}",
            "settings: per machine, see the notes (each row was measured with its own machine's settings)",
            f"infer-compare {rep.tool_version}, schema {rep.schema_version}, merged {rep.created}",
        ]
    return [
        f"machine: {e.cpu_model} ({e.cores_physical} physical / {e.cores_logical} logical cores, "
        f"{e.ram_gb} GiB RAM), {e.os}, {e.machine}, {e.python}",
        f"CPU features: {', '.join(e.cpu_flags) or 'none of interest'}",
        f"GPUs: {gpus or 'none'}",
        f"libraries: {libs}",
        f"settings: threads {s.threads}; batch sizes {bs}; warm-up {s.warmup_iters} calls; "
        f"measure >= {s.min_iters} calls and >= {s.min_time_s} s; parity on {s.parity_samples} inputs; "
        f"cell timeout {s.cell_timeout_s:.0f} s; {scenario_text(s)}",
        f"infer-compare {rep.tool_version}, schema {rep.schema_version}, {rep.created}, "
        f"{rep.elapsed_s if rep.elapsed_s is not None else '?'} s", *filter(None, [time_summary(rep)]),
    ]


def scenario_text(s) -> str:
    scen = tuple(getattr(s, "scenarios", (LATENCY,)) or (LATENCY,))
    conc = int(getattr(s, "concurrency", 0) or 0)
    tail = f" ({conc} requests in flight)" if THROUGHPUT in scen and conc else ""
    return f"scenarios {', '.join(scen)}{tail}; GPU io {getattr(s, 'io', 'device')}"


def model_line(rep: Report) -> str:
    m = rep.model

    if named_io(m):  # several inputs or outputs: each one by name
        ins = ", ".join(_tensor_text(t) for t in m.inputs)
        outs = ", ".join(_tensor_text(t) for t in m.outputs)
        return (f"{m.name} ({m.family}), inputs {ins}; outputs {outs}; weights: {m.weights} "
                f"({m.weights_source}), hash {m.weights_hash}")
    src = (getattr(m, "inputs", ()) or ({},))[0].get("source")
    classes = f"{m.num_classes} classes, " if m.num_classes else ""  # 0: no class-score output
    return (f"{m.name} ({m.family}), input {'x'.join(map(str, m.input_shape))}{f' ({src})' if src else ''}, "
            f"{classes}weights: {m.weights} ({m.weights_source}), hash {m.weights_hash}")


def _tensor_text(t: dict[str, Any]) -> str:
    """'name CxHxW dtype' for an input batched on axis 0; the whole shape with its batch axis named
    otherwise ('state 2xbatchx128 float32 (batch on axis 1)'). Where values came from is in results.json."""
    dims = list(t.get("shape") or [])
    axis = t.get("batch_axis", 0)
    if axis == 0 and dims:
        shape = "x".join(str(d) for d in dims[1:]) or "scalar"
    else:
        shape = "x".join("batch" if i == axis else str(d) for i, d in enumerate(dims)) or "scalar"
    extra = [f"batch on axis {axis}"] if axis not in (0, None) and dims else []
    if axis is None and dims:
        extra.append("no batch axis")
    return (f"{t.get('name')} {shape} {t.get('dtype', '')}".rstrip()
            + (f" ({'; '.join(extra)})" if extra else ""))


def incomplete_banner(rep: Report, max_cells: int = 12) -> str:
    """'' for a complete report; else one line: why it is incomplete and which cells did not run."""
    if getattr(rep, "complete", True):
        return ""
    n = len(rep.not_run)
    cells = ", ".join(rep.not_run[:max_cells]) + (f" and {n - max_cells} more" if n > max_cells else "")
    return (f"INCOMPLETE RESULTS ({rep.incomplete_reason or 'the run stopped early'}): "
            f"{n} cell{'s' if n != 1 else ''} did not run" + (f" ({cells})" if n else "")
            + "; diff and --baseline refuse this file unless --allow-incomplete is given")


def is_parity_failure(r: RunRecord) -> bool:
    return r.status == PARITY_FAILED


def md_escape(s: object) -> str:
    """Text from the results (model names, reasons, notes: whatever the input carried) made inert for
    Markdown viewers that render HTML: no tag, comment or autolink can open (``<`` as ``&lt;``), no link or
    image (``[`` ``]`` escaped), no table cell split (``|``) and no line break; a control character (an ESC)
    written as a visible escape (base/printable.py)."""
    s = " ".join(printable(s, keep="\n\t").splitlines()) if s is not None else ""
    return (s.replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|")
            .replace("[", "\\[").replace("]", "\\]").replace("`", "\\`"))


def md_code(s: str) -> str:
    """``s`` as a code span, the fence longer than any run of backticks in it (CommonMark); control
    characters made visible."""
    s = " ".join(printable(s, keep="\n\t").splitlines())
    fence = "`" * (max((len(run) for run in re.findall("`+", s)), default=0) + 1)
    return f"{fence} {s} {fence}"
