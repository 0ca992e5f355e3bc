"""Static checks of the TensorRT code, which cannot run here (no TensorRT wheel reaches
these machines, no GPU):

1. Every TensorRT name the code uses exists in TensorRT 11: the names are collected
   with ast from infer_compare/backends/tensorrt/*.py (every attribute of ``trt.``,
   every ``hasattr``/``getattr`` name on it, and every other attribute whose name is
   part of TensorRT 10's Python API according to tensorrt-stubs), and looked up in the
   names compiled into ``tensorrt_bindings/tensorrt.so`` of the
   ``tensorrt-cu13-bindings==11.4.0.106`` wheel. The wheel (1.3 MB) is downloaded with
   pip into a cache outside the repository ($INFER_COMPARE_TEST_CACHE, default
   ~/.cache/infer-compare-tests) and reused; offline, the test skips and says why.
   pybind11 passes each bound name to the linker as a NUL-terminated literal and the
   linker merges string tails, so a name is present when ``name\\0`` occurs in the .so.
2. mypy against tensorrt-stubs 10.13 (the 10.x API), cuda.bindings code included.
   CI: pip install mypy && pip install --no-deps tensorrt-stubs==10.13.0.35.1
   (tensorrt-stubs declares a dependency on the real tensorrt wheel, which does not
   install here). The stubs ship without a py.typed marker and with a few syntax slips
   (parameters named ``in``, a required parameter after defaulted ones), so the test
   copies them into a temporary MYPYPATH and repairs those lines.
3. Every ``cuda.bindings.runtime`` function the runner calls exists in the installed
   cuda-python, and without a GPU driver they fail with a one-line CUDA error.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRT_PKG = ROOT / "infer_compare" / "backends" / "tensorrt"
WHEEL_REQ = "tensorrt-cu13-bindings==11.4.0.106"
# names TensorRT 11 still binds but must not be used here: precision comes from the ONNX file
FORBIDDEN = {("BuilderFlag", f) for f in ("FP16", "INT8", "BF16", "FP8", "INT4", "FP4")}


# ---------------------------------------------------------------- 1. names in TensorRT 11
def _cache_dir() -> Path:
    base = os.environ.get("INFER_COMPARE_TEST_CACHE") or str(Path.home() / ".cache" / "infer-compare-tests")
    return Path(base) / "wheels"


@pytest.fixture(scope="session")
def trt11_wheel() -> Path:
    d = _cache_dir()
    name, _, ver = WHEEL_REQ.partition("==")
    found = sorted(d.glob(f"{name.replace('-', '_')}-{ver}-*.whl"))
    if found:
        return found[0]
    d.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
           "3.12", "--platform", "manylinux_2_28_x86_64", "--dest", str(d), WHEEL_REQ]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot download {WHEEL_REQ}: {e}")
    found = sorted(d.glob(f"{name.replace('-', '_')}-{ver}-*.whl"))
    if r.returncode != 0 or not found:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no wheel"]
        pytest.skip(f"cannot download {WHEEL_REQ} (offline?): {tail[0]}")
    return found[0]


class BoundNames:
    """The names a TensorRT bindings wheel defines: the literals of its extension module
    and the top-level names of its ``tensorrt_bindings/__init__.py`` (``__version__``...)."""

    def __init__(self, wheel: Path):
        with zipfile.ZipFile(wheel) as z:
            self.so = z.read("tensorrt_bindings/tensorrt.so")
            init = ast.parse(z.read("tensorrt_bindings/__init__.py").decode("utf-8", "replace"))
        self.py = {n.name for n in init.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        self.py |= {t.id for n in init.body if isinstance(n, ast.Assign) for t in n.targets
                    if isinstance(t, ast.Name)}

    def has(self, name: str) -> bool:
        return name in self.py or (name.encode() + b"\0") in self.so


@pytest.fixture(scope="session")
def trt11(trt11_wheel: Path) -> BoundNames:
    return BoundNames(trt11_wheel)


def _stubs_dir() -> Path | None:
    try:
        dist = md.distribution("tensorrt-stubs")
    except md.PackageNotFoundError:
        return None
    init = next((f for f in dist.files or () if str(f).replace("\\", "/") == "tensorrt/__init__.pyi"), None)
    return Path(dist.locate_file(init)).parent.parent if init else None


def stub_api_names(site: Path) -> set[str]:
    """Every class, function, method, attribute and enum member named in tensorrt-stubs."""
    out: set[str] = set()
    for f in (site / "tensorrt_bindings" / "tensorrt.pyi", site / "tensorrt" / "__init__.pyi"):
        text = "\n".join(repair_stub_line(ln) for ln in f.read_text().split("\n"))  # the stubs' syntax slips
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                out.add(node.name)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                out.add(node.target.id)
            elif isinstance(node, ast.Assign):
                out.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return out


@pytest.fixture(scope="session")
def trt10_api() -> set[str]:
    site = _stubs_dir()
    if site is None:
        pytest.skip("tensorrt-stubs is not installed (scripts/setup.sh --dev; pip install --no-deps "
                    "tensorrt-stubs)")
    return stub_api_names(site)


def _root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


# attributes of our own objects, never TensorRT's (e.g. ``self.options.precision``: ILayer.precision
# of TensorRT 10 is gone in 11, RunOptions.precision is ours)
OWN = {"options", "meter", "cuda", "events", "profile", "settings", "notes", "h_in", "h_out", "layer_summary",
       "np", "os", "re", "json", "ctypes", "time", "Path", "deps", "rt", "cudart", "ctx", "o", "e", "p", "f"}


def used_tensorrt_names(source: str, api: set[str]) -> set[tuple[str, str]]:
    """(owner, name) pairs of the TensorRT names ``source`` uses: every attribute of a
    ``trt.`` chain and every ``hasattr``/``getattr`` name on one (owner: the attribute it is
    taken from, or ''), and, in a module that imports tensorrt, every other attribute named
    in TensorRT 10's API (``api``) unless it is taken from one of our own objects (OWN)."""
    tree = ast.parse(source)
    imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names if a.name == "tensorrt"}
    aliases = {"trt"} | imported
    api = api if imported else set()
    out: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            base = node.value
            owner = (base.attr if isinstance(base, ast.Attribute)
                     else base.id if isinstance(base, ast.Name) else "")
            if _root(node) in aliases or (node.attr in api and owner not in OWN):
                out.add((owner if _root(node) in aliases and owner not in aliases else "", node.attr))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("hasattr", "getattr")
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str)):
            if _root(node.args[0]) in aliases or node.args[1].value in api:
                out.add(("", node.args[1].value))
    return out


def _package_names(api: set[str]) -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for f in sorted(TRT_PKG.glob("*.py")):
        for key in used_tensorrt_names(f.read_text(), api):
            found.setdefault(key, []).append(f.name)
    return found


def test_every_tensorrt_name_the_code_uses_exists_in_tensorrt_11(trt11, trt10_api):
    used = _package_names(trt10_api)
    assert len(used) > 30, f"the collector found too few TensorRT names: {sorted(used)}"
    missing = sorted(f"{o + '.' if o else ''}{n} ({', '.join(fs)})" for (o, n), fs in used.items()
                     if not trt11.has(n))
    assert not missing, "not in TensorRT 11.4's bindings: " + "; ".join(missing)
    forbidden = sorted(f"{o}.{n}" for (o, n) in used if (o, n) in FORBIDDEN)
    assert not forbidden, f"precision comes from the ONNX file, not builder flags: {forbidden}"


def test_the_name_check_catches_names_removed_in_tensorrt_11(trt11, trt10_api):
    """The check can fail: the TensorRT 10 idioms the code used before are caught."""
    old = ("import tensorrt as trt\n"
           "flags = 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)\n"
           "class C(trt.IInt8EntropyCalibrator2): pass\n"
           "ok = builder.platform_has_fast_fp16\n"
           "config.int8_calibrator = C()\n"
           "config.set_calibration_profile(p)\n"
           "mib = engine.device_memory_size\n"
           "config.set_flag(trt.BuilderFlag.FP16)\n")
    used = used_tensorrt_names(old, trt10_api)
    gone = {n for _, n in used if not trt11.has(n)}
    assert gone >= {"EXPLICIT_BATCH", "IInt8EntropyCalibrator2", "platform_has_fast_fp16", "int8_calibrator",
                    "set_calibration_profile", "device_memory_size"}, gone
    assert ("BuilderFlag", "FP16") in used & FORBIDDEN  # still bound in 11 as a name, refused here
    assert trt11.has("TF32") and trt11.has("STRONGLY_TYPED") and trt11.has("__version__")


# ---------------------------------------------------------------- 2. mypy against the 10.x stubs
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


def _mypy(cache: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(cache), *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


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
    r = _mypy(tmp_path / "mypy-cache", env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    # the stubs type our own TensorRT objects: a wrong call in the runner and the exporter must fail
    shadows = []
    for name, good, bad in (("run.py", "execute_async_v3(", "execute_async_v9("),
                            ("export.py", "config.set_memory_pool_limit(", "config.set_memory_pool_limitx("),
                            # the several-input/output binding (issue 25): every tensor by name
                            ("bindings.py", "context.set_tensor_address(", "context.set_tensor_addressx(")):
        text = (TRT_PKG / name).read_text()
        assert good in text
        shadow = tmp_path / f"shadow_{name}"
        shadow.write_text(text.replace(good, bad))
        shadows += ["--shadow-file", str(TRT_PKG / name), str(shadow)]
    r = _mypy(tmp_path / "mypy-cache-shadow", env, *shadows)  # own cache: mypy would reuse the clean run
    assert r.returncode != 0 and "execute_async_v9" in r.stdout and \
        "set_memory_pool_limitx" in r.stdout, r.stdout
    assert "set_tensor_addressx" in r.stdout, r.stdout


# ---------------------------------------------------------------- 3. cuda.bindings
def _cudart():
    try:
        from infer_compare.backends.tensorrt.device import import_cudart

        return import_cudart()
    except ImportError as e:
        pytest.skip(f"cuda-python (cuda.bindings) is not installed: {e}")


def test_every_cuda_runtime_call_exists_in_cuda_bindings():
    rt = _cudart()
    used = set()
    for f in TRT_PKG.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("cuda") and \
                    (_root(node) in ("rt", "cudart") or (isinstance(node.value, ast.Attribute)
                                                          and node.value.attr == "rt")):
                used.add(node.attr)
    assert {"cudaMalloc", "cudaMallocHost", "cudaMemcpyAsync", "cudaStreamCreate", "cudaEventCreate",
            "cudaEventRecord", "cudaEventElapsedTime"} <= used, used
    assert not [n for n in used if not hasattr(rt, n)], [n for n in used if not hasattr(rt, n)]


def test_cuda_calls_without_a_driver_fail_with_one_line():
    from infer_compare.backends.tensorrt.device import CudaBuffers
    from infer_compare.base.errors import RunnerError

    rt = _cudart()
    err, count = rt.cudaGetDeviceCount()
    if int(err) == 0 and count:
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(RunnerError, match=r"^CUDA cudaSetDevice failed: cudaError\w+$"):
        CudaBuffers(rt, 0)


# ---------------------------------------------------------------- probes, versions, cache keys
def test_probe_without_tensorrt_says_why():
    from infer_compare.backends.tensorrt import export as trt_exp

    mod, why, _ = trt_exp.trt_status()
    if mod is not None:
        pytest.skip("TensorRT is installed here")
    assert why
    av = trt_exp.TensorRTExporter.probe()
    assert not av.available and av.reason and av.hint


def test_versions_below_10_are_refused(monkeypatch):
    import types

    from infer_compare.backends.tensorrt import common

    fake = types.SimpleNamespace(__version__="8.6.1.6", Builder=object)
    monkeypatch.setattr(common.deps, "has", lambda m: True)
    monkeypatch.setitem(sys.modules, "tensorrt", fake)
    mod, why, v = common.trt_status()
    assert mod is None and v == "8.6.1.6" and "too old" in why and ">= 10.0" in why
    assert common.parse_version("10.13.0.35") == (10, 13) and common.parse_version("") == (0, 0)


def test_int8_engine_refuses_an_asymmetric_uint8_qdq_file(tmp_path):
    """ONNX Runtime's default U8S8 QDQ file is refused before any TensorRT work, with the flag to use."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from infer_compare.backends.tensorrt import export as trt_exp
    from infer_compare.base.errors import ExportError

    def qdq(zp_type, path):
        nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                 helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])]
        inits = [helper.make_tensor("s", TensorProto.FLOAT, [], [0.1]),
                 helper.make_tensor("z", zp_type, [], [0])]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
        return str(path)

    with pytest.raises(ExportError, match="S8S8"):
        trt_exp.check_symmetric_int8(qdq(TensorProto.UINT8, tmp_path / "u8.onnx"))
    trt_exp.check_symmetric_int8(qdq(TensorProto.INT8, tmp_path / "s8.onnx"))  # symmetric int8: accepted
