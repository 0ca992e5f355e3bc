"""The driver of ``infer-compare fleet run``: connect, plan jobs per node, run them through an
executor, and merge every node's report with the existing ``merge`` (a machine per node). A node
without a report leaves a failed row that names it, and the report is incomplete for it."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Sequence
from typing import Any

from infer_compare.base.errors import SchemaError, UsageError
from infer_compare.base.records import Report
from infer_compare.fleet.executor import Event, Job, JobResult
from infer_compare.fleet.lost import lost_rows
from infer_compare.report.merge import merge_reports


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--address {address!r}: expected HOST:PORT of the Ray head (e.g. 127.0.0.1:6379)")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise UsageError(f"cannot reach the Ray head at {address}: {e.strerror or e}") from None


def waves(jobs: list[Job]) -> list[list[Job]]:
    """Concurrent GPU groups (and nodes without one) first; then the CPU jobs of nodes that had a group,
    so CPU configurations never run beside their host's GPU jobs."""
    grouped = {j.target for j in jobs if j.group}
    first = [j for j in jobs if j.group or j.target not in grouped]
    second = [j for j in jobs if not j.group and j.target in grouped]
    return [w for w in (first, second) if w]


def checked(r: JobResult) -> JobResult:
    """``r`` with its report checked against the results schema (where the executor has not); a report that
    breaks it is a failed job saying why, so the other nodes' rows are kept."""
    if r.report is None or r.checked is not None:
        return r
    try:
        report = Report.from_dict(r.report, where=f"node {r.job.label}'s report")
        return dataclasses.replace(r, checked=report)
    except SchemaError as e:
        return dataclasses.replace(r, report=None, error=f"answer refused: {e}")


def node_report(results: list[JobResult], bundle: str = ""):
    """One Report per node from its jobs' reports (several GPUs: one per GPU), with failed rows for the
    configurations of jobs without a report (fleet/lost.py) and what ran concurrently recorded on each
    row; None if nothing came back."""
    reps = [(r, r.checked or Report.from_dict(r.report)) for r in results if r.report is not None]
    if not reps:
        return None
    base = reps[0][1]
    rows = []
    for res, rep in reps:
        extra = {"concurrent_with": res.job.group} if res.job.group else {}
        rows += [row.replace(extra={**row.extra, **extra}) if extra else row for row in rep.rows]
    failed = [r for r in results if r.report is None]
    lost = [lost_rows(bundle, r, prefix=False) for r in failed]
    rows += [row for rs, _ in lost for row in rs]
    notes = [n for _, rep in reps for n in rep.notes]
    notes += [f"ran concurrently: {g}, each process pinned to its own CPU cores"
              for g in dict.fromkeys(r.job.group for r in results if r.job.group)]
    notes += [_task_note(r) for r in results if r.node.get("task")]
    return base.replace(rows=tuple(rows), notes=tuple(dict.fromkeys(notes)),
                        not_run=(tuple(x for _, rep in reps for x in rep.not_run)
                                 + tuple(x for _, n in lost for x in n)),
                        complete=base.complete and not failed and all(rep.complete for _, rep in reps),
                        incomplete_reason="; ".join([r.error for r in failed]
                                                    + [rep.incomplete_reason for _, rep in reps
                                                       if rep.incomplete_reason]))


def _task_note(res: JobResult) -> str:
    """What the Ray task of a job saw (fleet/task.py), as a note of its node's report."""
    t = res.node["task"]
    return (f"the Ray task of {res.job.label} saw "
            f"CUDA_VISIBLE_DEVICES={t.get('CUDA_VISIBLE_DEVICES')!r} (Ray's GPU ids {t.get('ray_gpu_ids')}), "
            f"OMP_NUM_THREADS={t.get('OMP_NUM_THREADS')!r} (not passed on to the measuring processes), "
            f"nice {t.get('nice')} (the measuring processes at 0 unless a warning says otherwise) and "
            f"{t.get('cores')} cores" + (f"; it {t['bundle']}" if t.get("bundle") else ""))


def shared_hosts(facts: dict[str, dict[str, Any]]) -> list[str]:
    """A warning per host that ran several nodes: their rows competed for that host's cores and memory."""
    by: dict[str, list[str]] = {}
    for n, f in facts.items():
        if f.get("host"):
            by.setdefault(f["host"], []).append(n)
    return [f"nodes {', '.join(sorted(ns))} ran on one host ({h}): their measurements shared its CPU, memory "
            "and devices, and may have run at the same time" for h, ns in sorted(by.items()) if len(ns) > 1]


def skew(facts: dict[str, dict[str, Any]]) -> list[str]:
    """Per-node version differences (infer-compare, Python, Ray), one warning each."""
    out = []
    for key in ("tool_version", "python", "ray"):
        vals = {n: f.get(key) for n, f in facts.items() if f.get(key)}
        if len(set(vals.values())) > 1:
            out.append(f"version skew, {key}: " + ", ".join(f"{n} {v}" for n, v in sorted(vals.items())))
    return out


def run_fleet(bundle: str, executor, jobs: list[Job], on_event: Event, command: Sequence[str],
              others: Sequence[tuple[str, Any]] = ()):
    """(merged Report or None, every JobResult). Ctrl-C: the executor cancels; what came back is kept.
    ``others``: (machine, Report) measured by the bundle route (`infer-compare run` on a board without
    Ray), merged beside the nodes."""
    results: list[JobResult] = []
    interrupted = False
    for wave in waves(jobs):
        try:
            results += executor.run(bundle, wave, on_event)
        except KeyboardInterrupt:
            interrupted = True
        if interrupted or any("Ctrl-C" in r.error for r in results):
            interrupted = True
            break
    results = [checked(r) for r in results]
    done = {id(r.job) for r in results}
    results += [JobResult(j, error=f"node {j.target}: not started (interrupted)")
                for j in jobs if id(j) not in done]
    by_node: dict[str, list[JobResult]] = {}
    for r in results:
        by_node.setdefault(r.job.target, []).append(r)
    reps = {n: node_report(rs, bundle) for n, rs in by_node.items()}
    names = [n for n, rep in reps.items() if rep is not None]
    if not names and not others:
        return None, results
    merged = merge_reports([reps[n] for n in names] + [r for _, r in others],
                           labels=names + [n for n, _ in others],
                           sources=[f"node {n}" for n in names] + [f"{n} (bundle route)" for n, _ in others],
                           command=command)
    facts = {n: r.node for n, rs in by_node.items() for r in rs if r.node}
    lost = [r for n, rs in by_node.items() if reps[n] is None for r in rs]
    gone = [lost_rows(bundle, r) for r in lost]  # one failed row per configuration, each cell in not_run
    rows = merged.rows + tuple(row for rs, _ in gone for row in rs)
    reasons = [merged.incomplete_reason] if merged.incomplete_reason else []
    reasons += [f"{r.job.target}: {r.error}" for r in lost]
    return merged.replace(rows=rows, not_run=merged.not_run + tuple(x for _, nr in gone for x in nr),
                          warnings=merged.warnings + tuple(skew(facts)) + tuple(shared_hosts(facts)),
                          complete=merged.complete and not lost and not interrupted,
                          incomplete_reason="; ".join(
                              reasons + (["interrupted by Ctrl-C"] if interrupted else []))), \
        results
