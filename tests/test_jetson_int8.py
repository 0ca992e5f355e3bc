"""A Jetson int8 bundle: one consistent TensorRT build path in export, run and the format table.

TensorRT takes only symmetric int8 Q/DQ, so its int8 engine is built on the device from the bundle's
own S8S8 file (onnx int8-s8s8), while the CPU rows keep the CPU's int8 file. TensorRT cannot run
here: the engine build is checked as far as static means go (the exporter's own symmetric-int8 check
on the shipped file)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from infer_compare.base.errors import ExportError

from .conftest import PY, python_env

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "infer_compare", *args], capture_output=True, text=True,
                          env=python_env(), timeout=900)


@pytest.fixture(scope="module")
def jetson_bundle(cache_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("jetson") / "lenet5-int8"
    p = _cli("export", "--model", "lenet5", "--formats", "onnx,tensorrt", "--precisions", "int8",
             "--onnx-int8-reduce-range", "on", "--out", str(out), "--cache-dir", str(cache_dir), "-q")
    assert p.returncode == 0, p.stderr
    return out


def _artifact(man: dict, fmt: str, prec: str) -> dict:
    hits = [a for a in man["artifacts"] if a["format"] == fmt and a["precision"] == prec]
    assert hits, [(a["format"], a["precision"]) for a in man["artifacts"]]
    return hits[0]


def test_tensorrt_int8_is_deferred_to_the_symmetric_file_the_bundle_carries(jetson_bundle):
    from infer_compare.backends.onnxruntime.graph import int8_recipe
    from infer_compare.backends.tensorrt.export import check_symmetric_int8
    from infer_compare.catalog.formats import TRT_INT8

    man = json.loads((jetson_bundle / "manifest.json").read_text())
    deferred = {(d["format"], d["precision"]): d for d in man["deferred"]}
    assert deferred[("tensorrt", "int8")]["source"] == ["onnx", TRT_INT8]
    trt_src = _artifact(man, "onnx", TRT_INT8)
    cpu = _artifact(man, "onnx", "int8")
    # the engine's source: symmetric int8 activations, full 8-bit weights, whatever the CPU file's recipe
    r = int8_recipe(onnx.load(str(jetson_bundle / trt_src["path"])))
    assert r["scheme"] == "S8S8" and r["weight_bits"] == 8
    assert trt_src["export"]["options"]["scheme"] == "S8S8" and \
        trt_src["export"]["options"]["reduce_range"] is False
    check_symmetric_int8(str(jetson_bundle / trt_src["path"]))  # what the TensorRT exporter checks first
    # the CPU rows' file follows --onnx-int8-reduce-range on: U8S8 with 7-bit weights, and says so
    r = int8_recipe(onnx.load(str(jetson_bundle / cpu["path"])))
    assert r["scheme"] == "U8S8" and r["weight_bits"] == 7
    # the same file as auto's on a CPU that saturates (one cache key: the resolved choice), so either reason
    assert cpu["export"]["options"]["reduce_range"] is True
    assert cpu["export"]["options"]["reduce_range_reason"].startswith(("on (--onnx-int8-reduce-range on)",
                                                                       "auto: on"))
    assert "built_on_cpu" in cpu["export"]["options"]
    with pytest.raises(ExportError, match="uint8"):
        check_symmetric_int8(str(jetson_bundle / cpu["path"]))


def test_run_refuses_flags_that_describe_how_artifacts_are_built(jetson_bundle):
    p = _cli("run", str(jetson_bundle), "--onnx-int8-scheme", "S8S8", "--verify-only")
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--onnx-int8-scheme" in lines[0] and \
        "infer-compare export" in lines[0], p.stderr


def test_export_help_offers_the_artifact_options_and_not_the_runtime_ones():
    p = _cli("export", "--help")
    assert p.returncode == 0
    for flag in ("--onnx-int8-scheme", "--onnx-int8-reduce-range", "--onnx-int8-calibration",
                 "--tflite-int8"):
        assert flag in p.stdout, flag
    assert "--cuda-graphs" not in p.stdout and "--openvino-performance-hint" not in p.stdout
