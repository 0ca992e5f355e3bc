"""A received bundle is data, never code: a manifest that names a module (a factory beside the manifest,
found through the spec's working folder or by a dotted module path) is refused before anything is
imported, by ``run``, ``gate`` and ``fleet run``; so is any file the manifest does not list, a listed file
outside artifacts/ and data/, and a PyTorch file that is not weights-only. Every bundle here is a real
LeNet-5 export, then edited the way a hostile sender would (the hashes made to match)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from infer_compare.bundle import BundleError, export_bundle, verify

from .conftest import PY, python_env

FAST_RUN = ["-q", "--device", "cpu", "--backends", "pytorch", "-b", "1", "--warmup", "1", "--min-iters", "2",
            "--min-time", "0.01"]
EVIL = """import pathlib
pathlib.Path({marker!r}).write_text("the bundle's code ran")


def build():
    import torch
    return torch.nn.Flatten()
"""


@pytest.fixture(scope="module")
def lenet(cache_dir, tmp_path_factory) -> Path:
    """LeNet-5's PyTorch and ONNX fp32 artifacts, as ``export`` writes them (tests/test_bundle.py's way)."""
    out = tmp_path_factory.mktemp("trust") / "lenet5"
    export_bundle("lenet5", out, formats=["pytorch", "onnx"], precisions=["fp32"], cache_dir=cache_dir)
    return out


def _copy(bundle: Path, dst: Path) -> Path:
    shutil.copytree(bundle, dst)
    return dst


def _edit(b: Path, edit) -> None:
    m = json.loads((b / "manifest.json").read_text())
    edit(m)
    (b / "manifest.json").write_text(json.dumps(m))


def _list(b: Path, rel: str) -> None:
    """``rel`` listed in the manifest with its true hash and size (what a sender who means harm does)."""
    p = b / rel
    _edit(b, lambda m: m["files"].__setitem__(rel, {"sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
                                                    "size": p.stat().st_size}))


def _one_line_exit_2(r: subprocess.CompletedProcess, *words: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])
    err = r.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for w in words:
        assert w in err, err
    return err


def _cli(args: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "infer_compare", *args], capture_output=True, text=True,
                          env=python_env(), cwd=cwd, timeout=timeout)


def _with_factory(lenet: Path, dst: Path, variant: str) -> tuple[Path, Path, Path]:
    """A copy of ``lenet`` whose manifest names a factory module lying in the bundle (listed and hashed):
    (bundle, the folder ``run`` starts in, the file the module writes when imported)."""
    b = _copy(lenet, dst)
    marker = dst.parent / f"{dst.name}-ran"
    (b / "evil.py").write_text(EVIL.format(marker=str(marker)))
    _list(b, "evil.py")
    spec = {"name": "evil", "family": "user", "kind": "factory"}
    if variant == "cwd":  # the spec's working folder set to the bundle
        spec.update(source="evil:build", cwd=str(b))
        where = dst.parent
    else:  # a dotted module path: the bundle's folder as a package, from the folder that holds it
        spec.update(source=f"{b.name}.evil:build")
        where = b.parent
    _edit(b, lambda m: m.__setitem__("model_spec", spec))
    return b, where, marker


# ------------------------------------------------------------------------------- code in the bundle


@pytest.mark.parametrize("variant", ["cwd", "dotted"])
def test_run_refuses_a_factory_in_the_bundle_and_imports_nothing(lenet, tmp_path, variant):
    b, where, marker = _with_factory(lenet, tmp_path / f"b_{variant}", variant)
    r = _cli(["run", str(b), "-o", str(tmp_path / "out"), *FAST_RUN], where)
    _one_line_exit_2(r, "model_spec", "refused")
    assert not marker.exists(), "the bundle's module was imported"
    assert not (tmp_path / "out" / "results.json").exists()


def test_gate_refuses_two_bundles_with_a_factory(lenet, tmp_path):
    a, where, marker_a = _with_factory(lenet, tmp_path / "ga", "cwd")
    b, _, marker_b = _with_factory(lenet, tmp_path / "gb", "dotted")
    r = _cli(["gate", str(a), str(b), "-o", str(tmp_path / "out"), *FAST_RUN], where)
    _one_line_exit_2(r, "model_spec", "refused")
    assert not marker_a.exists() and not marker_b.exists(), "a bundle's module was imported"


def test_fleet_run_refuses_a_factory_before_connecting(lenet, tmp_path):
    b, where, marker = _with_factory(lenet, tmp_path / "fb", "cwd")
    r = _cli(["fleet", "run", str(b), "--address", "127.0.0.1:9", "-o", str(tmp_path / "out"), "--device",
              "cpu", "--backends", "pytorch", "-b", "1"], where, timeout=120)
    _one_line_exit_2(r, "model_spec", "refused")
    assert not marker.exists()


def test_a_received_spec_never_reaches_the_users_loader(tmp_path, monkeypatch):
    """The split under the bundle's checks: a received spec goes to the data-only loader, which imports
    nothing, whatever it names (models.rebuild)."""
    from infer_compare import models
    from infer_compare.base.errors import UsageError

    marker = tmp_path / "ran"
    (tmp_path / "evil_q9.py").write_text(EVIL.format(marker=str(marker)))
    monkeypatch.chdir(tmp_path)
    spec = models.received_spec({"name": "evil", "family": "user", "kind": "factory",
                                 "source": "evil_q9:build", "cwd": str(tmp_path)})
    assert "source" not in spec and "cwd" not in spec and spec[models.RECEIVED] is True
    with pytest.raises(UsageError, match="never code"):
        models.rebuild(spec, str(tmp_path / "weights.pt"))
    with pytest.raises(UsageError, match="never code"):
        models.rebuild({"family": "evil", "kind": "factory", "source": "evil_q9:build"}, "x.pt")
    assert not marker.exists()


@pytest.mark.parametrize("spec, words", [
    ({"name": "x", "family": "user", "kind": "torchscript"}, "kind 'torchscript'"),
    ({"name": "lenet5", "family": "lenet", "loader": "pkg.mod:load"}, "names 'loader'"),
    ({"name": "x", "family": "user", "kind": "onnx", "source": "/elsewhere/model.onnx"}, "names 'source'"),
    ({"name": "os.system", "family": "torchvision"}, "not one this tool builds"),
])
def test_manifest_naming_code_a_path_or_a_loader_is_refused(lenet, tmp_path, spec, words):
    b = _copy(lenet, tmp_path / "b")
    _edit(b, lambda m: m.__setitem__("model_spec", spec))
    with pytest.raises(BundleError, match=words.replace("(", r"\(")):
        verify(b)
    _one_line_exit_2(_cli(["run", str(b), "--verify-only"], tmp_path), "refused")


# ----------------------------------------------------------------------------------- unlisted files


@pytest.mark.parametrize("rel", ["notes.txt", "evil.py", "sub/deep.bin"])  # beside artifacts/ and data/
def test_a_file_the_manifest_does_not_list_is_refused(lenet, tmp_path, rel):
    b = _copy(lenet, tmp_path / "b")
    (b / rel).parent.mkdir(parents=True, exist_ok=True)
    (b / rel).write_text("x")
    with pytest.raises(BundleError, match=f"{rel} is not in the manifest's file list"):
        verify(b)
    err = _one_line_exit_2(_cli(["run", str(b), "--verify-only"], tmp_path))
    assert rel in err


def test_a_listed_file_outside_artifacts_and_data_is_refused(lenet, tmp_path):
    b = _copy(lenet, tmp_path / "b")
    (b / "evil.py").write_text("print('hi')\n")
    _list(b, "evil.py")  # hashed and sized right: the list itself has no place for it
    with pytest.raises(BundleError, match="evil.py lies outside artifacts/ and data/"):
        verify(b)


# ------------------------------------------------------------------------------------ torch files


def _pickled(kind: str, path: Path, marker: Path) -> None:
    import torch

    class Runs:
        def __reduce__(self):
            return exec, (f"open({str(marker)!r}, 'w').write('ran')",)

    if kind == "exec":
        torch.save({"conv1.weight": Runs()}, path)
    elif kind == "module":  # a whole pickled module: its class is named, and unpickling it builds it
        torch.save(torch.nn.Sequential(torch.nn.Linear(2, 2)), path)
    else:  # TorchScript: an archive of code
        torch.jit.script(torch.nn.Linear(2, 2)).save(str(path))


@pytest.mark.parametrize("kind, words", [("exec", "exec: not a weights-only"), ("module", "torch.nn.modules"),
                                         ("torchscript", "TorchScript archive")])
def test_a_pytorch_artifact_that_is_not_weights_only_is_refused(lenet, tmp_path, kind, words):
    b = _copy(lenet, tmp_path / "b")
    rel = next(a["path"] for a in json.loads((b / "manifest.json").read_text())["artifacts"]
               if a["format"] == "pytorch")
    marker = tmp_path / "ran"
    _pickled(kind, b / rel, marker)
    _list(b, rel)
    with pytest.raises(BundleError, match=words):
        verify(b)
    r = _cli(["run", str(b), "-o", str(tmp_path / "out"), *FAST_RUN], tmp_path)
    _one_line_exit_2(r, words, "refused")
    assert not marker.exists()


def test_the_exported_weights_pass_the_weights_only_check(lenet):
    """What export writes passes (the check refuses by what a pickle names, not by its size or origin)."""
    from infer_compare.bundle.torchfile import check_weights_only

    m = json.loads((lenet / "manifest.json").read_text())
    assert m["model_spec"] == {"name": "lenet5", "family": "lenet", "input_shape": [1, 32, 32],
                               "num_classes": 10}
    pt = next(a["path"] for a in m["artifacts"] if a["format"] == "pytorch")
    check_weights_only(lenet / pt, pt)
    assert verify(lenet).n_files == len(m["files"])


# ------------------------------------------------------------------ a user's factory model, exported


FACTORY = """import torch


def build():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 14 * 14, 5))
"""


def test_a_factory_model_travels_as_an_exported_program(tmp_path, cache_dir):
    """The user's own factory on the user's command line stays allowed; its bundle carries the module as an
    ExportedProgram (data), whose PyTorch rows run where the factory's code is absent."""
    work = tmp_path / "work"
    work.mkdir()
    name = "trust_factory_q3"
    (work / f"{name}.py").write_text(FACTORY)
    r = _cli(["export", "--model", f"{name}:build", "--input-shape", "1x3x16x16", "--formats", "pytorch",
              "--precisions", "fp32", "--max-batch", "4", "-o", str(tmp_path / "b"), "-q"], work)
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert m["model_spec"] == {"name": "build", "family": "user", "kind": "exported_program"}
    elsewhere = tmp_path / "elsewhere"  # the factory's module cannot be imported from here
    elsewhere.mkdir()
    r = _cli(["run", str(tmp_path / "b"), "-o", str(tmp_path / "out"), *FAST_RUN], elsewhere)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    pt = [x for x in rows if x["backend"] == "pytorch" and x["device"] == "cpu"]
    assert pt and all(x["status"] == "ok" for x in pt), [(x["status"], x.get("reason")) for x in pt]
