"""issue 23 point 2: a Coral bundle gets its Edge TPU model. With ``edgetpu_compiler`` on PATH (a stand-in
script that behaves as the documented CLI: ``-s -o OUTDIR MODEL`` writes OUTDIR/<stem>_edgetpu.tflite and
<stem>_edgetpu.log) the export compiles it into the bundle; without it the bundle says in one line how and
where to compile it, and ``run`` picks up the file once placed there. Bundles carry no calibration data
that no artifact in them needs."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from infer_compare.bundle import BundleError, export_bundle, verify
from infer_compare.bundle.run import prepared_from_bundle

pytest.importorskip("ai_edge_litert")

FAKE = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "Edge TPU Compiler version 16.0.test"; exit 0; fi
[ "$1" = "-s" ] && [ "$2" = "-o" ] || { echo "usage: edgetpu_compiler [-s] [-o DIR] MODEL" >&2; exit 2; }
out="$3"; src="$4"; stem=$(basename "$src" .tflite)
mkdir -p "$out"
cp "$src" "$out/${stem}_edgetpu.tflite"
printf '%s\\n' 'Edge TPU Compiler version 16.0.test' 'Operator Count Status' \
  'FULLY_CONNECTED 3 Mapped to Edge TPU' > "$out/${stem}_edgetpu.log"
echo "Number of operations that will run on Edge TPU: 3"
echo "Number of Edge TPU subgraphs: 1"
"""


def _fake_compiler(tmp_path: Path) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "edgetpu_compiler"
    script.write_text(FAKE)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bindir


def _no_compiler_path() -> str:
    return os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and not (Path(p) / "edgetpu_compiler").exists())


@pytest.fixture(scope="module")
def deferred_bundle(cache_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("coral") / "lenet5"
    mp = pytest.MonkeyPatch()
    mp.setenv("PATH", _no_compiler_path())
    try:
        export_bundle("lenet5", out, formats=["tflite", "edgetpu"], precisions=["int8"], cache_dir=cache_dir)
    finally:
        mp.undo()
    return out


def test_without_the_compiler_the_bundle_says_in_one_line_what_to_do(deferred_bundle):
    man = json.loads((deferred_bundle / "manifest.json").read_text())
    (d,) = [d for d in man["deferred"] if d["format"] == "edgetpu"]
    assert d["drop_in"] == "artifacts/edgetpu-int8/model_edgetpu.tflite"
    note = d["note"]
    assert "\n" not in note and "x86-64 Linux" in note
    assert "`edgetpu_compiler -s -o artifacts/edgetpu-int8 artifacts/tflite-int8/model.tflite`" in note
    assert note in man["warnings"]  # printed at export time too
    assert (deferred_bundle / "artifacts" / "edgetpu-int8").is_dir()
    prep = prepared_from_bundle(verify(deferred_bundle))
    assert any(note in n for n in prep.notes) and ("edgetpu", "int8") not in prep.carried


def test_bundle_carries_no_calibration_data_nothing_needs(deferred_bundle):
    man = json.loads((deferred_bundle / "manifest.json").read_text())
    assert "calibration" not in man["data"] and not any((deferred_bundle / "data").glob("calibration.*"))
    total = sum(m["size"] for m in man["files"].values())
    tfl = man["files"]["artifacts/tflite-int8/model.tflite"]["size"]
    io = man["files"]["artifacts/tflite-int8/model.tflite.io.json"]["size"]  # which model tensor each one is
    data = sum(m["size"] for rel, m in man["files"].items() if rel.startswith("data/"))
    assert set(man["files"]) == {"artifacts/tflite-int8/model.tflite",
                                 "artifacts/tflite-int8/model.tflite.io.json",
                                 "data/eval.npz", "data/reference.npz", "data/labels.npz"}, \
        sorted(man["files"])
    assert total == tfl + io + data and io < 1000


def test_compiling_as_told_then_run_picks_it_up(deferred_bundle, tmp_path):
    b = tmp_path / "b"
    shutil.copytree(deferred_bundle, b)
    note = json.loads((b / "manifest.json").read_text())["deferred"][0]["note"]
    cmd = note.split("`")[1].split()  # the command the line gives, run where it says (the bundle's folder)
    cmd[0] = str(_fake_compiler(tmp_path) / cmd[0])
    subprocess.run(cmd, cwd=b, check=True, capture_output=True, timeout=60)
    v = verify(b)  # the drop-in and its log are allowed outside the file list
    assert v.placed == {("edgetpu", "int8"): "artifacts/edgetpu-int8/model_edgetpu.tflite"}
    prep = prepared_from_bundle(v)
    rec = prep.carried[("edgetpu", "int8")]
    assert Path(rec.path) == (b / v.placed[("edgetpu", "int8")]).resolve()
    assert "not covered by the manifest's sha256" in rec.notes[0]
    assert not any("Edge TPU model not compiled" in n for n in prep.notes)
    (b / "artifacts" / "edgetpu-int8" / "other.tflite").write_bytes(b"x")  # anything else is still refused
    with pytest.raises(BundleError, match="other.tflite is not in the manifest"):
        verify(b)


def test_with_the_compiler_the_export_compiles_into_the_bundle(cache_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(_fake_compiler(tmp_path)) + os.pathsep + _no_compiler_path())
    out = tmp_path / "compiled"
    man = export_bundle("lenet5", out, formats=["edgetpu"], precisions=["int8"], cache_dir=tmp_path / "cache")
    arts = {(a["format"], a["precision"]): a for a in man["artifacts"]}
    assert not man["deferred"] and ("edgetpu", "int8") in arts
    a = arts[("edgetpu", "int8")]
    assert a["path"] == "artifacts/edgetpu-int8/model_edgetpu.tflite" and (out / a["path"]).is_file()
    assert a["export"]["options"]["compiler"] == "16.0.test"
    assert a["export"]["options"]["op_coverage"]["tpu_ops"] == 3
    assert "artifacts/edgetpu-int8/model_edgetpu.log" in man["files"]
    assert "calibration" not in man["data"]


def test_calibration_only_for_an_int8_built_from_a_float_source():
    from infer_compare.bundle.export import needs_calibration

    assert not needs_calibration([])
    assert not needs_calibration([
        {"format": "tensorrt", "precision": "int8", "source": ["onnx", "int8-s8s8"]},
        {"format": "edgetpu", "precision": "int8", "source": ["tflite", "int8"]}])
    assert needs_calibration([{"format": "tensorrt", "precision": "int8", "source": ["onnx", "fp32"]}])
    assert not needs_calibration([{"format": "tensorrt", "precision": "fp16", "source": ["onnx", "fp32"]}])


@pytest.mark.slow
def test_the_coral_export_and_run_say_the_precheck_and_the_step_still_due(cache_dir, tmp_path, monkeypatch,
                                                                          capsys):
    """issue 38: `export` lists the file that travels, the compile step and the Edge TPU pre-check of that
    file; `run` repeats the step on the terminal while it is due, and says when a compiled model was found and
    used."""
    from infer_compare.cli import main

    monkeypatch.setenv("PATH", _no_compiler_path())
    monkeypatch.setenv("COLUMNS", "400")  # the progress lines whole
    out = tmp_path / "coral"
    assert main(["export", "--model", "lenet5", "--formats", "tflite,edgetpu", "--precisions", "int8", "-q",
                 "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "  tflite int8: artifacts/tflite-int8/model.tflite" in said
    assert "  edgetpu int8: still to compile, into artifacts/edgetpu-int8/model_edgetpu.tflite" in said
    assert "Edge TPU pre-check" in said and "ops would map to the Edge TPU" in said
    man = json.loads((out / "manifest.json").read_text())
    assert "ops would map" in man["deferred"][0]["precheck"]
    assert set(man["data"]) >= {"eval", "reference"} and all(
        man["data"][k]["path"].endswith(".npz") for k in ("eval", "reference"))  # stored compressed

    run = ["run", str(out), "--max-time", "0.3", "--min-iters", "3", "-b", "1"]
    assert main([*run, "-o", str(tmp_path / "r1")]) == 0
    err = capsys.readouterr().err
    assert ("WARNING: edgetpu int8 still to compile" in err
            and "edgetpu_compiler -s -o artifacts/edgetpu-int8" in err)
    rep = json.loads((tmp_path / "r1" / "results.json").read_text())
    assert any("still to compile" in w and "edgetpu_compiler -s -o artifacts/edgetpu-int8" in w
               for w in rep["warnings"])
    assert any(r["backend"] == "tflite" and r["status"] == "ok" for r in rep["rows"])

    cmd = man["deferred"][0]["note"].split("`")[1].split()
    cmd[0] = str(_fake_compiler(tmp_path) / cmd[0])
    subprocess.run(cmd, cwd=out, check=True, capture_output=True, timeout=60)
    assert main([*run, "-o", str(tmp_path / "r2")]) == 0
    err = capsys.readouterr().err
    assert "found the compiled model artifacts/edgetpu-int8/model_edgetpu.tflite" in err
    assert "still to compile" not in err


def test_a_bundle_written_before_compression_still_loads(deferred_bundle, tmp_path):
    """Bundles written before issue 38 hold data/*.npy: the loader reads both forms, to the same arrays."""
    import hashlib

    import numpy as np

    b = tmp_path / "old"
    shutil.copytree(deferred_bundle, b)
    man = json.loads((b / "manifest.json").read_text())
    new = prepared_from_bundle(verify(deferred_bundle))
    for name, d in man["data"].items():
        if name == "description":
            continue
        arr = np.load(b / d["path"])[name]
        (b / d["path"]).unlink()
        del man["files"][d["path"]]
        d["path"] = d["path"].replace(".npz", ".npy")
        d.pop("compressed")
        np.save(b / d["path"], arr)
        man["files"][d["path"]] = {"sha256": hashlib.sha256((b / d["path"]).read_bytes()).hexdigest(),
                                   "size": (b / d["path"]).stat().st_size}
    (b / "manifest.json").write_text(json.dumps(man))
    old = prepared_from_bundle(verify(b))
    assert np.array_equal(old.ds.eval, new.ds.eval) and np.array_equal(old.ref, new.ref)
    assert np.array_equal(old.ds.eval_labels, new.ds.eval_labels)
