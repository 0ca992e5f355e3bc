"""A crash or a hang in a backend becomes a failed row; the comparison goes on; one
process measures a configuration's batch sizes in turn, and a crash in one batch size
loses nothing measured before it (a fresh process takes the rest); the parent re-reads the
child's result file only when it changed."""

import json
import time

import numpy as np

from infer_compare.measure.bench import LoopSettings
from infer_compare.measure.cells import CellResult, CellSpec
from infer_compare.measure.isolate import run_cell

from .conftest import python_env


def _spec(tmp_path, runner, batches=(2,)):
    np.save(tmp_path / "in.npy", np.zeros((4, 1, 32, 32), np.float32))
    return CellSpec(runner=runner if ":" in runner or runner == "null" else f"tests.fake_runners:{runner}",
                    artifact="none", batch_sizes=tuple(batches), inputs=str(tmp_path / "in.npy"),
                    loop=LoopSettings(warmup_iters=1, min_iters=3, min_time_s=0.0))


def test_native_crash_becomes_failed_row(tmp_path):
    [res] = run_cell(_spec(tmp_path, "CrashRunner"), 60, tmp_path, "crash", env=python_env())
    assert res.ok is False and res.status == "run_failed"
    assert "SIGSEGV" in res.error


def test_hang_is_killed_at_timeout(tmp_path):
    t0 = time.perf_counter()
    [res] = run_cell(_spec(tmp_path, "HangRunner"), 3, tmp_path, "hang", env=python_env())
    assert time.perf_counter() - t0 < 30
    assert res.ok is False and res.status == "run_failed"
    assert "timed out after 3 s" in res.error


def test_python_error_and_missing_backend(tmp_path):
    [res] = run_cell(_spec(tmp_path, "RaiseRunner"), 60, tmp_path, "raise", env=python_env())
    assert res.status == "run_failed" and "engine deserialisation failed" in res.error
    assert res.error.startswith("load:")
    [res] = run_cell(_spec(tmp_path, "MissingRunner"), 60, tmp_path, "missing", env=python_env())
    assert res.status == "skipped" and res.hint == "pip install foo"


def test_null_runner_measures(tmp_path):
    [res] = run_cell(_spec(tmp_path, "null"), 60, tmp_path, "null", env=python_env())
    assert res.ok and len(res.samples_ns) >= 3 and res.peak_rss_mb > 0
    assert res.exec_precision == "none"


def test_one_process_measures_every_batch_size_in_turn(tmp_path):
    res = run_cell(_spec(tmp_path, "null", batches=(1, 2, 4)), 60, tmp_path, "multi", env=python_env())
    assert [r.batch_size for r in res] == [1, 2, 4]
    assert all(r.ok and r.process == 1 for r in res)


def test_crash_in_one_batch_size_keeps_the_others(tmp_path):
    """CrashAtBatch4 dies at batch 4: batches 1 and 2 (before) and 8 (after, in a fresh process) are
    measured."""
    res = run_cell(_spec(tmp_path, "CrashAtBatch4", batches=(1, 2, 4, 8)), 60, tmp_path, "b4",
                   env=python_env())
    by = {r.batch_size: r for r in res}
    assert [r.batch_size for r in res] == [1, 2, 4, 8]
    assert by[1].ok and by[2].ok and by[1].process == by[2].process == 1
    assert not by[4].ok and "SIGSEGV" in by[4].error
    assert by[8].ok and by[8].process == 2


def test_cell_records_round_trip():
    spec = CellSpec(runner="null", artifact="a", batch_sizes=(1, 8), runner_options={"num_outputs": 3},
                    loop=LoopSettings(warmup_iters=4))
    assert CellSpec.from_dict(spec.to_dict()) == spec
    res = CellResult(batch_size=8, ok=True, samples_ns=(1, 2, 3), settings={"x": 1}, notes=("n",))
    assert CellResult.from_dict(res.to_dict()) == res


def test_child_peak_rss_is_its_own(tmp_path):
    """The child's peak RSS must not include what the parent held when it forked (ru_maxrss does, on
    Linux)."""
    big = np.ones(400 * 2**20 // 8)  # 400 MiB held by the parent
    [res] = run_cell(_spec(tmp_path, "null"), 60, tmp_path, "null", env=python_env())
    assert big.sum() > 0
    assert 1 < res.peak_rss_mb < 300, res.peak_rss_mb


def test_compare_survives_a_crashing_backend(cache_dir, monkeypatch):
    """The crash happens inside compare(): the row fails, the other rows are measured."""
    from infer_compare import compare
    from infer_compare.catalog import formats

    monkeypatch.setitem(formats.RUNNERS, "onnxruntime", formats.RunnerInfo(
        "onnxruntime", "crashing stand-in", "tests.fake_runners:CrashRunner", ("cpu",), formats=("onnx",)))
    monkeypatch.setenv("PYTHONPATH", python_env()["PYTHONPATH"])
    rep = compare("lenet5", devices=["cpu"], formats=["pytorch", "onnx"], batch_sizes=[1],
                  cache_dir=cache_dir, warmup_iters=1, min_iters=3, min_time_s=0.0)
    by = {r.backend: r for r in rep.rows if r.batch_size is not None}
    assert by["onnxruntime"].status == "run_failed" and "SIGSEGV" in by["onnxruntime"].reason
    assert by["pytorch"].status == "ok"


# ------------------------------------------------------------------------------ the parent's poll
def test_the_parent_parses_the_result_file_only_when_it_changed(tmp_path, monkeypatch):
    from infer_compare.measure import isolate

    parses = []
    real = isolate._read_results
    monkeypatch.setattr(isolate, "_read_results", lambda p, *a: parses.append(p) or real(p, *a))
    path = tmp_path / "r.jsonl"
    prog = isolate._Progress(path)
    assert prog.count() == 0 and parses == []  # no file yet
    path.write_text(json.dumps(CellResult(batch_size=1, ok=True, samples_ns=(1, 2, 3)).to_dict()) + "\n")
    assert [prog.count() for _ in range(5)] == [1] * 5 and len(parses) == 1
    with open(path, "a") as f:
        f.write(json.dumps(CellResult(batch_size=2, ok=True, samples_ns=(4,)).to_dict()) + "\n")
    assert prog.count() == 2 and prog.count() == 2 and len(parses) == 2
