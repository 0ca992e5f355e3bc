"""A stream model in a bundle (issue 35): a model whose rows are consecutive frames through a state (its
outputs depend on how rows are grouped) is judged, on the device, against the reference computed in groups of
each row's batch size, which the bundle carries; a batch size it does not carry is refused before
measuring."""

from __future__ import annotations

import json

import pytest

from .conftest import FAST


def smoother():
    """A small CNN whose class scores are smoothed over the frames of the batch (a running mean over rows, as
    a video model that keeps a state across frames): the scores of frame i depend on frames 0..i of its
    group."""
    import torch

    torch.manual_seed(0)

    class Smoother(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, stride=4)
            self.fc = torch.nn.Linear(8, 10)

        def forward(self, x):
            f = self.fc(torch.relu(self.conv(x)).mean((2, 3)))
            n = torch.arange(1, f.shape[0] + 1, dtype=f.dtype).unsqueeze(1)
            return torch.cumsum(f, 0) / n

    return Smoother().eval()


@pytest.mark.slow
def test_a_stream_bundle_is_judged_at_each_batch_size_and_refuses_others(tmp_path, cache_dir, capsys):
    pytest.importorskip("onnxruntime")
    from infer_compare.bundle.run import run_bundle
    from infer_compare.cli import main

    torch = pytest.importorskip("torch")
    onnx_file = tmp_path / "smoother.onnx"
    torch.onnx.export(smoother(), (torch.zeros(2, 3, 64, 64),), str(onnx_file), input_names=["frames"],
                      output_names=["scores"], dynamic_axes={"frames": {0: "batch"}, "scores": {0: "batch"}},
                      dynamo=False)
    out = tmp_path / "b"
    assert main(["export", "--model", str(onnx_file), "--formats", "onnx", "--precisions", "fp32",
                 "--max-batch", "8", "--parity-samples", "16", "--cache-dir", str(cache_dir), "-o", str(out),
                 "-q"]) == 0
    man = json.loads((out / "manifest.json").read_text())
    assert man["stream"] == {"batches": [1, 2, 4, 8]} and "reference_b8" in man["data"]
    rep = run_bundle(out, backends=["onnxruntime"], devices=["cpu"], batch_sizes=[1, 8], **FAST,
                     max_time_s=0.2)
    rows = {r.batch_size: r for r in rep.rows if r.backend == "onnxruntime" and r.precision == "fp32"}
    assert set(rows) == {1, 8} and all(r.status == "ok" for r in rows.values()), \
        [r.reason for r in rows.values()]
    assert all(r.parity.cosine_min > 0.9999 for r in rows.values())
    assert main(["run", str(out), "--backends", "onnxruntime", "-b", "3", "-q"]) == 2
    assert "carries references for batch sizes 1, 2, 4, 8 only" in capsys.readouterr().err
