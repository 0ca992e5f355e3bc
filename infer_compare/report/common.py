"""Shared formatting for the text renderers (terminal, Markdown)."""

from __future__ import annotations

from collections import OrderedDict

from ..records import OK, PARITY_FAILED, SKIPPED, Report, RunRecord

COLUMNS = ("backend", "format", "precision", "device", "batch", "p50 ms", "p99 ms", "img/s", "load s",
           "peak RSS MB", "size MB", "export s", "cos", "top-1", "acc", "status")


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
    if r.exec_precision and r.exec_precision != r.precision:
        return f"{r.precision} (ran {r.exec_precision})"
    return r.precision


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
        r.format,
        prec_label(r),
        r.device,
        str(r.batch_size) if r.batch_size is not None else "–",
        fmt_num(lat.p50_ms) if lat else "–",
        fmt_num(lat.p99_ms) if lat else "–",
        fmt_num(r.throughput) if r.throughput else "–",
        fmt_num(r.load_s) if r.load_s is not None else "–",
        fmt_num(r.peak_rss_mb) if r.peak_rss_mb else "–",
        fmt_num(ex.size_bytes / 1e6) if ex else "–",
        export_s,
        (f"{p.cosine_mean:.5f}" if p.cosine_mean < 0.99999 else "1.00000") if p else "–",
        f"{p.top1_agreement:.3f}" if p else "–",
        f"{100 * p.accuracy:.2f}%" if p and p.accuracy is not None else "–",
        status_text(r),
    ]


def status_text(r: RunRecord) -> str:
    if r.status == OK:
        if r.parity is not None and not r.parity.judged:
            return "ok (not judged)"
        return "ok"
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
    gpus = "; ".join(f"{g.get('name')} ({g.get('memory_mib', '?')} MiB, driver {g.get('driver', '?')})" for g in e.gpus)
    bs = "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in s.batch_sizes.items())
    machines = getattr(rep, "machines", None) or {}
    if machines:  # a merged report: one line per machine; their settings are in the notes
        lines = [f"machine {lab}: {m.cpu_model} ({m.cores_physical} physical / {m.cores_logical} logical cores, "
                 f"{m.ram_gb} GiB RAM), {m.os}, {m.machine}, {m.python}" for lab, m in machines.items()]
        return lines + [
            f"GPUs: {gpus or 'none'}",
            f"libraries: {libs}",
            "settings: per machine, see the notes (each row was measured with its own machine's settings)",
            f"infer-compare {rep.tool_version}, schema {rep.schema_version}, merged {rep.created}",
        ]
    return [
        f"machine: {e.cpu_model} ({e.cores_physical} physical / {e.cores_logical} logical cores, {e.ram_gb} GiB RAM), "
        f"{e.os}, {e.machine}, {e.python}",
        f"CPU features: {', '.join(e.cpu_flags) or 'none of interest'}",
        f"GPUs: {gpus or 'none'}",
        f"libraries: {libs}",
        f"settings: threads {s.threads}; batch sizes {bs}; warm-up {s.warmup_iters} calls; measure >= {s.min_iters} "
        f"calls and >= {s.min_time_s} s; parity on {s.parity_samples} inputs; cell timeout {s.cell_timeout_s:.0f} s",
        f"infer-compare {rep.tool_version}, schema {rep.schema_version}, {rep.created}, "
        f"{rep.elapsed_s if rep.elapsed_s is not None else '?'} s",
    ]


def model_line(rep: Report) -> str:
    m = rep.model
    return (f"{m.name} ({m.family}), input {'x'.join(map(str, m.input_shape))}, {m.num_classes} classes, "
            f"weights: {m.weights} ({m.weights_source}), hash {m.weights_hash}")


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
