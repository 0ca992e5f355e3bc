"""An ONNX file that is already quantized (ddddocr's old recognizer: ConvInteger, DynamicQuantizeLinear, a
quantized LSTM) is measured as it is: its fp16 and int8 conversions are refused in one line (skipped rows,
not an internal KeyError), its rows are judged at the int8 tolerance, and the run exits 0."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from infer_compare.models.user_onnx import quantized_ops


def _old_recognizer() -> Path:
    spec = importlib.util.find_spec("ddddocr")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("ddddocr is not installed (scripts/setup.sh --dev installs it with --no-deps)")
    return Path(next(iter(spec.submodule_search_locations))) / "common_old.onnx"


def test_the_quantization_operators_are_counted():
    ops = quantized_ops(str(_old_recognizer()))
    assert ops == {"DynamicQuantizeLinear": 22, "ConvInteger": 21, "DynamicQuantizeLSTM": 1,
                   "MatMulInteger": 1}
    new = Path(_old_recognizer()).with_name("common.onnx")
    assert quantized_ops(str(new)) == {}  # the float recognizer of the same package


@pytest.mark.slow
def test_a_quantized_file_is_measured_as_it_is_and_not_converted_again(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    from infer_compare.cli import main

    code = main(["--model", str(_old_recognizer()), "--input-shape", "input1:1x1x64x256", "--backends",
                 "onnxruntime,openvino" if importlib.util.find_spec("openvino") else "onnxruntime",
                 "--device", "cpu", "-b", "1", "--min-time", "0.05", "--max-time", "0.2",
                 "--parity-samples", "4", "-o", str(tmp_path / "out"), "--cache-dir",
                 str(tmp_path / "cache"), "-q"])
    out = capsys.readouterr().out
    assert code == 0, out
    from infer_compare import load_report

    rep = load_report(tmp_path / "out" / "results.json")
    rows = {(r.format, r.precision): r for r in rep.rows if r.device == "cpu" and r.backend == "onnxruntime"}
    assert rows[("onnx", "fp32")].status == "ok"
    # the row is called fp32 (the file as it is) and says what ran: the file's integer kernels
    assert rows[("onnx", "fp32")].exec_precision.startswith("int8: ")
    assert rows[("onnx", "fp32")].exec_precision.endswith("nodes integer (quantized in the file itself)")
    ov = [r for r in rep.rows if r.backend == "openvino" and r.format == "openvino" and r.precision == "fp32"]
    # OpenVINO turns the file's dynamic quantization into u8 conversions and convolves in float: said so
    if ov:
        assert ov[0].status == "ok" and "int8" not in ov[0].exec_precision, ov[0].exec_precision
        assert any(n.startswith("the file's integer ops run as u8 conversions (Convert x")
                   and "Convolution 21" in n for n in ov[0].notes), ov[0].notes
    assert rows[("onnx", "fp32")].parity.tolerance["min_cosine"] == 0.95  # judged as the int8 file it is
    for prec in ("fp16", "int8"):
        skipped = rows[("onnx", prec)]
        assert skipped.status == "skipped" and skipped.skip_kind == "unsupported"
        assert skipped.reason.startswith("the file is already quantized (DynamicQuantizeLinear x22, "
                                         "ConvInteger x21")
        assert "\n" not in skipped.reason and "KeyError" not in skipped.reason
    assert any("already quantized" in n for n in rep.notes)
