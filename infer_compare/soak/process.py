"""The parent's side of one configuration's soak: the child process (own process group,
killed on a timeout and on Ctrl-C/SIGTERM, as measure/isolate.py does for a measured cell), its
lines read as they come, and what they make: the report's row and the SoakResult."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infer_compare.base.records import (
    OK,
    PERCENTILE_MIN_SAMPLES,
    RUN_FAILED,
    SKIPPED,
    ExportRecord,
    LatencyStats,
    RunRecord,
)
from infer_compare.base.soak_records import SoakResult, SoakWindow
from infer_compare.host.launch import ChildNotStarted, describe_exit, kill_group, popen, read_tail
from infer_compare.soak.child import SoakSpec, hist_value_ns

POLL_S = 0.1


class Lines:
    """The complete JSON lines appended to a file since the last read (a line cut short waits)."""

    def __init__(self, path: Path):
        self.path, self.pos, self.rest = path, 0, b""

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return []
        self.pos += len(data)
        *lines, self.rest = (self.rest + data).split(b"\n")
        out = []
        for ln in lines:
            try:
                out.append(json.loads(ln))
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
        return out


class Collected:
    """What one child has said: its start line, windows, end or error; and how it died, if it did."""

    def __init__(self) -> None:
        self.start: dict[str, Any] | None = None
        self.windows: list[SoakWindow] = []
        self.end: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self.death = ""  # crashed or timed out
        self.stderr = ""
        self.hist: dict[int, int] = {}
        self.interrupted = False  # set by the caller on Ctrl-C/SIGTERM

    def take(self, lines: list[dict[str, Any]],
             on_line: Callable[[dict[str, Any]], Any] | None = None) -> None:
        for d in lines:
            kind = d.get("kind")
            if kind == "window":
                for i, c in d.get("hist") or ():
                    self.hist[int(i)] = self.hist.get(int(i), 0) + int(c)
                self.windows.append(SoakWindow.from_dict(d))
            elif kind in ("start", "end", "error"):
                setattr(self, kind, d)
            if on_line is not None:
                on_line(d)

    def stopped_by(self) -> tuple[str, str]:
        """(how it stopped, why) for SoakResult: duration, interrupted, failed, timed_out, crashed; or
        running while the child still soaks."""
        if self.interrupted:
            return "interrupted", ""
        if self.end is not None:
            return "duration", ""
        if self.error is not None:
            return "failed", str(self.error.get("error", ""))
        if self.death:
            return ("timed_out" if self.death.startswith("timed out") else "crashed"), self.death
        return "running", ""

    def latency(self, stopped_by: str) -> LatencyStats | None:
        """Every call of the soak: exact count, mean, std, min and max; percentiles from the histogram."""
        ws = [w for w in self.windows if w.calls]
        n = sum(w.calls for w in ws)
        if not n:
            return None
        mean = sum(w.mean_ms * w.calls for w in ws) / n
        ss = sum((w.calls - 1) * w.std_ms ** 2 + w.calls * (w.mean_ms - mean) ** 2 for w in ws)
        lo, hi = min(w.min_ms for w in ws), max(w.max_ms for w in ws)
        pct = hist_percentiles(self.hist, (50, 90, 95, 99))
        shown = {q: (None if n < PERCENTILE_MIN_SAMPLES.get(f"p{q}", 1) or pct.get(q) is None
                     else min(max(pct[q] / 1e6, lo), hi)) for q in (50, 90, 95, 99)}
        return LatencyStats(count=n, mean_ms=mean, std_ms=(ss / (n - 1)) ** 0.5 if n > 1 else 0.0, min_ms=lo,
                            p50_ms=shown[50] if shown[50] is not None else ws[0].p50_ms, p90_ms=shown[90],
                            p95_ms=shown[95], p99_ms=shown[99], max_ms=hi, stopped_by=stopped_by)


def hist_percentiles(hist: dict[int, int], qs: tuple[float, ...]) -> dict[float, float]:
    """Nearest-rank percentiles (ns) of a soaking child's histogram."""
    total = sum(hist.values())
    if not total:
        return {}
    out: dict[float, float] = {}
    items = sorted(hist.items())
    for q in qs:
        rank, cum = max(1, -(-q * total // 100)), 0
        for i, c in items:
            cum += c
            if cum >= rank:
                out[q] = hist_value_ns(i)
                break
    return out


def _follow(proc: subprocess.Popen, lines: Lines, got: Collected, spec: SoakSpec, timeout_s: float,
            on_line: Callable[[dict[str, Any]], Any] | None) -> None:
    last = time.perf_counter()
    while proc.poll() is None:
        time.sleep(POLL_S)
        new = lines.read()
        now = time.perf_counter()
        if new:
            got.take(new, on_line)
            last = now
        allowed = timeout_s + (1.5 * spec.window_s if got.start is not None else 0.0)
        if now - last > allowed:
            kill_group(proc)
            got.death = (f"timed out: no progress for {allowed:.0f} s (a hang, or raise "
                         "--cell-timeout); killed")
            return


def soak_one(spec: SoakSpec, workdir: Path, tag: str, timeout_s: float, got: Collected,
             on_line: Callable[[dict[str, Any]], Any] | None = None,
             env: dict[str, str] | None = None) -> Collected:
    """Soak ``spec`` in a child process; ``got`` fills as its lines come (so that a caller interrupted
    meanwhile keeps every finished window). On Ctrl-C/SIGTERM the child's group is killed and the
    interrupt goes on up."""
    spec_path, result_path = workdir / f"{tag}.soak.json", workdir / f"{tag}.soak.jsonl"
    err_path = workdir / f"{tag}.soak.stderr"
    result_path.unlink(missing_ok=True)
    spec_path.write_text(json.dumps(spec.to_dict()))
    lines = Lines(result_path)
    with open(err_path, "w+", errors="replace") as err:
        try:
            proc = popen("infer_compare.soak.child", [str(spec_path), str(result_path)], env, stdout=err,
                         stderr=subprocess.STDOUT)
        except ChildNotStarted as e:  # a failed row that says why; the soak goes on
            got.death = str(e)
            return got
        try:
            _follow(proc, lines, got, spec, timeout_s, on_line)
        except BaseException:  # Ctrl-C, SIGTERM: no child survives its parent; keep what it finished
            kill_group(proc)
            got.take(lines.read())
            raise
        finally:
            got.stderr = read_tail(err_path)
    got.take(lines.read(), on_line)
    if got.end is None and got.error is None and not got.death:
        last = got.stderr.splitlines()[-1] if got.stderr else ""
        got.death = (f"backend process crashed ({describe_exit(proc.returncode)})"
                     + (f": {last}" if last else ""))
    return got


def soak_result(got: Collected, label: str, spec: SoakSpec) -> SoakResult:
    stopped_by, why = got.stopped_by()
    start = got.start or {}
    return SoakResult.build(label, spec.duration_s, spec.window_s, got.windows,
                            rss_start_mb=start.get("rss_mb"),
                            stopped_by=stopped_by, reason=why, sensors=start.get("sensors") or ())


def _failed_row(got: Collected, common: dict[str, Any]) -> RunRecord:
    err = got.error or {}
    status = SKIPPED if err.get("status") == SKIPPED else RUN_FAILED
    extra = {k: v for k, v in (("stderr_tail", got.stderr), ("traceback", err.get("traceback", ""))) if v}
    return RunRecord(**common, status=status, reason=err.get("error") or got.death or "unknown failure",
                     hint=err.get("hint", ""), skip_kind="unavailable" if status == SKIPPED else "",
                     extra=extra)


def row_of(got: Collected, base: dict[str, Any], batch: int, art: ExportRecord,
           warmup_iters: int) -> RunRecord:
    """The configuration's row: every call of the soak (ok), or why it failed (run_failed, skipped)."""
    common = dict(base, batch_size=batch, export=art)
    if not got.windows:
        return _failed_row(got, common)
    start, end = got.start or {}, got.end or {}
    stopped_by, why = got.stopped_by()
    wall = sum(w.duration_s for w in got.windows)
    images = sum(w.images for w in got.windows)
    notes = list(start.get("notes") or ())
    prec = base["precision"]
    if start.get("exec_precision") and start["exec_precision"] != prec and prec != "int8":
        notes.append(f"requested {prec}, the runtime executed {start['exec_precision']}")
    if stopped_by in ("interrupted", "running"):
        notes.append(f"soak {stopped_by} after {len(got.windows)} windows")
    status, reason = (OK, "") if stopped_by in ("duration", "interrupted", "running") else (
        RUN_FAILED, f"after {len(got.windows)} windows: {why}")
    rss = [w.rss_mb for w in got.windows if w.rss_mb is not None]
    extra = dict(end.get("extra") or {})
    if status != OK and got.stderr:
        extra["stderr_tail"] = got.stderr
    return RunRecord(**common, status=status, reason=reason, exec_precision=start.get("exec_precision", ""),
                     latency=got.latency(stopped_by), throughput=images / wall if wall > 0 else None,
                     load_s=start.get("load_s"), first_infer_ms=start.get("first_infer_ms"),
                     peak_rss_mb=end.get("peak_rss_mb") or (max(rss) if rss else None), measured_wall_s=wall,
                     warmup_iters=warmup_iters, versions=dict(start.get("versions") or {}),
                     options=dict(start.get("settings") or {}), notes=tuple(notes), extra=extra)
