"""The format table is the single source of truth: check that it is consistent."""

import pytest

from infer_compare.catalog.formats import FORMATS, PRECISIONS, RUNNERS, TOLERANCES, build_chain


def test_every_runner_and_source_exists():
    for f in FORMATS.values():
        assert f.runners, f.name
        for r in f.runners:
            assert r in RUNNERS, (f.name, r)
        if f.built_from is not None:
            assert f.built_from in FORMATS
        for p in f.precisions:
            assert p in PRECISIONS
            assert f.tolerance(p) == f.tolerances.get(p, TOLERANCES[p])
            src = f.source_of(f.artifact_for(p))
            # a row precision, or an artifact precision of its own that the source format builds (int8-s8s8)
            assert src is None or src[0] in FORMATS and (
                src[1] in PRECISIONS or src[1] in FORMATS[src[0]].exporters), src


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_build_chain_reaches_pytorch(fmt):
    for p in FORMATS[fmt].precisions:
        chain = build_chain(fmt, p)
        assert chain[0][0] == "pytorch" and chain[-1][0] == fmt


def test_openvino_bf16_runs_the_fp32_ir():
    assert build_chain("openvino", "bf16")[-1] == ("openvino", "fp32")
    assert build_chain("edgetpu", "int8")[-2:] == [("tflite", "int8"), ("edgetpu", "int8")]


def test_every_device_kind_is_known():
    from infer_compare.catalog.device_kinds import DEVICE_KINDS

    for r in RUNNERS.values():
        for k in r.device_kinds:
            assert k in DEVICE_KINDS


def test_tensorrt_int8_is_built_from_the_symmetric_int8_file():
    """TensorRT takes only symmetric int8 Q/DQ: its engines and ONNX Runtime's TensorRT EP run the S8S8 file
    (TRT_INT8), while the CPU rows keep the CPU's int8 file; each has its own artifact (and cache key)."""
    from infer_compare.catalog.formats import TRT_INT8, build_chain, get_format

    assert build_chain("tensorrt", "int8") == [("pytorch", "fp32"), ("onnx", "fp32"), ("onnx", TRT_INT8),
                                               ("tensorrt", "int8")]
    onnx = get_format("onnx")
    assert onnx.artifact_for("int8", "onnxruntime-trt") == TRT_INT8
    assert onnx.artifact_for("int8", "onnxruntime") == onnx.artifact_for("int8") == "int8"
    assert onnx.exporter_for(TRT_INT8) == onnx.exporter_for("int8")
