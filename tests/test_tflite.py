"""TFLite: LeNet-5 export (litert-torch) -> LiteRT run -> parity for fp32, fp16 and full-integer int8.

The int8 file is proven full-integer by reading its tensors and ops; the Edge TPU rows
skip with their reasons on a machine without a Coral accelerator.
"""

from __future__ import annotations

import numpy as np
import pytest

from infer_compare.backends.tflite.run import dequantize, quantize
from infer_compare.catalog import deps

from .conftest import FAST


def _need_tflite():
    from infer_compare.backends.tflite.export import TFLiteExporter
    from infer_compare.backends.tflite.run import TFLiteRunner

    for av in (TFLiteExporter.probe(), TFLiteRunner.probe("cpu")):
        if not av.available:
            pytest.skip(f"{av.reason} ({av.hint})")


@pytest.fixture(scope="module")
def tflite_report(cache_dir):
    _need_tflite()
    from infer_compare import compare

    return compare("lenet5", formats=["tflite", "edgetpu"], batch_sizes=[1, 8], cache_dir=cache_dir,
                   calibration_samples=64, **FAST)


def _row(report, precision, batch=1, backend="tflite"):
    rows = [r for r in report.rows if r.backend == backend and r.precision == precision
            and (r.batch_size == batch or r.batch_size is None)]
    assert rows, f"no {backend} {precision} row in {[r.label for r in report.rows]}"
    return rows[0]


def test_quantize_roundtrip():
    x = np.linspace(-3, 3, 101, dtype=np.float32)
    q = quantize(x, 0.05, -3, np.int8)
    assert q.dtype == np.int8
    back = dequantize(q, 0.05, -3)
    assert np.abs(back - x).max() <= 0.025 + 1e-6  # half a step
    assert q.min() == -63 and q.max() == 57  # round(x / scale) + zero_point
    # clipping: values below the int8 range saturate
    assert quantize(np.array([-100.0], np.float32), 0.05, 0, np.int8)[0] == -128


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
def test_lenet_tflite_rows_pass_parity(tflite_report, precision):
    r = _row(tflite_report, precision)
    assert r.status == "ok", (r.status, r.reason, r.extra)
    assert r.parity is not None and r.parity.n == tflite_report.settings.parity_samples
    assert r.latency is not None and r.latency.count >= FAST["min_iters"]
    if precision == "int8":  # which ops XNNPACK took, read from the interpreter's own op list
        k = r.extra["kernels"]
        n = sum(k["xnnpack"].values())
        assert n > 0 and r.exec_precision == f"int8 (XNNPACK {n} of {n + sum(k['builtin'].values())} ops)"
        assert r.options["kernels"].startswith(f"XNNPACK runs {n} of ")
    else:
        assert r.exec_precision == "fp32"
    assert r.options["interpreter"].startswith(("ai_edge_litert", "tflite_runtime"))
    assert r.options["input"].startswith("NHWC")
    if precision in ("fp32", "fp16"):  # the float file was run beside its module once (convert_check.py)
        assert r.export.options["off_its_module"] <= 1e-3
    if precision == "fp32":
        assert r.parity.cosine_mean > 0.99999 and r.parity.top1_agreement == 1.0
    elif precision == "fp16":
        assert r.parity.cosine_mean > 0.9999 and r.parity.top1_agreement >= 0.99
    else:
        assert r.parity.cosine_mean > 0.99 and r.parity.top1_agreement >= 0.97
        assert r.options["input_quantization"]["scale"] > 0
    # real accuracy on the held-out digits stays within 1.5 points of PyTorch FP32
    assert r.parity.accuracy is not None and r.parity.reference_accuracy is not None
    assert r.parity.accuracy >= r.parity.reference_accuracy - 0.015


@pytest.mark.slow
def test_static_batch_is_a_stated_skip(tflite_report):
    r = _row(tflite_report, "fp32", batch=8)
    assert r.status == "skipped" and "static batch of 1" in r.reason


@pytest.mark.slow
def test_int8_file_is_full_integer(tflite_report):
    from infer_compare.backends.tflite.common import inspect_model

    r = _row(tflite_report, "int8")
    assert r.export is not None and r.export.options["full_integer"] is True
    info = inspect_model(r.export.path)
    assert info["full_integer"], info["problems"]
    assert set(info["tensor_dtypes"]) <= {"int8", "int32"}
    assert "DEQUANTIZE" not in info["ops"] and not info["float_ops"]
    assert info["io"]["inputs"][0]["dtype"] == "int8" and info["io"]["outputs"][0]["dtype"] == "int8"
    assert info["io"]["inputs"][0]["shape"] == [1, 32, 32, 1]  # NHWC, batch 1
    assert {"CONV_2D", "FULLY_CONNECTED"} <= set(info["ops"])
    assert r.extra.get("full_integer") is True  # the runner reports it in the row too


@pytest.mark.slow
def test_full_integer_check_rejects_float_files(tflite_report):
    """The checker can fail: the fp16 file (float16 weights, DEQUANTIZE, float ops) is not full-integer."""
    from infer_compare.backends.tflite.common import inspect_model

    info = inspect_model(_row(tflite_report, "fp16").export.path)
    assert not info["full_integer"]
    assert info["ops"].get("DEQUANTIZE", 0) > 0 and "float16" in info["tensor_dtypes"]
    assert any("float ops" in p for p in info["problems"])
    assert any("not int8" in p for p in info["problems"])


@pytest.mark.slow
def test_edgetpu_rows_skip_with_reason(tflite_report):
    from infer_compare.catalog.device_kinds import edgetpu_devices

    if edgetpu_devices():
        pytest.skip("a Coral Edge TPU is present: the rows run (see tests/test_edgetpu.py)")
    rows = [r for r in tflite_report.rows if r.backend == "edgetpu"]
    assert rows and all(r.status == "skipped" for r in rows)
    assert all("Edge TPU" in r.reason and r.hint for r in rows)


def test_runner_probe_is_cheap_and_honest():
    from infer_compare.backends.tflite.run import TFLiteRunner

    av = TFLiteRunner.probe("cpu")
    if deps.has("ai_edge_litert") or deps.has("tflite_runtime"):
        assert av.available or av.reason
    else:
        assert not av.available and "ai-edge-litert" in av.hint
    assert not TFLiteRunner.probe("cuda:0").available


def test_large_int8_is_opt_in(monkeypatch):
    """ResNet-50-sized int8 conversions are skipped with a reason unless asked for."""
    torch = pytest.importorskip("torch")
    from infer_compare.backends.exporter import ExportContext
    from infer_compare.backends.tflite import export as tfl
    from infer_compare.base.errors import BackendUnavailable

    monkeypatch.delenv(tfl.OPT_IN_ENV, raising=False)
    monkeypatch.setattr("infer_compare.catalog.device_kinds.edgetpu_devices", lambda: [])
    big = torch.nn.Linear(4000, 3000)  # 12 M parameters
    ctx = ExportContext(model=big, model_name="big", input_shape=(3, 8, 8), num_classes=10, calibration=None)
    with pytest.raises(BackendUnavailable) as e:
        tfl._check_int8_opt_in(ctx)
    assert "only on request" in e.value.reason and "--precisions int8" in e.value.hint
    ctx.requested = {"formats": ["tflite"], "precisions": ["int8"]}
    tfl._check_int8_opt_in(ctx)  # explicitly requested: allowed
    ctx.requested = {"backends": ["onnxruntime", "tflite"], "precisions": ["fp32", "int8"]}
    tfl._check_int8_opt_in(ctx)  # named by --backends as well (issue 38: it was skipped "only on request")
    ctx.requested = {"backends": ["onnxruntime"], "precisions": ["int8"]}
    with pytest.raises(BackendUnavailable):  # int8 asked for another backend only
        tfl._check_int8_opt_in(ctx)
    ctx.requested = {}
    from infer_compare.backends.tflite.options import TFLiteOptions

    ctx.options = TFLiteOptions(int8=True)  # the runner option --tflite-int8
    tfl._check_int8_opt_in(ctx)
    ctx.options = TFLiteOptions()
    monkeypatch.setenv(tfl.OPT_IN_ENV, "1")
    tfl._check_int8_opt_in(ctx)
    monkeypatch.delenv(tfl.OPT_IN_ENV)
    monkeypatch.setattr("infer_compare.catalog.device_kinds.edgetpu_devices", lambda: ["edgetpu:usb:0"])
    tfl._check_int8_opt_in(ctx)  # an Edge TPU is present: built by default
    tfl._check_int8_opt_in(ExportContext(model=torch.nn.Linear(10, 10), model_name="small", input_shape=(1,),
                                         num_classes=10, calibration=None))


def test_a_float_file_off_its_module_says_so():
    """The check's figure (convert_check.py) becomes a note where the file is off its module, none where it is
    not."""
    from infer_compare.backends.tflite.export import _check_notes

    assert _check_notes({"off_its_module": 2e-6}) == [] and _check_notes({}) == []
    (note,) = _check_notes({"off_its_module": 0.46})
    assert note.startswith("the converted file is off its own PyTorch module by 0.46 of the largest output")


def test_the_check_compares_the_file_with_its_module():
    import torch

    from infer_compare.backends.tflite.convert_check import off_by

    module = torch.nn.Linear(4, 3).eval()
    sample = (torch.ones(1, 4),)
    with torch.no_grad():
        right = module(*sample).numpy()
    assert off_by(lambda x: right, module, sample) == 0.0
    scale = float(np.abs(right).max())
    assert off_by(lambda x: right + 0.5 * scale, module, sample) == pytest.approx(0.5)
    assert off_by(lambda x: right[:, :2], module, sample) is None  # not paired here: io_map pairs it


def test_constants_are_made_contiguous_in_storage_of_their_own():
    import torch

    from infer_compare.backends.tflite.convert_check import contiguous_constants

    shared = torch.nn.Linear(4, 6)
    # a transposed view, as onnx2torch keeps a MatMul's
    shared.weight = torch.nn.Parameter(torch.randn(4, 6).t())
    model = torch.nn.Sequential(shared, torch.nn.ReLU(), torch.nn.Linear(6, 6))
    model.register_buffer("table", torch.arange(12.0).reshape(3, 4).t())
    x = torch.randn(2, 4)
    with torch.no_grad():
        before = model(x)
    assert contiguous_constants(model) == 2
    assert all(p.is_contiguous() for p in model.parameters()) and model.table.is_contiguous()
    with torch.no_grad():
        # the same values (a GEMM on another layout may round differently)
        assert torch.allclose(model(x), before, atol=1e-6)
    tied = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))
    tied[1].weight = tied[0].weight
    tied[0].weight.data = tied[0].weight.data.t()
    assert contiguous_constants(tied) == 1 and tied[1].weight is tied[0].weight
