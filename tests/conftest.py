"""Shared fixtures. LeNet-5 is the workhorse: its artifacts are built once per test
session in a private cache directory, so the tests never touch the user's cache."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The tests' real runs record the load beside each window but judge none disturbed: a test suite shares its
# machine with itself (and a developer's machine with more), and a disturbed row would turn an exit 0 into 3.
# The judgement itself is tested on simulated and real load (tests/test_windows.py, which sets it back on).
os.environ.setdefault("INFER_COMPARE_DISTURBED", "0")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cache")
    os.environ["INFER_COMPARE_CACHE"] = str(d)  # children and CLI subprocesses use it too
    return d


FAST = dict(warmup_iters=1, min_iters=5, min_time_s=0.05)
# one fleet job: LeNet-5's ONNX Runtime row at batch 1, one thread (tests/test_fleet*.py)
FLEET_KW = dict(backends=["onnxruntime"], devices=["cpu"], batch_sizes=[1], threads=1, **FAST)


def lenet_onnx_bundle(out: Path, cache_dir: Path) -> Path:
    """A bundle of LeNet-5's fp32 ONNX file at ``out`` (the fleet tests' workhorse)."""
    from infer_compare.bundle import export_bundle

    export_bundle("lenet5", out, formats=["onnx"], precisions=["fp32"], cache_dir=cache_dir)
    return out


def altered_copy(bundle: Path, out: Path) -> Path:
    """A copy of ``bundle`` (lenet_onnx_bundle's) at ``out`` with one bit of its ONNX file flipped."""
    import shutil

    shutil.copytree(bundle, out)
    onnx = out / "artifacts" / "onnx-fp32" / "model.onnx"
    body = bytearray(onnx.read_bytes())
    body[len(body) // 2] ^= 1
    onnx.write_bytes(bytes(body))
    return out


@pytest.fixture(scope="session")
def lenet_report(cache_dir):
    """One real LeNet-5 comparison on the CPU backends (export -> run -> parity)."""
    from infer_compare import compare

    return compare("lenet5", devices=["cpu"], batch_sizes=[1, 4], cache_dir=cache_dir,
                   formats=["pytorch", "onnx", "openvino"], parity_every_batch=True, **FAST)


def python_env() -> dict[str, str]:
    """Environment for subprocesses: the repo importable, the test cache, no colour."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "200"
    return env


PY = sys.executable
