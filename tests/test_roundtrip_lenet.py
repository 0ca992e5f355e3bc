"""LeNet-5 at its real size round-trips every format available here: export, run,
parity against the PyTorch reference, and real accuracy on the held-out digits."""

import numpy as np
import pytest

from infer_compare.base.records import OK, SKIPPED
from infer_compare.catalog.formats import FORMATS, RUNNERS, load_impl

CPU_FORMATS = ["pytorch", "onnx", "openvino"]


def _rows(rep, fmt):
    return [r for r in rep.rows if r.format == fmt and r.device == "cpu"]


@pytest.mark.parametrize("fmt", CPU_FORMATS)
def test_format_round_trip(lenet_report, fmt):
    rows = _rows(lenet_report, fmt)
    assert rows, f"no {fmt} rows"
    runner = FORMATS[fmt].runners[0]
    av = load_impl(RUNNERS[runner].impl).probe("cpu")
    if not av.available:
        pytest.skip(av.reason)
    measured = [r for r in rows if r.status != SKIPPED]
    assert measured, [r.reason for r in rows]
    for r in measured:
        assert r.status == OK, (r.label, r.reason)
        assert r.latency.count >= 5 and r.latency.p50_ms > 0 and r.throughput > 0
        assert r.export is not None and r.export.size_bytes > 0
        assert r.parity is not None and r.parity.n == 450
        assert r.parity.accuracy > 0.95, (r.label, r.parity.accuracy)  # trained LeNet-5 on held-out digits
        assert r.peak_rss_mb > 0 and r.load_s >= 0
        assert len(r.samples_ns) == r.latency.count


def test_reference_row_is_exact(lenet_report):
    ref = [r for r in lenet_report.rows if r.backend == "pytorch" and r.status == OK]
    assert ref and all(r.parity.max_abs < 1e-4 for r in ref)
    assert lenet_report.model.weights == "trained" and lenet_report.model.meaningful_top1


def test_openvino_precisions_are_labelled_truthfully(lenet_report):
    ov = {r.precision: r for r in _rows(lenet_report, "openvino") if r.status == OK and r.batch_size == 1}
    if "fp32" not in ov:
        pytest.skip("OpenVINO not available")
    assert ov["fp32"].exec_precision == "fp32"
    assert ov["fp32"].parity.rel_max < 1e-3
    if "bf16" in ov:
        assert ov["bf16"].exec_precision == "bf16"
        assert ov["bf16"].parity.max_abs > ov["fp32"].parity.max_abs  # bf16 really ran
    if "int8" in ov:
        assert ov["int8"].exec_precision.startswith("int8")
        assert ov["int8"].parity.top1_agreement > 0.97


def test_other_backends_appear_as_skipped_rows_with_reasons(lenet_report):
    """The fixture measures on the CPU only: every precision a CPU runner cannot run is a skipped
    row that says why (not a missing row)."""
    skipped = {(r.backend, r.format, r.precision): r for r in lenet_report.rows if r.status == SKIPPED}
    expected = {("pytorch", "pytorch", "fp16"), ("pytorch", "pytorch", "bf16"),
                ("onnxruntime", "onnx", "tf32")}
    assert expected <= set(skipped), sorted(skipped)
    for r in skipped.values():
        assert r.reason.strip() and r.skip_kind in ("unsupported", "unavailable", "no_device"), r
        if r.skip_kind == "unavailable":
            assert r.hint.strip(), r
    assert "CUDA" in skipped[("pytorch", "pytorch", "fp16")].reason


def test_full_table_has_every_format_as_a_row(cache_dir):
    """Every format and device kind of the table shows up: measured, or skipped with a reason."""
    from infer_compare import compare

    rep = compare("lenet5", backends=["pytorch", "tensorrt", "edgetpu", "onnxruntime-trt"], batch_sizes=[1],
                  cache_dir=cache_dir, warmup_iters=1, min_iters=2, min_time_s=0.0)
    seen = {(r.backend, r.device.split(":")[0]) for r in rep.rows}
    assert ("tensorrt", "cuda") in seen and ("edgetpu", "edgetpu") in seen and ("pytorch", "cuda") in seen
    for r in rep.rows:
        if r.backend in ("tensorrt", "edgetpu") or r.device.startswith("cuda"):
            if r.status == SKIPPED:
                assert r.reason


def test_cached_artifacts_are_reused(cache_dir, lenet_report):
    from infer_compare import compare

    rep = compare("lenet5", devices=["cpu"], formats=["onnx"], batch_sizes=[1], cache_dir=cache_dir,
                  warmup_iters=1, min_iters=2, min_time_s=0.0)
    r = next(r for r in rep.rows if r.status == OK)
    assert r.export.cached is True
    first = next(x for x in lenet_report.rows if x.format == "onnx" and x.status == OK)
    assert r.export.path == first.export.path


def test_batch_outputs_match_batch_one(lenet_report):
    """ONNX Runtime at batch 4 (the last chunk padded) gives the outputs of batch 1: parity over the
    same 450 digits (the fixture asks for parity in every batch) agrees to rounding."""
    rows = {r.batch_size: r for r in _rows(lenet_report, "onnx") if r.backend == "onnxruntime"
            and r.precision == "fp32"}
    assert set(rows) == {1, 4} and all(r.status == OK for r in rows.values()), rows
    p1, p4 = rows[1].parity, rows[4].parity
    assert p1.n == p4.n == 450
    assert p1.accuracy == p4.accuracy and p1.top1_agreement == p4.top1_agreement == 1.0
    assert np.isclose(p1.max_abs, p4.max_abs, atol=1e-4) and p4.max_abs < 1e-3
