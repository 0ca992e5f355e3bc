"""The export's exit status: 1 when an artifact asked for is not in the bundle (a build that failed, or a
format named in --formats that cannot be built here), each one named on stderr, and the bundle written all
the same; --allow-partial accepts it (0); what the default selection cannot have here is no failure."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from infer_compare.backends.exporter import Exporter
from infer_compare.base.records import Availability
from infer_compare.bundle import verify
from infer_compare.cli import main
from infer_compare.cli.compare import export_status, missing_asked

from .conftest import python_env


class BrokenExporter(Exporter):
    """An exporter whose conversion raises, as a converter bug does (resolved in the export child)."""

    @classmethod
    def probe(cls):
        return Availability(True, version="test")

    def export(self, ctx, source, out_dir, precision):
        raise RuntimeError("the quantizer broke on purpose")


def _patch_formats(monkeypatch, **exporters: str) -> None:
    """Each format's exporter replaced ("module:Class"); FORMAT__PRECISION: one artifact precision's only."""
    from infer_compare.catalog import formats

    table = dict(formats.FORMATS)
    for key, path in exporters.items():
        name, _, prec = key.partition("__")
        f = table[name]
        table[name] = (dataclasses.replace(f, exporters={**f.exporters, prec: path}) if prec
                       else dataclasses.replace(f, exporter=path))
    monkeypatch.setattr(formats, "FORMATS", table)
    monkeypatch.setenv("PYTHONPATH", python_env()["PYTHONPATH"])  # the export child finds this module


def _export(tmp_path: Path, cache_dir: Path, *flags: str) -> tuple[int, Path]:
    out = tmp_path / "bundle"
    return main(["export", "--model", "lenet5", "-q", "--cache-dir", str(cache_dir), "-o", str(out),
                 *flags]), out


@pytest.fixture
def broken_int8(monkeypatch):
    _patch_formats(monkeypatch, onnx__int8=f"{__name__}:BrokenExporter")


@pytest.mark.parametrize("partial", [False, True], ids=["strict", "allow-partial"])
def test_a_failed_build_is_named_and_exits_1_unless_partial_is_allowed(broken_int8, tmp_path, cache_dir,
                                                                       capsys, partial):
    code, out = _export(tmp_path, cache_dir, "--formats", "onnx", "--precisions", "fp32,int8",
                        *(["--allow-partial"] if partial else []))
    err = capsys.readouterr().err
    assert code == (0 if partial else 1), err
    line = next(x for x in err.splitlines() if x.startswith("infer-compare: onnx int8 failed to build: "))
    assert "RuntimeError: the quantizer broke on purpose" in line
    assert f"bundle {out} written without 1 of 2 artifacts asked for" in err
    assert ("accepted by --allow-partial" if partial else "(--allow-partial accepts it)") in err
    v = verify(out)  # written, complete but for the failed artifact, and its hashes hold
    assert [(a["format"], a["precision"]) for a in v.manifest["artifacts"]] == [("onnx", "fp32")]
    assert [(d["format"], d["precision"], d["status"]) for d in v.manifest["not_built"]] == [
        ("onnx", "int8", "export_failed")]


def test_a_clean_export_exits_0(tmp_path, cache_dir, capsys):
    code, out = _export(tmp_path, cache_dir, "--formats", "onnx", "--precisions", "fp32")
    err = capsys.readouterr().err
    assert code == 0, err
    assert "failed to build" not in err and "written without" not in err
    assert json.loads((out / "manifest.json").read_text())["not_built"] == []


def test_software_absent_is_a_skip_unless_its_format_was_named(tmp_path, cache_dir, capsys, monkeypatch):
    """OpenVINO's and TFLite's exporters absent from this build: the default selection leaves them out with
    exit 0 (TensorRT is left to the device); naming TFLite in --formats makes its absence a failure."""
    absent = "infer_compare_absent_exporter:Exporter"
    _patch_formats(monkeypatch, openvino=absent, tflite=absent)
    code, out = _export(tmp_path, cache_dir, "--precisions", "fp32")
    cap = capsys.readouterr()
    assert code == 0, cap.err
    man = json.loads((out / "manifest.json").read_text())
    skipped = {(d["format"], d["precision"]): d for d in man["not_built"]}
    assert set(skipped) == {("openvino", "fp32"), ("tflite", "fp32")}
    assert all(d["status"] == "skipped" and d["skip_kind"] == "unavailable" for d in skipped.values())
    assert "  tflite fp32: not in the bundle (" in cap.out and "written without" not in cap.err

    code, out = _export(tmp_path / "named", cache_dir, "--formats", "onnx,tflite", "--precisions", "fp32")
    err = capsys.readouterr().err
    assert code == 1, err
    said = "infer-compare: tflite fp32 was asked for and not built: the tflite exporter is not available"
    assert said in err
    assert f"bundle {out} written without 1 of 2 artifacts asked for" in err
    assert verify(out).manifest["artifacts"][0]["format"] == "onnx"


def _manifest(*not_built: dict, formats=(), precisions=()) -> dict:
    return {"not_built": list(not_built),
            "selection": {"formats": list(formats), "precisions": list(precisions),
                          "exported": [["onnx", "fp32"], ["onnx", "int8"]]}}


def test_which_skips_count():
    """A format this model cannot have counts when --formats or --precisions named it; software missing
    here only when --formats did; a failed build always."""
    unsupported = {"format": "onnx", "precision": "int8", "status": "skipped", "skip_kind": "unsupported",
                   "reason": "already quantized"}
    unavailable = {**unsupported, "skip_kind": "unavailable", "reason": "not installed"}
    failed = {"format": "onnx", "precision": "int8", "status": "export_failed", "reason": "crashed"}
    assert missing_asked(_manifest(unsupported)) == []
    assert missing_asked(_manifest(unsupported, precisions=["int8"])) == [unsupported]
    assert missing_asked(_manifest(unsupported, formats=["onnx"])) == [unsupported]
    assert missing_asked(_manifest(unavailable, precisions=["int8"])) == []
    assert missing_asked(_manifest(unavailable, formats=["onnx"])) == [unavailable]
    assert missing_asked(_manifest(failed)) == [failed]


def test_a_full_disk_exits_1_even_with_allow_partial(capsys):
    full = {"format": "onnx", "precision": "int8", "status": "export_failed",
            "reason": "ONNX int8 export failed: disk full (ENOSPC) under /tmp"}
    assert export_status(_manifest(full), "b", allow_partial=True) == 1
    assert "free space and export again" in capsys.readouterr().err
