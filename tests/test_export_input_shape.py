"""``export --input-shape``: a .onnx file whose input leaves sizes open is exported at the shape given, as the
main command measures it; without it the error names the option, which export accepts."""

from __future__ import annotations

import json

import pytest


def _open_sized(path):
    """A small CNN exported with its height and width left open (as RapidOCR's classifier leaves its
    width)."""
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, stride=2), torch.nn.ReLU(),
                              torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3)).eval()
    torch.onnx.export(net, (torch.zeros(1, 3, 32, 48),), str(path), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "n", 2: "h", 3: "w"}, "y": {0: "n"}}, dynamo=False)


@pytest.mark.slow
def test_an_onnx_file_with_open_sizes_is_exported_at_the_shape_given(tmp_path, cache_dir, capsys):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("torch")
    from infer_compare.cli import main

    onnx_file = tmp_path / "open.onnx"
    _open_sized(onnx_file)
    base = ["export", "--model", str(onnx_file), "--formats", "onnx", "--precisions", "fp32", "--max-batch",
            "4", "--parity-samples", "8", "--cache-dir", str(cache_dir), "-q"]
    assert main([*base, "-o", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "--input-shape" in err and "dynamic dimension" in err
    out = tmp_path / "b"
    assert main([*base, "--input-shape", "x:1x3x40x56", "-o", str(out)]) == 0
    man = json.loads((out / "manifest.json").read_text())
    assert man["input"]["shape"] == [3, 40, 56]  # a sample's shape: the batch is the run's
    assert main(["run", str(out), "--backends", "onnxruntime", "--device", "cpu", "-b", "2", "--max-time",
                 "0.1", "--min-time", "0.02", "-q", "-o", str(tmp_path / "r")]) == 0
    rows = json.loads((tmp_path / "r" / "results.json").read_text())["rows"]
    assert any(r["backend"] == "onnxruntime" and r["status"] == "ok" and r["batch_size"] == 2 for r in rows)
