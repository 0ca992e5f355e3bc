"""The A/B gate: the baseline (A) and the candidate (B) measured side by side in one run, each
configuration's two sides loaded at the same time and timed in alternating blocks (measure/ab.py), judged
on the paired ratios of adjacent blocks (regress/paired.py, regress/ab_judge.py).

A side is a bundle (``infer-compare export``: weights, export options, quantization recipe, opset) and an
interpreter (``python``: another environment, with its own runtimes and its own infer-compare). The plan
(which configurations, batch sizes, devices) is B's, as ``infer-compare run`` of B would measure it; A's
artifact of each configuration comes from A's bundle.

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
from infer_compare.base.records import SKIPPED, Report, RunRecord
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
from infer_compare.regress.ab_servers import SideServers, launch_early
from infer_compare.regress.paired import PAIRED_METRICS, log_ratios, replicates_needed
from infer_compare.regress.results import RegressionResult
from infer_compare.regress.rules import parse_rules

# the change a row should see (95 % power), in multiples of its rule's threshold: where the planned process
# pairs show a row too noisy for that, it gets more of them (PairPlan.max_replicates)
GOAL = 2.0


@dataclass(frozen=True)
class ABOutcome:
    a: Report  # the baseline side's rows, as a report of its own
    b: Report  # the candidate side's rows
    result: RegressionResult


class _Pairing:
    """The cell_runner given to B's run: each configuration B measures is measured with A beside it."""

    def __init__(self, prep_a: Prepared, pythons: dict[str, str | None], plan: PairPlan, servers: SideServers,
                 rules: Any = None):
        self.prep_a, self.pythons, self.plan = prep_a, pythons, plan
        self.needed = _needed(AB_RULES if rules is None else rules)
        self.work = Path(tempfile.mkdtemp(prefix="infer-compare-ab-"))
        multi = is_multi(prep_a.ds.eval)
        self.inputs = self.work / ("a-eval.npz" if multi else "a-eval.npy")
        save(self.inputs, prep_a.ds.eval)
        self.rows: dict[str, RunRecord] = {}
        self.servers = servers

    def __call__(self, spec: CellSpec, timeout_s: float, work: Path, tag: str, server: Any, settings: Any,
                 env: dict[str, str] | None = None, cancel: Any = None) -> list:
        key = (spec.format, get_format(spec.format).artifact_for(spec.precision, spec.runner))
        art = self.prep_a.carried.get(key)
        base = dict(backend=spec.runner, format=spec.format, precision=spec.precision, device=spec.device,
                    threads=spec.threads, variant="")
        if art is None:
            for b in spec.batch_sizes:
                row = RunRecord(**base, batch_size=b, status=SKIPPED, skip_kind="unsupported",
                                reason=f"{key[0]} {key[1]} is not in bundle A")
                self.rows[row.label] = row
            return _measure_b_alone(spec, timeout_s, work, tag, server, env)
        suffix = Path(spec.outputs).name.rsplit(".out.", 1)[-1]
        spec_a = spec.replace(artifact=art.path, inputs=str(self.inputs),
                              parity_inputs=str(self.inputs) if spec.parity_inputs else None,
                              outputs=str(self.work / f"{tag}-a-b{{batch}}.out.{suffix}"),
                              model=dict(self.prep_a.model_spec))
        plan = replace(self.plan, timeout_s=timeout_s)
        got = measure_pair({"a": spec_a, "b": spec}, self.pythons, {**os.environ, **(env or {})}, work, tag,
                           plan, self.servers.for_runner(spec.runner), self.needed)
        tol = get_format(spec.format).tolerance("int8" if self.prep_a.file_precision == "int8"
                                                else spec.precision)
        for res in got["a"]:
            out = Path(spec_a.outputs_for(res.batch_size))
            row = record_from_result(res, base, art, self.prep_a, tol,
                                     out if res.outputs_written and out.exists() else None, settings)
            self.rows[row.label] = row
        return got["b"]

    def report(self, b: Report, notes: list[str]) -> Report:
        """A's report: its measured rows where B measured, B's own skipped rows elsewhere (same machine)."""
        rows = tuple(self.rows.get(r.label, r) for r in b.rows)
        return replace(b, model=self.prep_a.minfo, rows=rows, notes=tuple(notes) + tuple(b.notes))

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


def _needed(rules: Any) -> Any:
    """How many process pairs a configuration needs (measure_pair asks once, after the planned ones): as many
    as let each relative timing rule's row see a change of GOAL times its threshold (e.g. +10 % at p50:+5%)
    with 95 % power, projected from the planned process pairs' spread (regress/paired.py
    ``replicates_needed``). None without such a rule."""
    timing = [r for r in parse_rules(rules) if r.metric in PAIRED_METRICS and r.relative and r.threshold > 0]
    if not timing:
        return None

    def needed(series: list[tuple[list[int], list[int], int]], reps: int, most: int) -> int:
        n = reps
        for a, b, calls in series:
            for rule in timing:
                xs = log_ratios(rule.metric, a, b, calls)
                if reps >= 3 and len(xs) >= 2 * reps and len(xs) % reps == 0:
                    n = max(n, replicates_needed(xs, reps, rule.threshold, GOAL * rule.threshold, most))
        return n

    return needed


def _measure_b_alone(spec: CellSpec, timeout_s: float, work: Path, tag: str, server: Any,
                     env: dict[str, str] | None) -> list:
    """A configuration only B has: measured as a plain run would (its row cannot be judged against A)."""
    # deferred: only a configuration missing from A needs it (+0 modules: measure.run loads it)
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
            command: list[str] | None = None, on_row: Any = None, allow_missing: bool = False,
            allow_condition_change: bool = False, servers: SideServers | None = None) -> ABOutcome:
    """Measure bundle A (baseline) and bundle B (candidate) side by side; judge B against A per row.
    ``servers``: the sides' fork servers, launched by the caller (``launch_early`` with the same interpreters
    and options); closed here. Without them they are launched here, their imports overlapping the bundles'
    verification."""
    prog = progress or Progress()
    pythons = {"a": python_a, "b": python_b}
    opts = options or MeasureOptions()
    servers = servers or launch_early(bundle_b, opts, pythons, prog)
    try:
        _, prep_a = _prepared(bundle_a, "A")
        # verified (every file hashed) once: run_bundle takes it as it is
        v_b, prep_b = _prepared(bundle_b, "B")
        _same_model(prep_a, prep_b)
        pairing = _Pairing(prep_a, pythons, plan or PairPlan(), servers, rules)
        try:
            # one pair at a time: two GPUs' pairs measured at once would each count the other as a disturbance
            rep_b = run_bundle(v_b, options=replace(opts, gpus="sequential"), progress=prog, command=command,
                               on_row=on_row, cell_runner=pairing)
            notes = [f"A/B gate, side A: bundle {Path(bundle_a).resolve()}"
                     + (f", interpreter {python_a}" if python_a else "")]
            rep_a = pairing.report(rep_b, notes)
        finally:
            pairing.close()
    finally:
        servers.close()
    result = judge_ab(rep_a, rep_b, AB_RULES if rules is None else rules, allow_missing=allow_missing,
                      allow_condition_change=allow_condition_change)
    return ABOutcome(rep_a, rep_b, result)
