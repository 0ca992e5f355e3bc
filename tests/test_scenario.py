"""The throughput scenario, parity in every cell, and what runs before the cold call.

- the throughput scenario of ONNX Runtime and OpenVINO on LeNet-5: rows of their own
  (scenario "throughput", the concurrency in their settings, labels distinct from the
  latency rows'), matched by scenario in ``diff``;
- a runner that answers wrongly only at batch 8 fails parity in that cell, and only there;
- the cold first call is the first call the runner sees;
- the child and its parent keep one result per batch size and scenario, also across a crash.

No assertion here is on a measured time.
"""

from __future__ import annotations

import numpy as np
import pytest

from infer_compare.base.errors import UsageError
from infer_compare.base.records import LATENCY, THROUGHPUT
from infer_compare.measure.bench import LoopSettings
from infer_compare.measure.cells import CellSpec
from infer_compare.measure.isolate import run_cell

from .conftest import python_env


def _spec(tmp_path, runner, batches=(1, 2), scenarios=(LATENCY, THROUGHPUT), **kw):
    np.save(tmp_path / "in.npy", np.zeros((4, 1, 32, 32), np.float32))
    return CellSpec(runner=runner if runner == "null" else f"tests.fake_runners:{runner}", artifact="none",
                    batch_sizes=tuple(batches), inputs=str(tmp_path / "in.npy"), scenarios=tuple(scenarios),
                    loop=LoopSettings(warmup_iters=2, min_iters=3, min_time_s=0.0, max_time_s=0.2,
                                      warmup_time_s=0.0), **kw)


# ------------------------------------------------------------------------------ the child and its parent
def test_one_result_per_batch_size_and_scenario(tmp_path):
    res = run_cell(_spec(tmp_path, "null"), 60, tmp_path, "null", env=python_env())
    assert [(r.batch_size, r.scenario) for r in res] == [(1, LATENCY), (1, THROUGHPUT), (2, LATENCY),
                                                         (2, THROUGHPUT)]
    assert all(r.ok and r.process == 1 for r in res)
    tp = [r for r in res if r.scenario == THROUGHPUT]
    assert all(r.images == r.batch_size * len(r.samples_ns) > 0 and r.wall_ns > 0 for r in tp)
    assert all(r.settings["concurrency"] >= 1 and r.settings["concurrency_unit"] == "threads" for r in tp)
    only = run_cell(_spec(tmp_path, "null", scenarios=(THROUGHPUT,)), 60, tmp_path, "tp", env=python_env())
    assert [(r.batch_size, r.scenario) for r in only] == [(1, THROUGHPUT), (2, THROUGHPUT)]


def test_crash_in_the_throughput_scenario_keeps_the_latency_row(tmp_path):
    res = run_cell(_spec(tmp_path, "CrashInThroughput"), 60, tmp_path, "crash", env=python_env())
    by = {(r.batch_size, r.scenario): r for r in res}
    assert list(by) == [(1, LATENCY), (1, THROUGHPUT), (2, LATENCY), (2, THROUGHPUT)]
    assert by[1, LATENCY].ok and by[1, LATENCY].process == 1
    assert not by[1, THROUGHPUT].ok and "SIGSEGV" in by[1, THROUGHPUT].error
    assert by[2, LATENCY].ok and by[2, THROUGHPUT].ok and by[2, THROUGHPUT].process == 2


def test_cold_first_call_is_the_first_run_the_runner_sees(tmp_path):
    [res] = run_cell(_spec(tmp_path, "CountingRunner", batches=(2,), scenarios=(LATENCY,)), 60, tmp_path,
                     "count", env=python_env())
    assert res.ok and res.first_infer_ms is not None
    ex, loop = res.extra, res.loop
    # nothing ran before the cold call: not load, not prepare, not the harness
    assert ex["runs_before_first"] == 0
    assert ex["prepared"] == 1
    # the cold call, then the warm-up, then the samples: each call counted once, the cold one in none of the
    # others
    assert ex["calls"] == 1 + loop["warmup_calls"] + loop["n"] and loop["warmup_calls"] >= 1


def test_scenario_choices_and_plumbing():
    from infer_compare.cli import build_parser
    from infer_compare.cli.flags import measure_options
    from infer_compare.measure.plan import make_selection, parse_scenarios, settings_for
    from infer_compare.measure.run import _how_spec

    assert parse_scenarios("both") == (LATENCY, THROUGHPUT)
    assert parse_scenarios(["throughput", "latency"]) == (LATENCY, THROUGHPUT)
    with pytest.raises(UsageError, match="unknown scenario"):
        parse_scenarios("fast")
    args = build_parser().parse_args(["--model", "lenet5", "--scenario", "both", "--concurrency", "3"])
    sel = measure_options(args).selection()
    assert sel.scenarios == (LATENCY, THROUGHPUT) and sel.concurrency == 3
    s = settings_for(sel, {"cpu": ["cpu"]}, 2, 10)
    assert s.scenarios == (LATENCY, THROUGHPUT) and _how_spec(s)["scenarios"] == (LATENCY, THROUGHPUT)
    assert build_parser().parse_args(["--model", "lenet5"]).scenario == "latency"
    with pytest.raises(UsageError):
        make_selection(concurrency=-1)


# ------------------------------------------------------------------------------ LeNet-5, real runtimes
@pytest.fixture(scope="module")
def scenario_report(cache_dir):
    from infer_compare import compare

    return compare("lenet5", devices=["cpu"], formats=["onnx", "openvino"],
                   backends=["onnxruntime", "openvino"], precisions=["fp32"], batch_sizes=[1, 4],
                   cache_dir=cache_dir, scenarios="both", warmup_iters=1, min_iters=5, min_time_s=0.05,
                   max_time_s=0.3)


def test_throughput_rows_on_lenet(scenario_report):
    rows = [r for r in scenario_report.rows if r.batch_size is not None]
    tp = [r for r in rows if r.scenario == THROUGHPUT]
    assert {(r.backend, r.batch_size) for r in tp} == {(b, n) for b in ("onnxruntime", "openvino")
                                                       for n in (1, 4)}
    for r in tp:
        assert r.status == "ok", (r.label, r.reason)
        assert r.options["scenario"] == THROUGHPUT and r.options["concurrency"] >= 1
        assert r.throughput and r.throughput > 0 and r.latency.count == len(r.samples_ns) > 0
        assert r.extra["throughput_path_parity"]["passed"]  # the concurrent path's own outputs, checked too
    ov = [r for r in tp if r.backend == "openvino"]
    assert all(r.options["PERFORMANCE_HINT"] == "THROUGHPUT" and r.options["infer_requests"] >= 1 for r in ov)
    labels = [r.label for r in rows]
    assert len(labels) == len(set(labels))
    assert all(r.label.endswith("/throughput") for r in tp)
    assert {r.label for r in rows if r.scenario == LATENCY}.isdisjoint({r.label for r in tp})
    assert scenario_report.settings.scenarios == (LATENCY, THROUGHPUT)


def test_diff_matches_rows_by_scenario(scenario_report):
    from infer_compare.regress import check_regression

    lat_only = scenario_report.replace(rows=tuple(r for r in scenario_report.rows if r.scenario == LATENCY))
    res = check_regression(scenario_report, lat_only, ["throughput:-50%"], allow_environment_change=True)
    by = {d.label: d for d in res.rows}
    tp = [r.label for r in scenario_report.rows if r.scenario == THROUGHPUT]
    # new, not matched
    assert tp and all(by[lab].baseline is None and by[lab].current is not None for lab in tp)
    lat = [r.label for r in lat_only.rows if r.batch_size is not None]
    assert all(by[lab].baseline is not None and by[lab].current is not None for lab in lat)
    # a throughput row is never compared with the latency row of its cell
    assert all(by[lab].current.scenario == by[lab].baseline.scenario for lab in lat)
    same = check_regression(scenario_report, scenario_report, ["throughput:-50%"])
    assert all(d.baseline.scenario == d.current.scenario for d in same.rows if d.baseline is not None)


def test_the_table_marks_throughput_rows(scenario_report):
    from infer_compare.report import common
    from infer_compare.report.verdict import verdict

    tp = next(r for r in scenario_report.rows if r.scenario == THROUGHPUT)
    assert f"throughput ×{tp.options['concurrency']}" in common.prec_label(tp)
    assert any("throughput ×N" in line for line in common.latency_notes(scenario_report))
    v = verdict(scenario_report)
    fastest = next((p for p in v.picks if p.title.startswith("fastest at batch 1")), None)
    assert fastest is None or fastest.row.scenario == LATENCY  # latency under load is not a batch-1 latency


# ------------------------------------------------------------------------------ parity in every cell
def test_wrong_answer_only_at_batch_8_fails_parity_in_that_cell(cache_dir, monkeypatch):
    from infer_compare import compare
    from infer_compare.catalog import formats

    monkeypatch.setitem(formats.RUNNERS, "onnxruntime", formats.RunnerInfo(
        "onnxruntime", "wrong at batch 8", "tests.fake_runners:WrongAtBatch8", ("cpu",), formats=("onnx",),
        options="infer_compare.backends.onnxruntime.options:OrtOptions"))
    monkeypatch.setenv("PYTHONPATH", python_env()["PYTHONPATH"])
    rep = compare("lenet5", devices=["cpu"], formats=["onnx"], backends=["onnxruntime"], precisions=["fp32"],
                  batch_sizes=[1, 8, 16], cache_dir=cache_dir, warmup_iters=1, min_iters=3, min_time_s=0.0,
                  max_time_s=0.2)
    by = {r.batch_size: r for r in rep.rows if r.backend == "onnxruntime"}
    assert by[8].status == "parity_failed" and by[8].parity is not None and not by[8].parity.passed
    assert by[1].status == "ok" and by[16].status == "ok"
    assert by[8].parity.n >= 32  # a subset at the smaller batch size, but a real one
