"""Bundles: export here (with torch), run there (without): the manifest, the torch-free
run in a second virtual environment that reproduces the parity figures, and the
refusal of tampered bundles (changed byte, '../' path, absolute path, symlink out,
unknown format, unlisted file, pickled array)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

import numpy as np
import pytest

from infer_compare.base.errors import UsageError
from infer_compare.base.records import OK, SKIPPED, load_report
from infer_compare.bundle import BundleError, export_bundle, run_bundle, sha256_file, verify

from .conftest import FAST, PY, ROOT, python_env

LOOP = ["--warmup", "1", "--min-iters", "5", "--min-time", "0.05", "-b", "1,4"]


@pytest.fixture(scope="module")
def bundle(cache_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundles") / "lenet5"
    export_bundle("lenet5", out, formats=["pytorch", "onnx", "tensorrt"], precisions=["fp32", "int8"],
                  cache_dir=cache_dir)
    return out


@pytest.fixture(scope="module")
def main_run(bundle, cache_dir):
    """The bundle measured in the main environment (torch present)."""
    return run_bundle(bundle, batch_sizes=[1, 4], devices=["cpu"], cache_dir=cache_dir, **FAST)


def _copy(bundle: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(bundle, dst)
    return dst


def _rewrite(b: Path, edit) -> None:
    m = json.loads((b / "manifest.json").read_text())
    edit(m)
    (b / "manifest.json").write_text(json.dumps(m))


def _parity(rep, backend="onnxruntime"):
    return {r.label: r.parity for r in rep.rows if r.backend == backend and r.status == OK}


# ------------------------------------------------------------------------- manifest


def test_manifest_lists_every_file_with_its_hash(bundle):
    m = json.loads((bundle / "manifest.json").read_text())
    on_disk = {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()} - {"manifest.json"}
    assert set(m["files"]) == on_disk
    for rel, meta in m["files"].items():
        assert meta["sha256"] == sha256_file(bundle / rel) and meta["size"] == (bundle / rel).stat().st_size
    assert m["model"]["name"] == "lenet5" and len(m["model"]["weights_hash"]) >= 16
    assert m["input"]["shape"] == [1, 32, 32] and m["input"]["preprocessing"]["kind"] == "digits"
    assert {(a["format"], a["precision"]) for a in m["artifacts"]} == {
        ("pytorch", "fp32"), ("onnx", "fp32"), ("onnx", "int8"), ("onnx", "int8-s8s8")}
    # TensorRT travels as its ONNX source (fp32 for fp32, the QDQ file for int8), with a note
    deferred = {(d["format"], d["precision"]): d for d in m["deferred"]}
    assert set(deferred) == {("tensorrt", "fp32"), ("tensorrt", "int8")}
    assert deferred[("tensorrt", "fp32")]["source"] == ["onnx", "fp32"]
    assert deferred[("tensorrt", "int8")]["source"] == ["onnx", "int8-s8s8"]  # TensorRT's symmetric int8 file
    assert all("GPU" in d["note"] for d in deferred.values())
    # no calibration data: every int8 artifact (TensorRT int8 from the QDQ file) is quantized already
    assert set(m["data"]) == {"description", "eval", "reference", "labels"}
    assert not (bundle / "data" / "calibration.npy").exists()
    assert m["data"]["eval"]["shape"] == [450, 1, 32, 32] and m["data"]["reference"]["shape"] == [450, 10]
    libs = m["export_environment"]["libraries"]
    assert "torch" in libs and "onnx" in libs and m["tool_version"]
    onnx = next(a for a in m["artifacts"] if a["format"] == "onnx")
    assert onnx["export"]["options"]["dynamic_batch"] is True
    assert verify(bundle).n_files == len(m["files"])


def test_export_refuses_a_non_empty_directory(tmp_path, cache_dir):
    (tmp_path / "x").write_text("")
    with pytest.raises(UsageError, match="not empty"):
        export_bundle("lenet5", tmp_path, formats=["onnx"], cache_dir=cache_dir)


# ------------------------------------------------------------------------------ run


def test_run_in_the_main_environment(main_run):
    rows = {r.label: r for r in main_run.rows}
    for b in (1, 4):
        ort = rows[f"onnxruntime/onnx/fp32/cpu/b{b}"]
        assert ort.status == OK, ort.reason
        # every input at the largest batch, a subset at the other
        assert ort.parity.n == (450 if b == 4 else 8)
        assert ort.parity.accuracy > 0.95 and ort.parity.max_abs < 1e-4
        pt = rows[f"pytorch/pytorch/fp32/cpu/b{b}"]
        assert pt.status == OK and pt.parity.max_abs < 1e-4  # the shipped weights reproduce the reference
    assert any("verified (sha256)" in n for n in main_run.notes)
    assert any(n.startswith("tensorrt fp32:") for n in main_run.notes)


@pytest.mark.slow
def test_torch_free_venv_reproduces_the_parity_figures(bundle, main_run, tmp_path):
    """A second virtual environment with only the core and onnxruntime (no torch, no converter)."""
    vdir = tmp_path / "device-venv"
    venv.EnvBuilder(with_pip=True).create(vdir)
    py = vdir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["NO_COLOR"] = "1"
    p = subprocess.run([py, "-m", "pip", "install", "-q", "--no-cache-dir", f"{ROOT}[onnxruntime]"],
                       capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path)
    if p.returncode != 0 and ("Could not find a version" in p.stderr or "NewConnectionError" in p.stderr):
        pytest.skip(f"PyPI not reachable: {p.stderr.strip().splitlines()[-1]}")
    assert p.returncode == 0, p.stderr
    probe = subprocess.run([py, "-c", "import importlib.util as u; "
                                      "print([m for m in ('torch', 'torchvision', 'onnx', 'openvino', "
                                      "'tensorflow', 'onnx2tf') if u.find_spec(m)])"],
                           capture_output=True, text=True, env=env)
    assert probe.stdout.strip() == "[]", probe.stdout  # really torch-free and converter-free
    out = tmp_path / "results"
    r = subprocess.run([vdir / "bin" / "infer-compare", "run", str(bundle), "-o", str(out), "--device", "cpu",
                        *LOOP], capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    rep = load_report(out / "results.json")
    for f in ("results.md", "results.json"):
        assert (out / f).is_file()
    dev, ref = _parity(rep), _parity(main_run)
    assert set(dev) == set(ref) == {"onnxruntime/onnx/fp32/cpu/b1", "onnxruntime/onnx/fp32/cpu/b4",
                                    "onnxruntime/onnx/int8/cpu/b1", "onnxruntime/onnx/int8/cpu/b4"}
    for lab in ref:
        a, b = dev[lab], ref[lab]
        assert a.n == b.n and a.n == (450 if lab.endswith("b4") else 8)
        assert a.accuracy == b.accuracy and a.reference_accuracy == b.reference_accuracy
        assert a.top1_agreement == b.top1_agreement
        assert abs(a.max_abs - b.max_abs) < 1e-5 and abs(a.cosine_mean - b.cosine_mean) < 1e-7
    pt = [x for x in rep.rows if x.backend == "pytorch" and x.device == "cpu"]
    assert pt and all(x.status == SKIPPED and "torch" in x.reason.lower() for x in pt), [x.reason for x in pt]
    assert "torch" not in rep.environment.libraries


# ------------------------------------------------------------------------- tampering


def _refused(b: Path, match: str):
    with pytest.raises(BundleError, match=match):
        verify(b)
    r = subprocess.run([PY, "-m", "infer_compare.cli", "run", str(b), "--verify-only"], capture_output=True,
                       text=True, env=python_env())
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_changed_artifact_byte_is_refused(bundle, tmp_path):
    b = _copy(bundle, tmp_path)
    onnx = b / "artifacts/onnx-fp32/model.onnx"
    data = bytearray(onnx.read_bytes())
    data[len(data) // 2] ^= 0x01
    onnx.write_bytes(bytes(data))
    _refused(b, "sha256 of artifacts/onnx-fp32/model.onnx does not match")


def test_dotdot_and_absolute_paths_are_refused(bundle, tmp_path):
    b = _copy(bundle, tmp_path)
    outside = tmp_path / "outside.onnx"
    shutil.copyfile(b / "artifacts/onnx-fp32/model.onnx", outside)
    meta = {"sha256": sha256_file(outside), "size": outside.stat().st_size}

    def dotdot(m):
        m["files"]["artifacts/../../outside.onnx"] = meta
        next(a for a in m["artifacts"] if a["format"] == "onnx")["path"] = "artifacts/../../outside.onnx"

    _rewrite(b, dotdot)
    _refused(b, "leaves the bundle")
    b2 = tmp_path / "b2"
    shutil.copytree(bundle, b2)
    _rewrite(b2, lambda m: m["files"].__setitem__(str(outside), meta))
    _refused(b2, "is absolute")


def test_symlink_out_of_the_bundle_is_refused(bundle, tmp_path):
    b = _copy(bundle, tmp_path)
    outside = tmp_path / "elsewhere.onnx"
    target = b / "artifacts/onnx-fp32/model.onnx"
    shutil.copyfile(target, outside)  # same bytes: only the link gives it away
    target.unlink()
    target.symlink_to(outside)
    _refused(b, "symbolic link")


def test_unknown_format_unlisted_file_and_pickled_array_are_refused(bundle, tmp_path):
    b = _copy(bundle, tmp_path)
    _rewrite(b, lambda m: m["artifacts"][0].__setitem__("format", "caffe"))
    _refused(b, "unknown format 'caffe'")

    b = tmp_path / "extra"
    shutil.copytree(bundle, b)
    (b / "artifacts/onnx-fp32/model.onnx.data").write_bytes(b"\0" * 16)
    _refused(b, "not in the manifest")

    b = tmp_path / "pickle"
    shutil.copytree(bundle, b)
    # data/labels.npz (compressed)
    rel = json.loads((b / "manifest.json").read_text())["data"]["labels"]["path"]
    p = b / rel
    with open(p, "wb") as f:
        np.savez_compressed(f, labels=np.array([{"x": 1}] * 450, dtype=object))
    _rewrite(b, lambda m: m["files"].__setitem__(rel, {
        "sha256": hashlib.sha256(p.read_bytes()).hexdigest(), "size": p.stat().st_size}))
    verify(b)  # consistent manifest: the hashes alone cannot catch it...
    with pytest.raises(BundleError, match="cannot be read as a numpy array"):
        run_bundle(b, devices=["cpu"], **FAST)  # ...the loader refuses pickles


def test_not_a_bundle(tmp_path):
    with pytest.raises(BundleError, match="not an infer-compare bundle"):
        verify(tmp_path)
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(BundleError, match="not an infer-compare bundle manifest"):
        verify(tmp_path)


def test_unlocked_jetson_clocks_warn_in_the_report(bundle, monkeypatch, cache_dir):
    """measure_prepared turns the device facts into Report.warnings (here: a Jetson with unlocked clocks)."""
    from infer_compare.host import boards as devices
    from infer_compare.host import env as envmod

    from .test_devices import DATA, ORIN, _runner

    real = envmod.collect

    def fake_collect(extra_facts=None):
        e = real(extra_facts)
        facts = devices.collect(
            ORIN, _runner({"jetson_clocks": (DATA / "jetson_clocks-show-unlocked.txt").read_text()}))
        return e.replace(device_facts={**e.device_facts, **facts})

    monkeypatch.setattr(envmod, "collect", fake_collect)
    rep = run_bundle(bundle, formats=["onnx"], backends=["onnxruntime"], devices=["cpu"], batch_sizes=[1],
                     cache_dir=cache_dir, **FAST)
    assert any("clocks are NOT locked" in w for w in rep.warnings), rep.warnings
    assert rep.environment.device_facts["jetson"]["jetpack"] == "6.2"
