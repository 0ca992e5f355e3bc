"""Planning (selection, defaults, cells) and the artifact chain, with fake exporters:
no model, no runtime."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from infer_compare.artifacts.chain import ArtifactChain, ModelSource, Unbuilt
from infer_compare.backends.exporter import ExportContext, Exporter, ExportResult
from infer_compare.base.cache import Cache
from infer_compare.base.errors import ExportError, UsageError
from infer_compare.base.records import EXPORT_FAILED, SKIPPED, Availability, ModelInfo
from infer_compare.catalog import formats
from infer_compare.measure.plan import Cell, make_selection, parse_batch_sizes, plan_cells

PRESENT = {"cpu": ["cpu"], "cuda": [], "edgetpu": []}


# ---------------------------------------------------------------------------- planning


def test_batch_size_lists():
    assert parse_batch_sizes("1, 8,8,32") == (1, 8, 32)
    for bad in ("", "1,,2", "0", "x", "1.5", "5000"):
        with pytest.raises(UsageError):
            parse_batch_sizes(bad)


@pytest.mark.parametrize("kw", [dict(backends=[]), dict(formats=[" "]), dict(precisions=[]), dict(devices=[]),
                                dict(batch_sizes="")])
def test_empty_lists_are_usage_errors(kw):
    with pytest.raises(UsageError):
        make_selection(**kw)


def test_unknown_names_get_a_suggestion():
    with pytest.raises(UsageError, match="did you mean 'openvino'"):
        make_selection(backends=["openvno"])
    with pytest.raises(UsageError, match="unknown device 'gpu'"):
        make_selection(devices=["gpu"])
    make_selection(devices=["cuda:1", "edgetpu", "cpu"])


def test_default_plan_covers_every_listed_runner_and_kind_in_table_order():
    cells = plan_cells(PRESENT, make_selection())
    runners_in_order = list(dict.fromkeys(c.runner for c in cells))
    assert runners_in_order[0] == "pytorch" and "null" not in runners_in_order
    assert Cell("onnx", "onnxruntime", "fp32", "cpu", "cpu") in cells
    assert Cell("tensorrt", "tensorrt", "fp32", "cuda", None) in cells  # absent device: a skipped row later
    fmts = [c.fmt for c in cells]
    assert fmts == sorted(fmts, key=list(formats.FORMATS).index)


def test_selection_narrows_the_plan_and_devices_pick_concrete_ones():
    sel = make_selection(backends=["onnxruntime"], precisions=["fp32"], devices=["cuda"])
    cells = plan_cells({"cpu": ["cpu"], "cuda": ["cuda:0", "cuda:1"], "edgetpu": []}, sel)
    assert cells == [Cell("onnx", "onnxruntime", "fp32", "cuda", "cuda:0")]
    sel = make_selection(backends=["onnxruntime"], precisions=["fp32"])
    cells = plan_cells({"cpu": ["cpu"], "cuda": ["cuda:0", "cuda:1"], "edgetpu": []}, sel)
    assert [c.device for c in cells] == ["cpu", "cuda:0", "cuda:1"]
    with pytest.raises(UsageError, match="leaves nothing"):
        plan_cells(PRESENT, make_selection(backends=["openvino"], formats=["tflite"]))


def test_default_batch_sizes_come_from_the_device_table():
    sel = make_selection()
    assert sel.batch_sizes_by_kind() == {"cpu": (1, 8), "cuda": (1, 32, 256), "edgetpu": (1,)}
    assert make_selection(batch_sizes=[4]).batch_sizes_by_kind()["cuda"] == (4,)


# ------------------------------------------------------------------- the artifact chain

CALLS: list[tuple[str, str, str | None]] = []


class _Fake(Exporter):
    fail: str = ""

    @classmethod
    def probe(cls):
        return Availability(True, version="1")

    def export(self, ctx, source, out_dir: Path, precision):
        CALLS.append((type(self).__name__, precision, source and Path(source).name))
        if self.fail == "crash":
            raise RuntimeError("converter exploded")
        if self.fail == "export":
            raise ExportError("the converter said no")
        p = out_dir / f"model-{precision}.bin"
        p.write_bytes(b"x" * 10)
        return ExportResult(str(p))


class FakeOnnx(_Fake):
    pass


class FakeIR(_Fake):
    pass


class CrashingIR(_Fake):
    fail = "crash"


class MissingIR(_Fake):
    @classmethod
    def probe(cls):
        return Availability(False, "openvino is not installed", "pip install openvino")

    @classmethod
    def explain_unavailable(cls, ctx, source, precision):
        return f"a pre-check of {Path(source).name} says 3 of 4 ops would map"


def _chain(tmp_path, monkeypatch, ir: str) -> ArtifactChain:
    here = __name__
    table = dict(formats.FORMATS)
    table["onnx"] = dataclasses.replace(table["onnx"], exporter=f"{here}:FakeOnnx", exporters={}, sources={})
    table["openvino"] = dataclasses.replace(table["openvino"], exporter=f"{here}:{ir}", exporters={},
                                            sources={})
    monkeypatch.setattr(formats, "FORMATS", table)
    weights = tmp_path / "w.pt"
    weights.write_bytes(b"w")
    info = ModelInfo("m", "fake", "random", "", "h" * 12, (1, 8, 8), 10)
    ctx = ExportContext(model=None, model_name="m", input_shape=(1, 8, 8), num_classes=10, calibration=None)
    return ArtifactChain(ctx, Cache(tmp_path / "cache"), ModelSource(info, str(weights), 0.1, "calib-digest"),
                         isolated=False)


def test_chain_builds_sources_first_once_and_reuses_the_cache(tmp_path, monkeypatch):
    CALLS.clear()
    chain = _chain(tmp_path, monkeypatch, "FakeIR")
    ir8 = chain.get("openvino", "int8")
    ir32 = chain.get("openvino", "fp32")
    assert not isinstance(ir8, Unbuilt) and not ir8.cached and ir8.source.endswith("model-fp32.bin")
    assert [c[:2] for c in CALLS] == [("FakeOnnx", "fp32"), ("FakeIR", "int8"), ("FakeIR", "fp32")]
    assert chain.get("openvino", "int8") is ir8 and ir32.size_bytes == 10
    again = _chain(tmp_path, monkeypatch, "FakeIR").get("openvino", "int8")
    assert again.cached and again.path == ir8.path and len(CALLS) == 3  # the second run built nothing


def test_unavailable_exporter_is_a_typed_skip_with_its_explanation(tmp_path, monkeypatch):
    got = _chain(tmp_path, monkeypatch, "MissingIR").get("openvino", "fp32")
    assert isinstance(got, Unbuilt) and got.status == SKIPPED
    assert "openvino is not installed" in got.reason and "3 of 4 ops" in got.reason
    assert got.hint == "pip install openvino"


def test_crashing_exporter_is_export_failed_and_dependents_say_why(tmp_path, monkeypatch):
    chain = _chain(tmp_path, monkeypatch, "CrashingIR")
    got = chain.get("openvino", "fp16")
    assert isinstance(got, Unbuilt) and got.status == EXPORT_FAILED and "converter exploded" in got.reason
    assert not isinstance(chain.get("onnx", "fp32"), Unbuilt)  # the source is still fine


def test_missing_root_weights_skip_everything_built_from_them(tmp_path, monkeypatch):
    chain = _chain(tmp_path, monkeypatch, "FakeIR")
    chain.model = dataclasses.replace(chain.model, weights_path=None)
    got = chain.get("openvino", "fp32")
    assert isinstance(got, Unbuilt) and "needs the onnx fp32 artifact" in got.reason


def test_int8_keys_carry_the_calibration_set(tmp_path, monkeypatch):
    chain = _chain(tmp_path, monkeypatch, "FakeIR")
    src = chain.get("onnx", "fp32")
    f = formats.FORMATS["openvino"]
    k8 = chain.cache_parts(f, "int8", FakeIR, chain.ctx, src)
    k32 = chain.cache_parts(f, "fp32", FakeIR, chain.ctx, src)
    assert k8["calibration"] == "calib-digest" and "calibration" not in k32
