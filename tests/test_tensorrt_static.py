"""The TensorRT code cannot run here (no TensorRT on PyPI for these machines, no GPU):
it is type-checked with mypy against tensorrt-stubs, and its pure parts are tested.

CI: pip install mypy && pip install --no-deps tensorrt-stubs==10.13.0.35.1
(tensorrt-stubs declares a dependency on the real tensorrt wheel, which does not
install here; --no-deps takes the stubs alone). The stubs ship without a py.typed
marker and with a few syntax slips (parameters named ``in``, a required parameter
after defaulted ones), so the test copies them into a temporary MYPYPATH and repairs
those lines before running mypy with the [tool.mypy] settings of pyproject.toml.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from infer_compare.backends.tensorrt import common as trt_common
from infer_compare.backends.tensorrt import export as trt_exp

ROOT = Path(__file__).resolve().parents[1]


def _split_params(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


def repair_stub_line(line: str) -> str:
    m = re.match(r"^(\s*def \w+\()(.*)(\)\s*(->.*)?:\s*(\.\.\.)?\s*)$", line)
    if not m:
        return line
    seen_default = False
    fixed = []
    for p in _split_params(m.group(2)):
        q = re.sub(r"^(\s*)in:", r"\1in_:", p)
        name = q.split(":")[0].split("=")[0].strip()
        if "=" in q:
            seen_default = True
        elif seen_default and not name.startswith("*") and name != "/":
            q = q.rstrip() + " = ..."
        fixed.append(q)
    return m.group(1) + ",".join(fixed) + m.group(3)


def test_repair_stub_line():
    assert repair_stub_line("    def f(self, in: list[int], out: int) -> int: ...") == \
        "    def f(self, in_: list[int], out: int) -> int: ..."
    assert repair_stub_line("    def g(self, a: int = None, b: int) -> None:") == \
        "    def g(self, a: int = None, b: int = ...) -> None:"
    assert repair_stub_line("x = 1") == "x = 1"


def _stubs_dir() -> Path | None:
    try:
        dist = md.distribution("tensorrt-stubs")
    except md.PackageNotFoundError:
        return None
    init = next((f for f in dist.files or () if str(f).replace("\\", "/") == "tensorrt/__init__.pyi"), None)
    return Path(dist.locate_file(init)).parent.parent if init else None


@pytest.mark.slow
def test_mypy_on_the_tensorrt_code(tmp_path):
    site = _stubs_dir()
    if site is None:
        pytest.skip("tensorrt-stubs is not installed (pip install --no-deps tensorrt-stubs)")
    try:
        import mypy  # noqa: F401
    except ImportError:
        pytest.skip("mypy is not installed")
    stubs = tmp_path / "stubs"
    for pkg in ("tensorrt", "tensorrt_bindings"):
        shutil.copytree(site / pkg, stubs / pkg, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    for f in stubs.rglob("*.pyi"):
        f.write_text("\n".join(repair_stub_line(ln) for ln in f.read_text().split("\n")))
    env = {**os.environ, "MYPYPATH": str(stubs)}
    r = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                        "--cache-dir", str(tmp_path / "mypy-cache")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    # the stubs were really used: a wrong call into TensorRT must fail
    bad = tmp_path / "bad.py"
    bad.write_text("import tensorrt as trt\n\ndef f() -> None:\n    trt.Builder(trt.Logger()).no_such_method()\n")
    r = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                        "--cache-dir", str(tmp_path / "mypy-cache"), str(bad)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 and "no_such_method" in r.stdout


def test_probe_without_tensorrt_says_why():
    mod, why, _ = trt_exp.trt_status()
    if mod is not None:
        pytest.skip("TensorRT is installed here")
    assert why
    av = trt_exp.TensorRTExporter.probe()
    assert not av.available and av.reason and av.hint


def test_calibration_batches_and_profile():
    calib = np.random.default_rng(0).random((40, 3, 8, 8), dtype=np.float32)
    b = trt_exp.calibration_batches(calib, 16)
    assert [x.shape[0] for x in b] == [16, 16]
    assert b[0].flags.c_contiguous and b[0].dtype == np.float32
    assert [x.shape[0] for x in trt_exp.calibration_batches(calib[:5], 16)] == [5]
    assert trt_exp.profile_shapes((3, 224, 224), 256, 1024) == ((1, 3, 224, 224), (256, 3, 224, 224),
                                                                 (256, 3, 224, 224))
    assert trt_exp.profile_shapes((1, 32, 32), 8, 4)[1] == (4, 1, 32, 32)


def test_cache_key_names_tensorrt_version_and_gpu(monkeypatch):
    from infer_compare.backends.exporter import ExportContext

    monkeypatch.setattr(trt_exp, "trt_status", lambda: (object(), "", "10.13.0"))
    monkeypatch.setattr(trt_exp, "first_gpu", lambda: {"name": "NVIDIA H200", "compute_capability": "9.0"})
    ctx = ExportContext(model=None, model_name="m", input_shape=(3, 8, 8), num_classes=2,
                        calibration=np.zeros((4, 3, 8, 8), np.float32), max_batch=256)
    e = trt_exp.TensorRTExporter.cache_extras(ctx, "int8")
    assert e["tensorrt"] == "10.13.0" and e["gpu"] == "NVIDIA H200" and e["compute_capability"] == "9.0"
    assert e["max_batch"] == 256 and e["calibration_n"] == 4
    assert trt_exp.TensorRTExporter.cache_extras(ctx, "fp16") != e
    from infer_compare.backends.tensorrt.options import TensorRTOptions

    ctx.options = TensorRTOptions(workspace_mib=1024)  # the builder options reach the cache key
    assert trt_exp.TensorRTExporter.cache_extras(ctx, "int8")["workspace_mib"] == 1024
    ctx.cache_root = "/x"
    p = trt_exp._timing_cache_path(ctx, "10.13.0")
    assert str(p).startswith("/x/tensorrt-timing/") and "H200" in p.name and "10.13.0" in p.name


def test_version_parse():
    assert trt_common.parse_version("8.6.1.6") == (8, 6)
    assert trt_common.parse_version("10.13.0.35") == (10, 13)
    assert trt_common.parse_version("") == (0, 0)
