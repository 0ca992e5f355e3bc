"""The regression gate's judgement on constructed reports (deterministic; the real runs are in
test_regress.py and the measured pass/catch rates in benchmarks/gate_quality.py): timings judged
against the calibration workload or the run's reference row, several baseline runs pooled, rows that
vanish or change precision, partial saves marked incomplete, default rules, the 80-column view."""

from __future__ import annotations

import io

import numpy as np
import pytest

from infer_compare.base.records import OK, SKIPPED, LatencyStats, Report, RunRecord
from infer_compare.regress import check_regression, print_result

from .test_faults import _report

RULES = ["p50:+20%", "throughput:-20%"]


def _row(backend: str, fmt: str, p50_ms: float, cal_ms: float, seed: int) -> RunRecord:
    rng = np.random.default_rng(seed)
    samples = tuple(int(v) for v in p50_ms * 1e6 * rng.lognormal(0, 0.03, 400))
    return RunRecord(backend, fmt, "fp32", "cpu", 1, OK, exec_precision="fp32",
                     latency=LatencyStats.from_samples_ns(samples), throughput=1e9 / float(np.mean(samples)),
                     samples_ns=samples, threads=2,
                     extra={"calibration": {"ms": cal_ms, "workload": "calibration v1: test"}})


def run(machine: float = 1.0, runner: float = 1.0, seed: int = 0,
        rows: tuple[RunRecord, ...] | None = None) -> Report:
    """A run on a machine ``machine`` times slower than usual (everything, the calibration and the
    reference row included) whose ONNX Runtime runner is ``runner`` times slower (it alone)."""
    base = _report()
    rows = rows if rows is not None else (
        _row("pytorch", "pytorch", 2.0 * machine, 1.5 * machine, seed),
        _row("onnxruntime", "onnx", 1.0 * machine * runner, 1.5 * machine, seed + 1))
    return base.replace(rows=rows)


@pytest.mark.parametrize("timing", ["calibrated", "reference"])
def test_a_uniformly_slower_machine_is_no_regression(timing):
    res = check_regression(run(machine=1.5), run(seed=7), RULES, timing=timing)
    if timing == "reference":  # the reference row itself is judged as measured: only it is flagged
        assert {v.split(":")[0] for v in res.violations} == {"pytorch/pytorch/fp32/cpu/b1"}, res.summary()
    else:
        assert res.passed, res.summary()
    absolute = check_regression(run(machine=1.5), run(seed=7), RULES, timing="absolute")
    assert not absolute.passed and len(absolute.violations) == 4  # both rows, both rules
    lab = "onnxruntime/onnx/fp32/cpu/b1"
    c = next(c for c in res.checks if c.label == lab and c.rule.metric == "p50")
    assert c.calibrated and abs(c.change) < 0.02 and 0.45 < c.raw_change < 0.55  # the absolute change is kept


@pytest.mark.parametrize("timing", ["best", "calibrated", "reference", "absolute"])
def test_a_slower_runner_is_caught_in_every_timing(timing):
    res = check_regression(run(runner=1.4), run(seed=7), RULES, timing=timing)
    assert not res.passed
    broken = {(v.split(":")[0]) for v in res.violations}
    assert broken == {"onnxruntime/onnx/fp32/cpu/b1"}, res.summary()


def test_reference_timing_judges_the_reference_row_itself_as_measured():
    res = check_regression(run(), run(seed=7), RULES, timing="reference")
    assert res.timing == "reference"
    d = next(d for d in res.rows if d.label.startswith("pytorch"))
    assert not any(c.calibrated for c in d.checks)
    assert any("the reference row" in n for n in d.notes)
    o = next(d for d in res.rows if d.label.startswith("onnxruntime"))
    assert all(c.calibrated for c in o.checks if c.rule.metric in ("p50", "throughput"))


def _loaded(rep: Report, cores: float) -> Report:
    return rep.replace(rows=tuple(r.replace(extra={"calibration": {**r.extra["calibration"],
                                                                   "other_cores": cores, "steal_cores": 0.0}})
                                  for r in rep.rows))


def test_rows_measured_while_other_processes_ran_are_not_judged_on_timing():
    base = run(seed=7)
    res = check_regression(_loaded(run(runner=3.0), 1.0), base, [*RULES, "accuracy:-0.5"])
    assert res.passed and len(res.disturbed) == 2, res.summary()
    assert all(c.verdict != "disturbed" for c in res.checks if c.rule.metric == "accuracy")
    assert "other processes took 1.00 cores" in res.summary()
    assert not check_regression(_loaded(run(runner=3.0), 0.1), base, RULES).passed  # background noise: judged
    # a disturbed baseline run is left out of the pool; all of them disturbed: not judged
    res = check_regression(run(runner=1.4), [_loaded(run(runner=1.4, seed=3), 1.0), base], RULES)
    assert not res.passed
    assert check_regression(run(runner=1.4), [_loaded(base, 1.0)], RULES).disturbed


@pytest.mark.parametrize("timing", ["reference", "calibrated", "absolute"])
def test_the_most_favourable_pair_of_runs_is_judged(timing):
    """In the pairwise timings, a baseline run that happened to be 30 % slow (calibration unchanged: noise
    the workload did not see) widens the allowance: a current run 35 % slower than the fast one passes."""
    fast, slow = run(seed=7), run(runner=1.3, seed=8)
    cur = run(runner=1.35, seed=9)
    alone = check_regression(cur, fast, RULES, timing=timing)
    assert not alone.passed
    pooled = check_regression(cur, [fast, slow], RULES, timing=timing)
    assert pooled.passed, pooled.summary()
    c = next(c for c in pooled.checks if c.label.startswith("onnxruntime") and c.rule.metric == "p50")
    assert c.n_baselines == 2 and c.judged_change < 0.06 < c.change
    assert pooled.n_baselines == 2 and "one baseline run" not in " ".join(pooled.notes)
    assert any("one baseline run" in n for n in alone.notes)
    # and a real change still fails against the pool
    assert not check_regression(run(runner=1.7, seed=9), [fast, slow], RULES, timing=timing).passed


def test_baseline_directory_is_pooled(tmp_path):
    from infer_compare.cli import main

    for i, r in enumerate((run(seed=7), run(runner=1.3, seed=8))):
        (tmp_path / f"b{i}").mkdir()
        r.save(tmp_path / f"b{i}" / "results.json")
    run(runner=1.35, seed=9).save(tmp_path / "cur.json")
    assert main(["diff", str(tmp_path / "b0"), str(tmp_path / "b1"), str(tmp_path / "cur.json"), *sum(
        (["--fail-on", r] for r in RULES), []), "--timing", "absolute"]) == 0
    # a directory: every results.json below it (cur.json is not one)
    assert main(["diff", str(tmp_path), str(tmp_path / "cur.json"), "--fail-on", "p50:+20%", "--timing",
                 "absolute"]) == 0
    assert main(["diff", str(tmp_path / "b0"), str(tmp_path / "cur.json"), "--fail-on", "p50:+20%"]) == 1
    (tmp_path / "empty").mkdir()
    assert main(["diff", str(tmp_path / "empty"), str(tmp_path / "cur.json")]) == 2


def test_vanished_rows_and_precision_changes_fail_by_default():
    base = run(seed=7)
    ort = base.rows[1]
    gone = run(rows=(base.rows[0],))
    res = check_regression(gone, base, RULES)
    assert not res.passed and "missing from the current run" in res.violations[0]
    assert check_regression(gone, base, RULES, allow_missing=True).passed
    skipped = run(rows=(base.rows[0], ort.replace(status=SKIPPED, reason="onnxruntime is not installed",
                                                    latency=None, samples_ns=(), throughput=None)))
    res = check_regression(skipped, base, RULES)
    assert not res.passed and "now skipped (onnxruntime is not installed)" in res.violations[0]
    assert len(res.matched) == 1  # rows compared: measured in both
    other = run(rows=(base.rows[0], ort.replace(exec_precision="fp32: no integer kernel")))
    res = check_regression(other, base, [])
    assert res.violations == ("onnxruntime/onnx/fp32/cpu/b1: executed precision fp32 -> fp32: "
                              "no integer kernel",)


def test_default_rules_apply_when_none_are_given(capsys):
    from infer_compare.regress.rules import DEFAULT_RULES

    res = check_regression(run(runner=1.5), run(seed=7))
    assert res.default_rules and [str(r) for r in res.rules] == list(DEFAULT_RULES)
    assert not res.passed
    assert check_regression(run(runner=1.5), run(seed=7), []).passed  # explicitly no rule: status only


def test_partial_saves_are_incomplete_until_the_run_ends(cache_dir):
    from infer_compare import compare
    from infer_compare.measure.run import PARTIAL

    seen: list[Report] = []
    rep = compare("lenet5", backends=["onnxruntime"], formats=["onnx"], precisions=["fp32"], devices=["cpu"],
                  batch_sizes=[1, 2], threads=1, warmup_iters=1, min_iters=5, min_time_s=0.0, max_time_s=0.2,
                  cache_dir=cache_dir, on_row=seen.append)
    assert rep.complete and not rep.not_run
    assert seen and all(not r.complete and r.incomplete_reason == PARTIAL for r in seen)
    assert seen[0].not_run == ("onnxruntime/onnx/fp32/cpu/b2",)  # the first partial save lists what is left
    cal = rep.rows[0].extra["calibration"]
    assert cal["ms"] == cal["before_ms"] > 0 and cal["after_ms"] > 0 and cal["workload"]
    assert cal["other_cores"] >= 0 and cal["steal_cores"] >= 0
    with pytest.raises(Exception, match="a partial report"):
        check_regression(seen[0], rep, RULES)


def test_diff_reads_at_80_columns():
    from rich.console import Console

    def renamed(rep: Report) -> Report:
        return rep.replace(rows=tuple(r.replace(backend="onnxruntime-openvino",
                                                variant="user:a-long-name.onnx") for r in rep.rows))

    buf = io.StringIO()
    res = check_regression(renamed(run(runner=1.5)), renamed(run(seed=7)), RULES)
    print_result(res, console=Console(file=buf, width=80, force_terminal=False))
    text = buf.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "onnxruntime-openvino/onnx/fp32/cpu/b1/user:a-long-name.onnx" in text
    assert "2 rows compared" in text and "REGRESSION" in text


def test_a_reference_row_measured_under_load_is_not_divided_by():
    cur = run(seed=3)
    pt = cur.rows[0]
    pt = pt.replace(latency=LatencyStats.from_samples_ns(tuple(v * 100 for v in pt.samples_ns)),
                    samples_ns=tuple(v * 100 for v in pt.samples_ns),
                    extra={"calibration": {**pt.extra["calibration"], "other_cores": 1.0,
                                           "steal_cores": 0.0}})
    res = check_regression(cur.replace(rows=(pt, cur.rows[1])), run(seed=7), RULES, timing="reference")
    assert res.passed, res.summary()
    o = next(d for d in res.rows if d.label.startswith("onnxruntime"))
    assert not any(c.calibrated for c in o.checks) and any("absolute terms" in n for n in o.notes)


def test_a_baseline_of_another_model_or_selection_is_refused_before_measuring(tmp_path, capsys):
    """The main command with --baseline checks the baseline's model and rows against what it is asked to
    measure first: one line, exit 2, nothing measured, no results written."""
    from infer_compare.cli import main

    base = run()
    path = tmp_path / "base.json"
    base.save(path)
    model = base.model.name
    for args, words in ((["--model", "lenet5" if model != "lenet5" else "resnet18"], "is of model"),
                        (["--model", model, "--backends", "openvino"],
                         "measured none of the rows this run selects")):
        out = tmp_path / "out"
        assert main([*args, "-q", "-o", str(out), "--baseline", str(path), "--allow-environment-change"]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1, err
        assert not (out / "results.json").exists()
