"""ruff, with the project's settings (pyproject.toml), passes on everything the project ships: a lint
error is a test failure, not a surprise for the next reader."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_passes():
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if exe is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    res = subprocess.run([exe, "check", "--no-cache", "infer_compare", "tests",
                          "benchmarks", "scripts", "examples", "docs"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
