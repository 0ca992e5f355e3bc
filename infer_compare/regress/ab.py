"""The A/B gate: the baseline (A) and the candidate (B) measured side by side in one run, each
configuration's two sides loaded at the same time and timed in alternating blocks (measure/ab.py), judged
on the paired ratios of adjacent blocks (regress/paired.py, regress/ab_judge.py).

A side is a bundle (``infer-compare export``: weights, export options, quantization recipe, opset) and an
interpreter (``python``: another environment, with its own runtimes and its own infer-compare). The plan
(which configurations, batch sizes, devices) is A's, as ``infer-compare run`` of A would measure it: a
release that drops or breaks a configuration fails the gate on that row. B's artifact of each configuration
comes from B's bundle.

    from infer_compare.regress.ab import ab_gate
    outcome = ab_gate("main-bundle/", "change-bundle/", python_b="/venvs/ort-next/bin/python")
    outcome.result.passed
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infer_compare.base.batches import is_multi, save
from infer_compare.base.errors import UsageError
from infer_compare.base.progress import Progress
from infer_compare.base.records import EXPORT_FAILED, SKIPPED, Report, RunRecord
from infer_compare.bundle.run import prepared_from_bundle, run_bundle
from infer_compare.bundle.verify import verify
from infer_compare.catalog.formats import get_format
from infer_compare.measure.ab import PairPlan, measure_pair
from infer_compare.measure.cells import CellSpec
from infer_compare.measure.options import MeasureOptions
from infer_compare.measure.rows import record_from_result
from infer_compare.prepare.model import judge_outputs_as, kind_options
from infer_compare.prepare.prepared import Prepared
from infer_compare.regress.ab_judge import AB_RULES, judge_ab
from infer_compare.regress.ab_needs import Budget, needed, plan_text
from infer_compare.regress.ab_servers import SideServers, launch_early
from infer_compare.regress.paired import PAIRED_METRICS
from infer_compare.regress.results import RegressionResult
from infer_compare.regress.rules import parse_rules
from infer_compare.regress.tails import TAILS


@dataclass(frozen=True)
class ABOutcome:
    a: Report  # the baseline side's rows, as a report of its own
    b: Report  # the candidate side's rows
    result: RegressionResult


class _Pairing:
    """The cell_runner given to A's run: each configuration A measures is measured with B beside it. Where B
    does not carry it (not exported, its build failed), A is measured alone and B's row says why: a
    regression of that row unless accepted by name (--allow-missing LABEL)."""

    def __init__(self, prep_b: Prepared, pythons: dict[str, str | None], plan: PairPlan, servers: SideServers,
                 rules: Any = None, log: Any = None):
        self.prep_b, self.pythons, self.plan, self.log = prep_b, pythons, plan, log
        self.rules = AB_RULES if rules is None else rules
        self.needed = needed(self.rules)
        self.budget = Budget(plan.budget_s)
        self.plan_text = ""
        self.work = Path(tempfile.mkdtemp(prefix="infer-compare-ab-"))
        multi = is_multi(prep_b.ds.eval)
        self.inputs = self.work / ("b-eval.npz" if multi else "b-eval.npy")
        save(self.inputs, prep_b.ds.eval)
        self.rows: dict[str, RunRecord] = {}
        self.servers = servers

    def planned(self, rows: int, configurations: int = 1) -> None:
        """The plan's rows and configurations (measure/run.py, before the first is measured): the process
        pairs a row needs are planned for the family of the gate's timing checks (rows times timing rules),
        the budget shared among the configurations."""
        timing = [r for r in parse_rules(self.rules) if r.metric in (*PAIRED_METRICS, *TAILS)]
        checks = rows * len(timing)
        self.needed = needed(self.rules, checks=max(1, checks))
        self.budget = Budget(self.plan.budget_s, configurations)
        self.plan_text = plan_text(checks if self.needed else 0, self.plan.replicates,
                                   self.plan.max_replicates, self.plan.budget_s)
        if self.plan_text and self.log:
            self.log(f"A/B gate: {self.plan_text}")

    def __call__(self, spec: CellSpec, timeout_s: float, work: Path, tag: str, server: Any, settings: Any,
                 env: dict[str, str] | None = None, cancel: Any = None) -> list:
        key = (spec.format, get_format(spec.format).artifact_for(spec.precision, spec.runner))
        art = self.prep_b.carried.get(key)
        base = dict(backend=spec.runner, format=spec.format, precision=spec.precision, device=spec.device,
                    threads=spec.threads, variant="")
        if art is None:
            status, reason, kind = _lacks(self.prep_b, key)
            for b in spec.batch_sizes:
                row = RunRecord(**base, batch_size=b, status=status, reason=reason,
                                skip_kind=kind if status == SKIPPED else "")
                self.rows[row.label] = row
            return _measure_alone(spec, timeout_s, work, tag, server, env)
        suffix = Path(spec.outputs).name.rsplit(".out.", 1)[-1]
        spec_b = spec.replace(artifact=art.path, inputs=str(self.inputs),
                              parity_inputs=str(self.inputs) if spec.parity_inputs else None,
                              outputs=str(self.work / f"{tag}-b-b{{batch}}.out.{suffix}"),
                              model=dict(self.prep_b.model_spec))
        plan = replace(self.plan, timeout_s=timeout_s, budget_s=self.budget.share())
        try:
            got = measure_pair({"a": spec, "b": spec_b}, self.pythons, {**os.environ, **(env or {})}, work,
                               tag, plan, self.servers.for_runner(spec.runner), self.needed)
        finally:
            self.budget.done()
        tol = get_format(spec.format).tolerance("int8" if self.prep_b.file_precision == "int8"
                                                else spec.precision)
        for res in got["b"]:
            out = Path(spec_b.outputs_for(res.batch_size))
            row = record_from_result(res, base, art, self.prep_b, tol,
                                     out if res.outputs_written and out.exists() else None, settings)
            self.rows[row.label] = row
        return got["a"]

    def report(self, a: Report, prep_a: Prepared, notes: list[str]) -> Report:
        """B's report: its rows measured beside A's, and for every configuration A did not measure, what B
        has of it (a configuration only B carries is new: listed, not measured)."""
        rows = tuple(self.rows.get(r.label) or _unmeasured(r, prep_a, self.prep_b) for r in a.rows)
        return replace(a, model=self.prep_b.minfo, rows=rows, notes=tuple(notes) + tuple(a.notes))

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


NEW_IN_B = "new in bundle B"


def _new_in_b(prep_a: Prepared, prep_b: Prepared, opts: MeasureOptions) -> list[str]:
    """The note listing the artifacts only B carries, within the gate's selection (not measured)."""
    new = sorted(f"{f} {p}" for f, p in set(prep_b.carried) - set(prep_a.carried)
                 if (not opts.formats or f in opts.formats) and (not opts.precisions or p in opts.precisions))
    return [f"{NEW_IN_B}, not in A (not measured: the gate measures A's configurations): "
            f"{', '.join(new)}"] if new else []


def _lacks(prep_b: Prepared, key: tuple[str, str]) -> tuple[str, str, str]:
    """(status, reason, skip kind) of B's row for a configuration bundle A carries and B does not."""
    why = prep_b.unbuilt.get(key)
    if why is not None and why.status == EXPORT_FAILED:
        return EXPORT_FAILED, f"bundle B: {why.reason}", ""
    if why is not None and why.reason.startswith("not built"):
        return SKIPPED, f"bundle B: {why.reason}", why.skip_kind
    return SKIPPED, f"{key[0]} {key[1]} is not in bundle B (bundle A carries it)", "unsupported"


def _unmeasured(r: RunRecord, prep_a: Prepared, prep_b: Prepared) -> RunRecord:
    """B's row for a configuration A's run did not measure: A's own row where the reason is this machine's
    (a device or runtime absent), B's where it is the bundles'."""
    key = (r.format, get_format(r.format).artifact_for(r.precision, r.backend)) if r.format else None
    if key is None or key not in prep_a.unbuilt:
        return r
    if key in prep_b.carried:
        return replace(r, status=SKIPPED, skip_kind="unsupported",
                       reason=f"{NEW_IN_B}: bundle A does not carry {key[0]} {key[1]} (not measured)")
    why = prep_b.unbuilt.get(key)
    if why is None:
        return r
    return replace(r, status=why.status, reason=why.reason, hint=why.hint,
                   skip_kind=why.skip_kind if why.status == SKIPPED else "")


def _measure_alone(spec: CellSpec, timeout_s: float, work: Path, tag: str, server: Any,
                   env: dict[str, str] | None) -> list:
    """A configuration B lacks: A measured as a plain run would (its row has nothing to be judged against)."""
    # deferred: only a configuration missing from B needs it (+0 modules: measure.run loads it)
    from infer_compare.measure.isolate import run_cell

    return run_cell(spec, timeout_s, work, tag, env=env, server=server)


def _prepared(bundle: str | os.PathLike, side: str) -> tuple[Any, Prepared]:
    v = verify(bundle)
    prep = prepared_from_bundle(v)
    judge_outputs_as(prep, kind_options(v.manifest.get("output_kinds") or {}))
    return v, prep


def _same_model(a: Prepared, b: Prepared) -> None:
    """One line before anything is measured when the two bundles are not of one model."""
    ia, ib = a.minfo, b.minfo
    if ia.name != ib.name or tuple(ia.input_shape) != tuple(ib.input_shape):
        raise UsageError(f"bundles A and B are of different models ({ia.name} {list(ia.input_shape)} against "
                         f"{ib.name} {list(ib.input_shape)}): the gate compares two versions of one model")


def ab_gate(bundle_a: str | os.PathLike, bundle_b: str | os.PathLike, *, rules: Any = None,
            python_a: str | None = None, python_b: str | None = None, plan: PairPlan | None = None,
            options: MeasureOptions | None = None, progress: Progress | None = None,
            command: list[str] | None = None, on_row: Any = None,
            allow_missing: bool | tuple[str, ...] = False, allow_condition_change: bool = False,
            servers: SideServers | None = None) -> ABOutcome:
    """Measure bundle A (baseline) and bundle B (candidate) side by side; judge B against A per row. The plan
    is A's: every configuration A carries is measured, and one that B lacks, failed to build or cannot load
    is a regression of that row unless ``allow_missing`` names it (fnmatch patterns of row labels; True:
    every row B lacks). ``servers``: the sides' fork servers, launched by the caller (``launch_early`` with
    bundle A, the same interpreters and options); closed here. Without them they are launched here, their
    imports overlapping the bundles' verification. ``on_row`` gets B's report as rows arrive."""
    prog = progress or Progress()
    pythons = {"a": python_a, "b": python_b}
    opts = options or MeasureOptions()
    servers = servers or launch_early(bundle_a, opts, pythons, prog)
    try:
        # verified (every file hashed) once: run_bundle takes it as it is
        v_a, prep_a = _prepared(bundle_a, "A")
        _, prep_b = _prepared(bundle_b, "B")
        _same_model(prep_a, prep_b)
        pairing = _Pairing(prep_b, pythons, plan or PairPlan(), servers, rules, prog.log)
        notes = [f"A/B gate, side B: bundle {Path(bundle_b).resolve()}"
                 + (f", interpreter {python_b}" if python_b else "")] + _new_in_b(prep_a, prep_b, opts)
        try:
            # one pair at a time: two GPUs' pairs measured at once would each count the other as a disturbance
            saving = (lambda r: on_row(pairing.report(r, prep_a, notes))) if on_row else None
            rep_a = run_bundle(v_a, options=replace(opts, gpus="sequential"), progress=prog, command=command,
                               on_row=saving, cell_runner=pairing)
            rep_b = pairing.report(rep_a, prep_a, notes)
        finally:
            pairing.close()
    finally:
        servers.close()
    rep_a = replace(rep_a, notes=(f"A/B gate, side A (the baseline): bundle {Path(bundle_a).resolve()}"
                                  + (f", interpreter {python_a}" if python_a else ""),) + tuple(rep_a.notes))
    result = judge_ab(rep_a, rep_b, AB_RULES if rules is None else rules, allow_missing=allow_missing,
                      allow_condition_change=allow_condition_change)
    if pairing.plan_text:
        result = replace(result, method=f"{result.method}; {pairing.plan_text}")
    return ABOutcome(rep_a, rep_b, result)
