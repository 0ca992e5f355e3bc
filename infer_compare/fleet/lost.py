"""A node that gave no report (it died, hung, was cancelled): its configurations as failed rows, one per
configuration (format, runtime, precision, device) that its job would have measured, and every cell
(each batch size) in the report's list of what did not run, so the banner counts them. What the job
would have measured is planned here on the driver from the bundle's manifest, the job's options, the
node's devices (its ``ic-device`` resources) and its runtimes (its ``infer-compare/<runtime>`` labels),
as ``run_bundle`` plans it on the node; kinds absent on the node are left out (the node itself would
have skipped them, not failed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infer_compare.base.records import RUN_FAILED, RunRecord, cell_label
from infer_compare.catalog.device_kinds import kind_of
from infer_compare.fleet.executor import Job, JobResult
from infer_compare.fleet.join import DEVICE

NOTE = "timed work is never retried: measure again with `infer-compare fleet run`"


def present_of(job: Job) -> dict[str, list[str]]:
    """The node's devices as its job's resources say (the CPU always)."""
    present: dict[str, list[str]] = {"cpu": ["cpu"]}
    prefix = f"{DEVICE}{job.target}/"
    for key in job.resources:
        if key.startswith(prefix):
            d = key[len(prefix):]
            present.setdefault(kind_of(d), []).append(d)
    return present


def _has_runtime(runner: str, runtimes: tuple[str, ...]) -> bool:
    return not runtimes or any(runner == r or runner.startswith(r + "-") for r in runtimes)


def planned(bundle: str, job: Job) -> list[tuple[Any, tuple[int, ...]]]:
    """[(Cell, its batch sizes)] the job would have measured on its node. OSError/ValueError/KeyError
    when the bundle's manifest cannot be read; UsageError/TypeError when the options leave nothing."""
    # deferred: only a lost node needs the planner (+3 modules)
    from infer_compare.bundle.run import _default_selection
    from infer_compare.measure.options import MeasureOptions
    from infer_compare.measure.plan import plan_cells

    man = json.loads((Path(bundle) / "manifest.json").read_text(encoding="utf-8"))
    sel = MeasureOptions.of(None, dict(job.run_kwargs), "fleet").selection()
    _default_selection(sel, man)
    batches = sel.batch_sizes_by_kind()
    cells = [c for c in plan_cells(present_of(job), sel)
             if c.device is not None and _has_runtime(c.runner, job.runtimes)]
    return [(c, batches[c.kind]) for c in cells]


def lost_rows(bundle: str, res: JobResult, prefix: bool = True) -> tuple[list[RunRecord], list[str]]:
    """(failed rows, one per configuration; labels of the cells that did not run), devices and labels as
    NODE:DEVICE with ``prefix`` (rows added after the merge), else as the node's own report spells them.
    A manifest that cannot be read here: one failed row for the whole job."""
    node = res.job.target
    at = f"{node}:" if prefix else ""
    try:
        cells = planned(bundle, res.job)
    except Exception:  # noqa: BLE001 - the driver's bundle is verified; anything else: one row for the job
        cells = []
    extra = {"machine": node}
    if not cells:
        devs = ",".join(res.job.run_kwargs.get("devices") or ["all"])
        return [RunRecord("fleet", "bundle", "-", f"{at}{devs}", None, RUN_FAILED, reason=res.error,
                          notes=(NOTE,), extra=extra)], []
    rows, not_run = [], []
    for c, bs in cells:
        rows.append(RunRecord(c.runner, c.fmt, c.precision, f"{at}{c.device}", None, RUN_FAILED,
                              reason=res.error, notes=(NOTE,), extra=extra))
        not_run += [at + cell_label(c.runner, c.fmt, c.precision, c.device, b) for b in bs]
    return rows, not_run
