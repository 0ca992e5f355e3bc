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
            assert p in PRECISIONS
            assert f.tolerance(p) == f.tolerances.get(p, TOLERANCES[p])
            src = f.source_of(f.artifact_for(p))
            assert src is None or src[0] in FORMATS and src[1] in PRECISIONS


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_build_chain_reaches_pytorch(fmt):
    for p in FORMATS[fmt].precisions:
        chain = build_chain(fmt, p)
        assert chain[0][0] == "pytorch" and chain[-1][0] == fmt


def test_openvino_bf16_runs_the_fp32_ir():
    assert build_chain("openvino", "bf16")[-1] == ("openvino", "fp32")
    assert build_chain("edgetpu", "int8")[-2:] == [("tflite", "int8"), ("edgetpu", "int8")]


def test_every_device_kind_is_known():
    from infer_compare.device_kinds import DEVICE_KINDS

    for r in RUNNERS.values():
        for k in r.device_kinds:
            assert k in DEVICE_KINDS
