"""Models with several inputs and several outputs (issue 10): a two-input two-output network (an
image [N, 3, 32, 32] and a vector [N, 8] in; logits [N, 10] and a feature map [N, 4, 8, 8] out)
as an ONNX file, a TorchScript file and a module object, measured through ONNX Runtime, OpenVINO
and PyTorch on the CPU with parity per output; a pre-built file whose second output is wrong
fails naming that output; int64 ids keep their dtype; --input-shape sizes a dynamic dimension;
the ONNX file through TFLite too (tests/test_tflite_multi_io.py has the rest of TFLite's)."""

from __future__ import annotations

import inspect
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from torch import nn  # noqa: E402

from infer_compare import compare  # noqa: E402
from infer_compare.base.errors import UsageError  # noqa: E402
from infer_compare.base.records import load_report  # noqa: E402

from .conftest import PY, python_env  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated:FutureWarning")  # torch.jit in torch >= 2.10

FAST = dict(devices=["cpu"], precisions=["fp32"], warmup_iters=1, min_iters=3, min_time_s=0.02,
            max_time_s=0.1, warmup_time_s=0.02, parity_samples=8, calibration_samples=8)
OUTS = ["logits", "features"]


class TwoInTwoOut(nn.Module):
    """image [N, 3, 32, 32], vec [N, 8] -> logits [N, 10], features [N, 4, 8, 8]."""

    def __init__(self, sign: float = 1.0):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(8)
        self.vec = nn.Linear(8, 4)
        self.head = nn.Linear(4 * 8 * 8, 10)
        self.sign = sign  # -1: the same logits, the feature map negated (a wrong second output)

    def forward(self, image, vec):
        f = self.pool(torch.relu(self.conv(image))) + self.vec(vec)[:, :, None, None]
        return self.head(f.flatten(1)), f * self.sign


class WithIds(nn.Module):
    """image [N, 3, 32, 32], ids int64 [N, L] (L dynamic) -> logits [N, 10], pooled [N, 4]."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.emb = nn.Embedding(16, 4)
        self.head = nn.Linear(4, 10)

    def forward(self, image, ids):
        pooled = torch.relu(self.conv(image)).mean((2, 3)) + self.emb(ids).mean(1)
        return self.head(pooled), pooled


def export_onnx(model, args, path, inputs, outputs, axes) -> None:
    kw = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path), input_names=inputs, output_names=outputs, dynamic_axes=axes,
                          opset_version=17, **kw)


def net(sign: float = 1.0) -> TwoInTwoOut:
    torch.manual_seed(0)
    return TwoInTwoOut(sign).eval()


EXAMPLE = (torch.randn(2, 3, 32, 32), torch.randn(2, 8))


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """two.onnx (dynamic batch), bad.onnx (its feature map negated), two.pt (TorchScript), ids.onnx."""
    d = tmp_path_factory.mktemp("several")
    axes = {n: {0: "batch"} for n in ["image", "vec", *OUTS]}
    export_onnx(net(), EXAMPLE, d / "two.onnx", ["image", "vec"], OUTS, axes)
    export_onnx(net(-1.0), EXAMPLE, d / "bad.onnx", ["image", "vec"], OUTS, axes)
    torch.jit.save(torch.jit.script(net()), str(d / "two.pt"))
    torch.manual_seed(0)
    ids_axes = {"image": {0: "batch"}, "ids": {0: "batch", 1: "length"}, "logits": {0: "batch"},
                "pooled": {0: "batch"}}
    export_onnx(WithIds().eval(), (EXAMPLE[0], torch.zeros(2, 5, dtype=torch.int64)), d / "ids.onnx",
                ["image", "ids"], ["logits", "pooled"], ids_axes)
    return d


def rows_of(rep) -> dict:
    return {(r.backend, r.format, r.batch_size, r.variant): r for r in rep.rows}


def check_per_output(r, names: list[str], second_is_2d: bool = False) -> None:
    """Row ok, a parity figure per output: top-1 for [N, classes] outputs only (the first; the second where
    it is 2-D), the others judged on the error metrics alone."""
    assert r.status == "ok" and r.parity.passed, (r.label, r.reason)
    per = {p.output: p for p in r.parity.outputs}
    assert list(per) == names
    assert per[names[0]].top1_agreement == 1.0 and per[names[0]].cosine_min > 0.9999
    if second_is_2d:
        assert per[names[1]].top1_agreement == 1.0
    else:
        assert per[names[1]].top1_agreement is None and per[names[1]].top5_agreement is None
    assert per[names[1]].cosine_min > 0.9999 and per[names[1]].max_abs < 1e-3
    assert r.parity.output in names and r.parity.top1_agreement == 1.0


@pytest.fixture(scope="module")
def onnx_report(files, cache_dir):
    return compare(str(files / "two.onnx"), backends=["onnxruntime", "openvino", "tflite"],
                   formats=["onnx", "openvino", "tflite"], batch_sizes=[1, 4], cache_dir=cache_dir, **FAST)


def test_two_input_two_output_onnx_through_onnxruntime_and_openvino(onnx_report):
    rows = rows_of(onnx_report)
    for key in (("onnxruntime", "onnx", 1, ""), ("onnxruntime", "onnx", 4, ""),
                ("openvino", "openvino", 1, ""), ("openvino", "openvino", 4, "")):
        check_per_output(rows[key], OUTS)
    m = onnx_report.model
    assert [i["name"] for i in m.inputs] == ["image", "vec"] and m.inputs[1]["shape"] == ["batch", 8]
    assert [(o["name"], o["judged_on"]) for o in m.outputs] == [("logits", "top-1 and error metrics"),
                                                                ("features", "error metrics")]
    assert m.num_classes == 10 and any("output 'features' [4, 8, 8]" in n for n in m.notes)
    # ONNX -> TFLite (onnx2torch + litert-torch), outputs matched by shape
    tfl = rows[("tflite", "tflite", 1, "")]
    check_per_output(tfl, OUTS)
    assert tfl.options["outputs_matched"].startswith("by shape and order")


def test_the_report_shows_each_output(onnx_report, tmp_path):
    from infer_compare.base.records import Report
    from infer_compare.report import csv as csv_report
    from infer_compare.report import markdown

    again = Report.from_dict(onnx_report.to_dict())
    r = rows_of(again)[("onnxruntime", "onnx", 4, "")]
    assert [p.output for p in r.parity.outputs] == OUTS and r.parity.outputs[1].top1_agreement is None
    md = markdown.render(again)
    assert f"({r.parity.output})" in md and "inputs image 3x32x32 float32, vec 8 float32" in md
    line = next(x for x in csv_report.rows(again) if x["label"] == r.label)
    assert line["parity_output"] == r.parity.output and '"features"' in line["parity_per_output"]


def test_torchscript_through_pytorch_onnxruntime_and_openvino(files, cache_dir):
    rep = compare(str(files / "two.pt"), input_shape="image:1x3x32x32,vec:1x8",
                  formats=["pytorch", "onnx", "openvino"], batch_sizes=[1, 3], cache_dir=cache_dir, **FAST)
    rows = rows_of(rep)
    names = ["output_0", "output_1"]  # a TorchScript tuple's outputs, as the reference names them
    for runner, fmt in (("pytorch", "pytorch"), ("onnxruntime", "onnx"), ("openvino", "openvino")):
        for b in (1, 3):
            check_per_output(rows[(runner, fmt, b, "")], names)
    onnx_art = rows[("onnxruntime", "onnx", 1, "")].export
    assert onnx_art.options["inputs"] == ["image", "vec"] and onnx_art.options["outputs"] == names


def test_module_object_through_pytorch(cache_dir):
    """A module object with a tuple example input: exported with a dynamic batch, so batch 2 runs too."""
    rep = compare(net(), example_input=EXAMPLE, formats=["pytorch"], batch_sizes=[1, 2],
                  cache_dir=cache_dir, **FAST)
    rows = rows_of(rep)
    for b in (1, 2):
        check_per_output(rows[("pytorch", "pytorch", b, "")], ["output_0", "output_1"])


def test_a_wrong_second_output_fails_parity_naming_it(files, cache_dir):
    rep = compare(str(files / "two.onnx"), backends=["onnxruntime"], formats=["onnx"], batch_sizes=[2],
                  artifacts=[str(files / "bad.onnx")], cache_dir=cache_dir, **FAST)
    rows = rows_of(rep)
    check_per_output(rows[("onnxruntime", "onnx", 2, "")], OUTS)
    bad = rows[("onnxruntime", "onnx", 2, "user:bad.onnx")]
    assert bad.status == "parity_failed" and bad.reason.startswith("output 'features': ")
    assert bad.parity.output == "features" and not bad.parity.passed
    per = {p.output: p for p in bad.parity.outputs}
    assert per["logits"].passed and per["logits"].top1_agreement == 1.0
    assert not per["features"].passed and per["features"].cosine_min < -0.99
    assert rep.failed


def test_int64_ids_keep_their_dtype_and_input_shape_sizes_a_dynamic_dim(files, cache_dir, tmp_path):
    from infer_compare.base.cache import Cache
    from infer_compare.prepare.user import prepare_user_model

    path = str(files / "ids.onnx")
    with pytest.raises(UsageError, match="input 'ids' has a dynamic dimension 1"):
        prepare_user_model(path, cache=Cache(tmp_path / "c"))
    prep = prepare_user_model(path, input_shape="ids:1x6", parity_samples=8, cache=Cache(tmp_path / "c"))
    ids = prep.ds.eval["ids"]
    assert ids.dtype == np.int64 and ids.shape == (8, 6) and set(np.unique(ids)) <= {0, 1}
    assert prep.ds.eval["image"].dtype == np.float32 and prep.ds.calibration["ids"].dtype == np.int64
    assert any("ids: seeded random int64" in n for n in prep.notes)
    out = tmp_path / "out"
    p = subprocess.run([PY, "-m", "infer_compare.cli", "--model", path, "--input-shape", "ids:1x6",
                        "--formats", "onnx,openvino", "--precisions", "fp32", "-b", "2",
                        "--parity-samples", "8", "--min-time", "0.02", "--max-time", "0.1", "--min-iters",
                        "3", "--warmup", "1", "--device", "cpu", "-q", "-o", str(out),
                        "--cache-dir", str(cache_dir)],
                       env=python_env(), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    rows = rows_of(load_report(out / "results.json"))
    for key in (("onnxruntime", "onnx", 2, ""), ("openvino", "openvino", 2, "")):
        check_per_output(rows[key], ["logits", "pooled"], second_is_2d=True)


def test_npz_data_feeds_each_input_by_name(files, tmp_path):
    from infer_compare.base.cache import Cache
    from infer_compare.prepare.inputs import DataOptions
    from infer_compare.prepare.user import prepare_user_model

    rng = np.random.default_rng(1)
    npz = tmp_path / "inputs.npz"
    np.savez(npz, vec=rng.standard_normal((12, 8)), image=rng.standard_normal((12, 3, 32, 32)),
             labels=rng.integers(0, 10, 12))
    prep = prepare_user_model(str(files / "two.onnx"), data=DataOptions(data=str(npz)), calibration_samples=4,
                              cache=Cache(tmp_path / "c"))
    assert list(prep.ds.eval) == ["image", "vec"] and len(prep.ds.eval["vec"]) == 8
    assert prep.ds.eval["vec"].dtype == np.float32 and len(prep.ds.calibration["image"]) == 4
    assert list(prep.ref) == OUTS and prep.ref["features"].shape == (8, 4, 8, 8)
    with pytest.raises(UsageError, match="give --data inputs.npz with one array per input name"):
        prepare_user_model(str(files / "two.onnx"), data=DataOptions(data=str(tmp_path)),
                           cache=Cache(tmp_path / "c"))


def test_parity_per_output_judges_the_worst():
    from infer_compare.catalog.formats import TOLERANCES
    from infer_compare.parity import outputs as parity

    rng = np.random.default_rng(0)
    ref = {"logits": rng.standard_normal((6, 10)), "boxes": rng.standard_normal((6, 4, 5))}
    same = parity.compare_outputs(ref, dict(ref), TOLERANCES["fp32"])
    assert same.passed and [p.output for p in same.outputs] == ["logits", "boxes"] and \
        same.top1_agreement == 1.0
    off = parity.compare_outputs(ref, {"logits": ref["logits"], "boxes": ref["boxes"] + 0.3},
                                 TOLERANCES["fp32"])
    assert not off.passed and off.output == "boxes" and off.reason.startswith("output 'boxes': ")
    assert off.outputs[0].passed and off.top1_agreement == 1.0
    by_pos = parity.compare_outputs(ref, {"a": ref["logits"], "b": ref["boxes"]}, TOLERANCES["fp32"])
    assert by_pos.passed and "matched by position" in by_pos.note
    lacking = parity.compare_outputs(ref, {"logits": ref["logits"]}, TOLERANCES["fp32"])
    assert not lacking.passed and "output 'boxes': the row gave no such output" in lacking.reason
