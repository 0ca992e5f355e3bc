"""`infer-compare --help` and `infer-compare env` work with only the core installed:
a fresh virtual environment with the package and its core dependencies (pydantic among them), no
torch, no runtime; `report` reads and checks a results file there. Needs pip to reach PyPI (as CI does);
skipped offline."""

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_help_and_env_in_bare_venv(tmp_path):
    vdir = tmp_path / "bare"
    venv.EnvBuilder(with_pip=True).create(vdir)
    py = vdir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    p = subprocess.run([py, "-m", "pip", "install", "-q", str(ROOT)], capture_output=True, text=True, env=env,
                       timeout=600, cwd=tmp_path)
    if p.returncode != 0 and ("Could not find a version" in p.stderr or "NewConnectionError" in p.stderr):
        pytest.skip(f"PyPI not reachable: {p.stderr.strip().splitlines()[-1]}")
    assert p.returncode == 0, p.stderr
    exe = vdir / "bin" / "infer-compare"
    h = subprocess.run([exe, "--help"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert h.returncode == 0 and "--model" in h.stdout, h.stderr
    e = subprocess.run([exe, "env", "--json"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert e.returncode == 0, e.stderr
    d = json.loads(e.stdout)
    rows = {(r["backend"], r["device"]): r for r in d["backends"]}
    assert not rows[("pytorch", "cpu")]["available"] and "pip install" in rows[("pytorch", "cpu")]["hint"]
    assert not rows[("onnxruntime", "cpu")]["available"]
    assert rows[("null", "cpu")]["available"]
    mods = subprocess.run([py, "-c", "import importlib.util as u; print(u.find_spec('torch') is None)"],
                          capture_output=True, text=True, env=env)
    assert mods.stdout.strip() == "True"  # really bare
    # a model run without torch fails cleanly with the install hint, not a traceback
    r = subprocess.run([exe, "--model", "lenet5", "-o", str(tmp_path / "o")], capture_output=True, text=True,
                       env=env, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "pip install" in r.stderr, r.stderr
    # results files are read and checked with the core alone (the schema library is a core dependency)
    res = ROOT / "reports" / "cpu-lenet5" / "results.json"
    md = subprocess.run([exe, "report", str(res), "--format", "md"], capture_output=True, text=True, env=env,
                        cwd=tmp_path)
    assert md.returncode == 0 and "| onnxruntime |" in md.stdout, md.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(res.read_text().replace('"status": "ok"', '"status": "great"', 1))
    b = subprocess.run([exe, "report", str(bad)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert b.returncode == 2 and "Traceback" not in b.stderr and "status" in b.stderr, b.stderr
    assert sys.version_info >= (3, 10)
