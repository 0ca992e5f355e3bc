"""A crash or a hang in a backend becomes a failed row; the comparison goes on."""

import time

import numpy as np

from infer_compare.isolate import run_cell

from .conftest import python_env


def _spec(tmp_path, runner):
    np.save(tmp_path / "in.npy", np.zeros((4, 1, 32, 32), np.float32))
    return {"runner": f"tests.fake_runners:{runner}", "artifact": "none", "device": "cpu",
            "options": {"batch_size": 2}, "inputs": str(tmp_path / "in.npy"),
            "loop": {"warmup_iters": 1, "min_iters": 3, "min_time_s": 0.0}}


def test_native_crash_becomes_failed_row(tmp_path):
    res = run_cell(_spec(tmp_path, "CrashRunner"), 60, tmp_path, "crash", env=python_env())
    assert res["ok"] is False and res["status"] == "run_failed"
    assert "SIGSEGV" in res["error"]


def test_hang_is_killed_at_timeout(tmp_path):
    t0 = time.perf_counter()
    res = run_cell(_spec(tmp_path, "HangRunner"), 3, tmp_path, "hang", env=python_env())
    assert time.perf_counter() - t0 < 30
    assert res["ok"] is False and res["status"] == "run_failed"
    assert "timed out after 3 s" in res["error"]


def test_python_error_and_missing_backend(tmp_path):
    res = run_cell(_spec(tmp_path, "RaiseRunner"), 60, tmp_path, "raise", env=python_env())
    assert res["status"] == "run_failed" and "engine deserialisation failed" in res["error"]
    assert res["error"].startswith("load:")
    res = run_cell(_spec(tmp_path, "MissingRunner"), 60, tmp_path, "missing", env=python_env())
    assert res["status"] == "skipped" and res["hint"] == "pip install foo"


def test_null_runner_measures(tmp_path):
    spec = _spec(tmp_path, "X")
    spec["runner"] = "null"
    res = run_cell(spec, 60, tmp_path, "null", env=python_env())
    assert res["ok"] and len(res["samples_ns"]) >= 3 and res["peak_rss_mb"] > 0
    assert res["exec_precision"] == "none"


def test_child_peak_rss_is_its_own(tmp_path):
    """The child's peak RSS must not include what the parent held when it forked (ru_maxrss does, on Linux)."""
    big = np.ones(400 * 2**20 // 8)  # 400 MiB held by the parent
    spec = _spec(tmp_path, "X")
    spec["runner"] = "null"
    res = run_cell(spec, 60, tmp_path, "null", env=python_env())
    assert big.sum() > 0
    assert 1 < res["peak_rss_mb"] < 300, res["peak_rss_mb"]


def test_compare_survives_a_crashing_backend(cache_dir, monkeypatch):
    """The crash happens inside compare(): the row fails, the other rows are measured."""
    from infer_compare import compare, formats

    monkeypatch.setitem(formats.RUNNERS, "onnxruntime", formats.RunnerInfo(
        "onnxruntime", "crashing stand-in", "tests.fake_runners:CrashRunner", ("cpu",), formats=("onnx",)))
    monkeypatch.setenv("PYTHONPATH", python_env()["PYTHONPATH"])
    rep = compare("lenet5", devices=["cpu"], formats=["pytorch", "onnx"], batch_sizes=[1], cache_dir=cache_dir,
                  warmup_iters=1, min_iters=3, min_time_s=0.0)
    by = {r.backend: r for r in rep.rows if r.batch_size is not None}
    assert by["onnxruntime"].status == "run_failed" and "SIGSEGV" in by["onnxruntime"].reason
    assert by["pytorch"].status == "ok"
