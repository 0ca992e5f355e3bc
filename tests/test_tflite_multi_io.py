"""TFLite and the Edge TPU for every model (issue 25): a detector-style ONNX file made outside the tool
(two heads per scale concatenated into boxes [N, anchors, 4] and scores [N, anchors, 5], dynamic batch)
through ONNX -> TFLite (onnx2torch + litert-torch) fp32, fp16 and full-integer int8, with parity per
output and the outputs matched by shape and order (the converter renames them); a several-output
PyTorch module through the litert-torch route; the Edge TPU path up to the compiler (the pre-check's
prediction where no compiler is installed, a stand-in compiler that keeps the model's names); a
``.tflite`` file as the model (its reference LiteRT on the CPU at its own precision; a float file says
why the Edge TPU needs full-integer int8); and the binding rules on their own."""

from __future__ import annotations

import os
import stat
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx2torch")
from torch import nn  # noqa: E402

from infer_compare import compare  # noqa: E402
from infer_compare.backends.tflite import bindings  # noqa: E402

FAST = dict(devices=["cpu", "edgetpu"], warmup_iters=1, min_iters=3, min_time_s=0.02, max_time_s=0.1,
            warmup_time_s=0.02, parity_samples=8, calibration_samples=8, batch_sizes=[1])
OUTS = ["boxes", "scores"]


class TinyDetector(nn.Module):
    """image [N, 3, 32, 32] -> boxes [N, 80, 4], scores [N, 80, 5]: two scales (8x8, 4x4), one anchor each
    for the boxes head and the class head, as SSD's raw heads before decoding and NMS."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 4, 1), nn.ReLU())
        self.down = nn.Sequential(nn.Conv2d(8, 8, 3, 2, 1), nn.ReLU())
        self.box = nn.ModuleList([nn.Conv2d(8, 4, 1), nn.Conv2d(8, 4, 1)])
        self.cls = nn.ModuleList([nn.Conv2d(8, 5, 1), nn.Conv2d(8, 5, 1)])

    def forward(self, x):
        f1 = self.stem(x)
        feats = [f1, self.down(f1)]
        n = x.shape[0]
        boxes = [h(f).permute(0, 2, 3, 1).reshape(n, -1, 4) for h, f in zip(self.box, feats, strict=True)]
        scores = [h(f).permute(0, 2, 3, 1).reshape(n, -1, 5) for h, f in zip(self.cls, feats, strict=True)]
        return torch.cat(boxes, 1), torch.cat(scores, 1)


def detector() -> TinyDetector:
    torch.manual_seed(0)
    return TinyDetector().eval()


@pytest.fixture(scope="module")
def det_onnx(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("det") / "detector.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(detector(), (torch.randn(2, 3, 32, 32),), str(path), input_names=["images"],
                          output_names=OUTS, dynamic_axes={n: {0: "batch"} for n in ["images", *OUTS]},
                          opset_version=17, dynamo=False)
    return path


@pytest.fixture(scope="module")
def det_report(det_onnx, cache_dir):
    return compare(str(det_onnx), backends=["tflite", "edgetpu"], formats=["tflite", "edgetpu"],
                   precisions=["fp32", "fp16", "int8"], cache_dir=cache_dir, **FAST)


def _row(rep, backend, precision):
    got = [r for r in rep.rows if r.backend == backend and r.precision == precision]
    assert got, [r.label for r in rep.rows]
    return got[0]


@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
def test_detector_onnx_through_tflite_with_parity_per_output(det_report, precision):
    r = _row(det_report, "tflite", precision)
    assert r.status == "ok", (r.status, r.reason)
    per = {p.output: p for p in r.parity.outputs}
    assert list(per) == OUTS  # each output compared with its own reference
    floor = 0.9999 if precision != "int8" else 0.95
    assert all(p.cosine_min > floor for p in per.values()), {k: p.cosine_min for k, p in per.items()}
    assert r.options["outputs_matched"].startswith("by shape and order")
    assert r.export.options["route"] == "onnx2torch + litert-torch"
    assert [o.split(" <- ")[0] for o in r.options["output"]] == OUTS
    if precision == "int8":  # full-integer: each tensor its own scale and zero point
        assert r.export.options["full_integer"] and "scale" in r.options["input"][0]


def test_detector_edgetpu_row_says_what_would_map(det_report):
    r = _row(det_report, "edgetpu", "int8")
    assert r.status == "skipped"
    assert "Edge TPU pre-check" in r.reason and "ops would map" in r.reason, r.reason


def test_several_output_pytorch_module_through_tflite(cache_dir):
    from .test_several_io import net

    rep = compare(net(), example_input=(torch.randn(1, 3, 32, 32), torch.randn(1, 8)), backends=["tflite"],
                  formats=["tflite"], precisions=["fp32"], cache_dir=cache_dir, scenarios="both",
                  **{**FAST, "devices": ["cpu"]})
    r, tp = (x for x in rep.rows if x.backend == "tflite")  # latency, then the throughput scenario
    assert tp.label.endswith("/throughput") and tp.status == "ok" and len(tp.parity.outputs) == 2, tp.reason
    assert r.status == "ok" and r.parity.passed, (r.reason, r.parity)
    assert len(r.parity.outputs) == 2 and all(p.cosine_min > 0.9999 for p in r.parity.outputs)
    assert r.export.options["route"] == "litert-torch" and r.export.options["io_map"]["outputs"]


@pytest.mark.skipif(sys.platform == "win32", reason="shell script stand-in for the compiler")
def test_edgetpu_compile_of_the_detector_keeps_the_model_names(det_report, monkeypatch, tmp_path):
    """A stand-in compiler (the documented CLI: ``-s -o DIR FILE``, writes ``*_edgetpu.tflite``): the
    compiled artifact carries the int8 file's io_map, so the Edge TPU runner names the outputs."""
    from infer_compare.backends.exporter import ExportContext
    from infer_compare.backends.tflite.edgetpu_export import EdgeTpuExporter

    int8 = _row(det_report, "tflite", "int8").export.path
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "edgetpu_compiler"
    script.write_text('#!/bin/sh\nif [ "$1" = "--version" ]; then echo "Edge TPU Compiler version '
                      '16.0.test"; exit 0; fi\ncp "$4" "$3/model_edgetpu.tflite"\necho "Model compiled '
                      'successfully"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    ctx = ExportContext(model=None, model_name="detector", input_shape=(3, 32, 32), num_classes=0,
                        calibration=None)
    out = tmp_path / "out"
    out.mkdir()
    res = EdgeTpuExporter().export(ctx, int8, out, "int8")
    assert res.options["io_map"]["outputs"] == OUTS
    assert res.options["precheck"]["summary"].split(" ops would map")[0].count(" of ") == 1


@pytest.fixture(scope="module")
def tflite_files(det_report, tmp_path_factory) -> dict[str, Path]:
    """The detector's fp32 and int8 files, copied out of the cache: a model that arrived as .tflite."""
    d = tmp_path_factory.mktemp("tfl")
    out = {}
    for p in ("fp32", "int8"):
        out[p] = d / f"detector_{p}.tflite"
        out[p].write_bytes(Path(_row(det_report, "tflite", p).export.path).read_bytes())
    return out


def test_tflite_file_as_the_model(tflite_files, cache_dir):
    rep = compare(str(tflite_files["int8"]), backends=["tflite", "edgetpu"], formats=["tflite", "edgetpu"],
                  precisions=["fp32", "int8"], cache_dir=cache_dir, **FAST)
    r = _row(rep, "tflite", "int8")
    assert r.status == "ok" and r.parity.passed and len(r.parity.outputs) == 2
    assert all(p.cosine_min > 0.99999 for p in r.parity.outputs)  # the same file as the reference
    assert any("LiteRT on the CPU" in n for n in rep.model.notes)
    assert "its own precision" in _row(rep, "tflite", "fp32").reason
    assert "ops would map" in _row(rep, "edgetpu", "int8").reason


def test_float_tflite_file_says_why_not_the_edge_tpu(tflite_files, cache_dir):
    rep = compare(str(tflite_files["fp32"]), backends=["tflite", "edgetpu"], formats=["tflite", "edgetpu"],
                  precisions=["fp32", "int8"], cache_dir=cache_dir, **FAST)
    assert _row(rep, "tflite", "fp32").status == "ok"
    why = _row(rep, "edgetpu", "int8").reason
    assert "full-integer int8" in why and "0 of" in why and "float32" in why, why


def test_outputs_matched_by_name_else_by_shape_and_order():
    names, how = bindings.match_outputs([(1, 10), (1, 4)], [(1, 10), (1, 4)], ["a", "b"], ["b", "a"])
    assert names == ["b", "a"] and how == "by name"
    names, how = bindings.match_outputs([(1, 4), (1, 10), (1, 4)], [(1, 10), (1, 4), (1, 4)],
                                        ["x", "y", "z"], ["o0", "o1", "o2"])
    assert names == ["y", "x", "z"] and how.startswith("by shape and order")
    with pytest.raises(ValueError, match="model output 'y'"):
        bindings.match_outputs([(1, 4), (1, 9)], [(1, 4), (1, 10)], ["x", "y"], ["o0", "o1"])


def test_each_tensor_quantized_with_its_own_scale():
    a = bindings.Tensor(0, "f0", "image", np.dtype(np.int8), 0.5, -3, (1, 2, 2, 3), channel_last=True)
    b = bindings.Tensor(1, "f1", "vec", np.dtype(np.int8), 0.25, 10, (1, 4))
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 2, 2)
    qa = bindings.to_file(a, x)
    assert qa.shape == (1, 2, 2, 3) and qa[0, 0, 1, 2] == np.round(x[0, 2, 0, 1] / 0.5) - 3
    assert (bindings.to_file(a, x.transpose(0, 2, 3, 1)) == qa).all()  # already NHWC: not transposed again
    qb = bindings.to_file(b, np.ones((1, 4), np.float32))
    assert (qb == 14).all() and bindings.from_file(b, qb)[0, 0] == 1.0
    arrays, by_pos = bindings.feed([a, b], {"vec": 1, "image": 2})
    assert arrays == [2, 1] and not by_pos
    arrays, by_pos = bindings.feed([a, b], {"p": 1, "q": 2})
    assert arrays == [1, 2] and by_pos


def test_an_op_the_converter_lacks_is_named_in_one_line(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    from infer_compare.backends.tflite.convert_onnx import UnsupportedModel, onnx_module

    g = helper.make_graph([helper.make_node("Det", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "det.onnx"))
    with pytest.raises(UnsupportedModel, match=r"^onnx2torch has no converter for ONNX op Det "
                                               r"\(op version \d+\)$"):
        onnx_module(str(tmp_path / "det.onnx"))


def test_bundle_of_the_onnx_detector_runs_its_tflite_rows_without_torch(det_onnx, det_report, cache_dir,
                                                                        tmp_path):
    """``export`` carries the ONNX root's TFLite files (with their io.json) and the several-output data as
    .npz; ``run`` in a process where torch, onnx2torch and litert-torch cannot be imported measures them
    with parity per output."""
    import json
    import subprocess

    from infer_compare.base.records import load_report
    from infer_compare.bundle import export_bundle

    from .conftest import python_env

    b = tmp_path / "bundle"
    export_bundle(str(det_onnx), b, formats=["tflite"], precisions=["fp32", "int8"], parity_samples=8,
                  calibration_samples=8, cache_dir=cache_dir)
    man = json.loads((b / "manifest.json").read_text())
    assert man["data"]["reference"]["path"] == "data/reference.npz"
    assert list(man["data"]["reference"]["arrays"]) == OUTS
    assert "artifacts/tflite-int8/model.tflite.io.json" in man["files"]
    block = tmp_path / "blocked"
    for m in ("torch", "torchvision", "onnx2torch", "litert_torch"):
        (block / m).mkdir(parents=True)
        (block / m / "__init__.py").write_text("raise ImportError('blocked: a torch-free device')\n")
    env = python_env()
    env["PYTHONPATH"] = str(block) + os.pathsep + env["PYTHONPATH"]
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "infer_compare.cli", "run", str(b), "-o", str(out), "--device",
                        "cpu", "--backends", "tflite", "-b", "1", "--warmup", "1", "--min-iters",
                        "3", "--min-time", "0.02"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rep = load_report(out / "results.json")
    for p in ("fp32", "int8"):
        row = _row(rep, "tflite", p)
        assert row.status == "ok" and [o.output for o in row.parity.outputs] == OUTS, (row.status, row.reason)
        assert row.options["outputs_matched"].startswith("by shape and order")


def test_large_onnx_int8_is_opt_in_too(det_onnx, monkeypatch, tmp_path):
    """An ONNX root has no torch module to count: its initializers are counted (here over a lowered limit)."""
    from infer_compare.backends.exporter import ExportContext
    from infer_compare.backends.tflite import export as tex
    from infer_compare.base.errors import BackendUnavailable

    monkeypatch.setattr(tex, "LARGE_INT8_PARAMS", 100)
    monkeypatch.delenv(tex.OPT_IN_ENV, raising=False)
    ctx = ExportContext(model=None, model_name="detector", input_shape=(3, 32, 32), num_classes=0,
                        calibration=np.zeros((2, 3, 32, 32), np.float32))
    assert tex._onnx_params(str(det_onnx)) == sum(p.numel() for p in detector().parameters())
    with pytest.raises(BackendUnavailable, match=r"detector \(0\.0 M parameters\) is built only on request"):
        tex.TFLiteExporter().export(ctx, str(det_onnx), tmp_path, "int8")


def test_a_tflite_model_gets_its_own_rows_by_default(tflite_files, cache_dir):
    rep = compare(str(tflite_files["int8"]), cache_dir=cache_dir, **FAST)
    assert {r.format for r in rep.rows} == {"tflite", "edgetpu"}, sorted({r.label for r in rep.rows})


def test_bundle_of_a_tflite_model(tflite_files, cache_dir, tmp_path):
    """The user's .tflite file travels as artifacts/tflite-int8/model.tflite (the name the Edge TPU drop-in
    expects), its two outputs' reference as .npz; the bundle loads without building anything."""
    import json

    from infer_compare.bundle import export_bundle, prepared_from_bundle, verify

    b = tmp_path / "b"
    export_bundle(str(tflite_files["int8"]), b, formats=["tflite", "edgetpu"], parity_samples=8,
                  cache_dir=cache_dir)
    man = json.loads((b / "manifest.json").read_text())
    assert "artifacts/tflite-int8/model.tflite" in man["files"]
    (d,) = [d for d in man["deferred"] if d["format"] == "edgetpu"]
    assert "artifacts/tflite-int8/model.tflite`" in d["note"]
    prep = prepared_from_bundle(verify(b))
    assert ("tflite", "int8") in prep.carried and len(prep.ref) == 2
