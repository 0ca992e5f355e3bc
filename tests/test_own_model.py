"""Your own model and your own data, through the comparison (issue 10): ONNX files (static
batch), TorchScript and ExportedProgram files, a factory callable, an ImageFolder of
real photos, a pre-built artifact, and every bad input as a one-line usage error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .conftest import PY, python_env

torch = pytest.importorskip("torch")

FACTORY = '''
import torch
import torch.nn as nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                               nn.Flatten(), nn.Linear(8, 5))

    def forward(self, x):
        return self.f(x)


def tiny():
    torch.manual_seed(0)
    return Tiny().eval()


def not_a_module():
    return 42
'''
FAST = ["--min-time", "0.05", "--max-time", "0.3", "--min-iters", "3", "--warmup", "1", "--device",
        "cpu", "-q"]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    """A small network saved as a static-batch ONNX file (opset 17), TorchScript, .pt2 and a factory
    module."""
    d = tmp_path_factory.mktemp("own")
    (d / "tinymod.py").write_text(FACTORY)
    sys.path.insert(0, str(d))
    import tinymod

    m = tinymod.tiny()
    x = torch.randn(1, 3, 32, 32)
    torch.onnx.export(m, (x,), str(d / "tiny_static.onnx"), input_names=["image"], output_names=["scores"],
                      opset_version=17, dynamo=False)
    torch.jit.save(torch.jit.script(m), str(d / "tiny.pt"))
    torch.export.save(torch.export.export(m, (x,)), str(d / "tiny.pt2"))
    torch.save(m.state_dict(), str(d / "tiny_state.pt"))
    return d


def _run(args, cwd, cache_dir):
    return subprocess.run([PY, "-m", "infer_compare.cli", *args, "--cache-dir", str(cache_dir)], cwd=cwd,
                          env=python_env(), capture_output=True, text=True, timeout=900)


def _rows(out: Path):
    from infer_compare.base.records import load_report

    rep = load_report(out / "results.json")
    return rep, {(r.backend, r.format, r.precision, r.batch_size, r.variant): r for r in rep.rows}


def test_onnx_file_static_batch_runs_on_onnxruntime_and_openvino(models_dir, tmp_path, cache_dir):
    out = tmp_path / "out"
    p = _run(["--model", str(models_dir / "tiny_static.onnx"), "--formats", "onnx,openvino,tflite,pytorch",
              "--precisions", "fp32", "-b", "1,8", "-o", str(out), *FAST], models_dir, cache_dir)
    assert p.returncode == 0, p.stderr
    rep, rows = _rows(out)
    assert rep.model.family == "user-onnx" and any("ONNX Runtime CPU FP32" in n for n in rep.model.notes)
    for key in (("onnxruntime", "onnx", "fp32", 1, ""), ("openvino", "openvino", "fp32", 1, "")):
        assert rows[key].status == "ok" and rows[key].parity.passed, rows[key]
    for key in (("onnxruntime", "onnx", "fp32", 8, ""), ("openvino", "openvino", "fp32", 8, "")):
        assert rows[key].status == "skipped" and "static batch of 1" in rows[key].reason
    # converted from the ONNX file (onnx2torch + litert-torch)
    tfl = rows[("tflite", "tflite", "fp32", 1, "")]
    assert tfl.status == "ok" and tfl.parity.passed and \
        tfl.export.options["route"] == "onnx2torch + litert-torch"
    assert "arrived as ONNX" in rows[("pytorch", "pytorch", "fp32", None, "")].reason


@pytest.mark.parametrize("model", ["tiny.pt", "tiny.pt2"])
def test_torchscript_and_exported_program_through_every_cpu_format(models_dir, tmp_path, cache_dir, model):
    out = tmp_path / "out"
    p = _run(["--model", model, "--input-shape", "1x3x32x32", "--precisions", "fp32", "-b", "1", "-o",
              str(out), *FAST], models_dir, cache_dir)
    assert p.returncode == 0, p.stderr
    _, rows = _rows(out)
    for fmt, runner in (("pytorch", "pytorch"), ("onnx", "onnxruntime"), ("openvino", "openvino"),
                        ("tflite", "tflite")):
        r = rows[(runner, fmt, "fp32", 1, "")]
        assert r.status == "ok" and r.parity.passed and r.parity.cosine_mean > 0.9999, (fmt, r.reason)


def test_factory_callable_with_weights(models_dir, tmp_path, cache_dir):
    out = tmp_path / "out"
    p = _run(["--model", "tinymod:tiny", "--weights", "tiny_state.pt", "--input-shape", "1x3x32x32",
              "--formats", "pytorch,onnx", "--precisions", "fp32", "-b", "1,2", "-o", str(out), *FAST],
             models_dir, cache_dir)
    assert p.returncode == 0, p.stderr
    rep, rows = _rows(out)
    assert rep.model.family == "user-factory"
    assert all(rows[(r, f, "fp32", b, "")].status == "ok"
               for r, f in (("pytorch", "pytorch"), ("onnxruntime", "onnx")) for b in (1, 2))


def _image_folder(root: Path) -> Path:
    """Three classes of real photos (scikit-image's bundled images), resized crops per class."""
    from PIL import Image
    from skimage import data as skd

    for cls, names in {"animals": ("cat", "chelsea", "astronaut"), "things": ("coffee", "rocket", "camera"),
                       "scenes": ("brick", "grass", "gravel")}.items():
        (root / cls).mkdir(parents=True)
        for n in names:
            a = getattr(skd, n)()
            img = Image.fromarray(a if a.ndim == 3 else np.stack([a] * 3, -1)).convert("RGB")
            for i, box in enumerate(((0, 0, 200, 200), (50, 50, 250, 250))):
                img.crop(box).save(root / cls / f"{n}{i}.jpg")
    return root


def test_image_folder_gives_an_accuracy_column(models_dir, tmp_path, cache_dir):
    out = tmp_path / "out"
    folder = _image_folder(tmp_path / "photos")
    labels = tmp_path / "labels.txt"  # the model has 5 classes: the folders say which 3 of them they hold
    labels.write_text("animals 0\nthings 3\nscenes 4\n")
    p = _run(["--model", str(models_dir / "tiny_static.onnx"), "--data", str(folder), "--labels", str(labels),
              "--formats", "onnx", "--precisions", "fp32", "-b", "1", "--calibration", str(folder), "-o",
              str(out), *FAST],
             models_dir, cache_dir)
    assert p.returncode == 0, p.stderr
    rep, rows = _rows(out)
    r = rows[("onnxruntime", "onnx", "fp32", 1, "")]
    assert r.parity.accuracy is not None and r.parity.n == 18
    assert r.parity.accuracy == r.parity.reference_accuracy
    assert any("photos" in n for n in rep.notes)


def test_prebuilt_openvino_ir_is_measured_as_given(models_dir, tmp_path, cache_dir):
    ov = pytest.importorskip("openvino")
    ir = tmp_path / "given.xml"
    ov.save_model(ov.convert_model(str(models_dir / "tiny_static.onnx")), str(ir), compress_to_fp16=False)
    out = tmp_path / "out"
    p = _run(["--model", str(models_dir / "tiny_static.onnx"), "--formats", "onnx", "--precisions", "fp32",
              "-b", "1", "--artifact", str(ir), "-o", str(out), *FAST], models_dir, cache_dir)
    assert p.returncode == 0, p.stderr
    _, rows = _rows(out)
    r = rows[("openvino", "openvino", "fp32", 1, "user:given.xml")]
    assert r.status == "ok" and r.parity.passed and r.export.path == str(ir)
    assert "openvino/openvino/fp32/cpu/b1/user:given.xml" == r.label


@pytest.mark.parametrize("case", ["missing", "truncated", "suffix", "pickled", "state_dict", "import",
                                  "not_module", "dynamic_dim", "shape_mismatch", "empty_data",
                                  "bad_artifact"])
def test_bad_input_is_one_line_exit_2(models_dir, tmp_path, cache_dir, case):
    onnx = models_dir / "tiny_static.onnx"
    if case == "truncated":
        bad = tmp_path / "cut.onnx"
        bad.write_bytes(onnx.read_bytes()[: len(onnx.read_bytes()) // 2])
        args, want = ["--model", str(bad)], "not a valid ONNX"
    elif case == "pickled":
        bad = tmp_path / "whole.pt"
        import tinymod

        torch.save(tinymod.tiny(), bad)
        args, want = ["--model", str(bad)], "refus"
    else:
        args, want = {
            "missing": (["--model", str(tmp_path / "nope.onnx")], "not found"),
            "suffix": (["--model", str(tmp_path / "m.h5")], ""),
            "state_dict": (["--model", str(models_dir / "tiny_state.pt")], "state dict"),
            "import": (["--model", "no_such_pkg.mod:make"], "cannot import"),
            "not_module": (["--model", "tinymod:not_a_module", "--input-shape", "1x3x32x32"], "Module"),
            "dynamic_dim": (["--model", str(_dynamic_hw(tmp_path))], "image"),
            "shape_mismatch": (["--model", str(onnx), "--input-shape", "1x3x64x64"], "image"),
            "empty_data": (["--model", str(onnx), "--data", str(_mkdir(tmp_path / "empty"))], "empty"),
            "bad_artifact": (["--model", str(onnx), "--artifact", str(tmp_path / "x.bin")], "artifact"),
        }[case]
        if case == "suffix":
            (tmp_path / "m.h5").write_bytes(b"x")
    p = _run([*args, "-o", str(tmp_path / "out"), *FAST], models_dir, cache_dir)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.startswith("infer-compare: error")]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert want.lower() in lines[0].lower(), lines[0]


def _mkdir(p: Path) -> Path:
    p.mkdir()
    return p


def _dynamic_hw(tmp_path: Path) -> Path:
    """An ONNX file whose height and width are dynamic: a size must be given."""
    import tinymod

    path = tmp_path / "dyn_hw.onnx"
    torch.onnx.export(tinymod.tiny(), (torch.randn(1, 3, 32, 32),), str(path), input_names=["image"],
                      output_names=["scores"], opset_version=17, dynamo=False,
                      dynamic_axes={"image": {0: "batch", 2: "h", 3: "w"}})
    return path
