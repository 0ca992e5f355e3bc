"""The format table is the single source of truth: check that it is consistent."""

import pytest

from infer_compare.formats import FORMATS, PRECISIONS, RUNNERS, TOLERANCES, build_chain


def test_every_runner_and_source_exists():
    for f in FORMATS.values():
        assert f.runners, f.name
        for r in f.runners:
            assert r in RUNNERS, (f.name, r)
        if f.built_from is not None:
            assert f.built_from in FORMATS
        for p in f.precisions:
            assert p in PRECISIONS and f.tolerance(p) is TOLERANCES[p] or p in f.tolerances


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_build_chain_reaches_pytorch(fmt):
    for p in FORMATS[fmt].precisions:
        chain = build_chain(fmt, p)
        assert chain[0][0] == "pytorch" and chain[-1][0] == fmt


def test_openvino_bf16_runs_the_fp32_ir():
    assert build_chain("openvino", "bf16")[-1] == ("openvino", "fp32")
    assert build_chain("edgetpu", "int8")[-2:] == [("tflite", "int8"), ("edgetpu", "int8")]


def test_every_device_kind_is_known():
    from infer_compare.api import DEFAULT_BATCH_SIZES

    for r in RUNNERS.values():
        for k in r.device_kinds:
            assert k in DEFAULT_BATCH_SIZES
