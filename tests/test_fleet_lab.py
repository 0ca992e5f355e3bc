"""The fleet as a lab user meets it, without a cluster: a lost node's configurations as failed rows (one per
configuration) and its cells counted by the banner."""

from __future__ import annotations

import pytest

from infer_compare.bundle import export_bundle
from infer_compare.fleet.executor import Job, JobResult
from infer_compare.fleet.local import LocalExecutor
from infer_compare.fleet.run import run_fleet
from infer_compare.report.common import incomplete_banner

from .conftest import FAST

KW = dict(backends=["onnxruntime"], devices=["cpu"], batch_sizes=[1], threads=1, **FAST)


@pytest.fixture(scope="module")
def bundle(cache_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("fleet-lab") / "lenet5"
    export_bundle("lenet5", out, formats=["onnx"], precisions=["fp32", "fp16"], cache_dir=cache_dir)
    return out


@pytest.fixture(scope="module")
def report(bundle):
    (res,) = LocalExecutor().run(str(bundle), [Job("x", KW)], lambda n, m: None)
    assert not res.error, res.error
    return res.report


class _Lose:
    """Node ``lost`` dies (no report); every other node replays a real report."""

    def __init__(self, report: dict, lost: str):
        self.report, self.lost = report, lost

    def run(self, bundle, jobs, on_event):
        return [JobResult(j, error=f"node {j.label}: NodeDiedError: Task failed because the node it was running on "
                          "is dead or unavailable") if j.target == self.lost else JobResult(j, self.report) for j in jobs]


def test_a_lost_node_lists_each_configuration_failed_and_the_banner_counts_its_cells(bundle, report):
    """node-b (CPU, ONNX Runtime and OpenVINO) dies: its 4 configurations (2 runtimes x fp32/fp16 of the
    bundle) are 4 failed rows naming it, its 8 cells (2 batch sizes each) are listed as not run, and the
    banner says so; node-a's rows are kept."""
    kw_b = {**KW, "backends": ["onnxruntime", "openvino"], "batch_sizes": [1, 4], "devices": None}
    jobs = [Job("node-a", KW, {"ic-node:node-a": 1.0}),
            Job("node-b", kw_b, {"ic-node:node-b": 1.0}, runtimes=("onnxruntime", "openvino", "pytorch"))]
    merged, _ = run_fleet(str(bundle), _Lose(report, "node-b"), jobs, lambda n, m: None, ["x"])
    failed = [r for r in merged.rows if r.status == "run_failed"]
    assert sorted((r.backend, r.format, r.precision, r.device) for r in failed) == [
        ("onnxruntime", "onnx", "fp16", "node-b:cpu"), ("onnxruntime", "onnx", "fp32", "node-b:cpu"),
        ("openvino", "onnx", "fp16", "node-b:cpu"), ("openvino", "onnx", "fp32", "node-b:cpu")]
    assert all("node node-b" in r.reason and "NodeDiedError" in r.reason and r.extra["machine"] == "node-b"
               for r in failed)
    lost = [x for x in merged.not_run if x.startswith("node-b:")]
    assert len(lost) == 8 and "node-b:openvino/onnx/fp16/cpu/b4" in lost
    banner = incomplete_banner(merged)
    assert f"{len(merged.not_run)} cells did not run" in banner and len(merged.not_run) >= 8
    assert "node-b: node node-b" in banner and any(r.device == "node-a:cpu" and r.status == "ok" for r in merged.rows)


def test_a_lost_node_without_a_runtime_lists_only_what_it_would_have_run(bundle, report):
    jobs = [Job("a", KW, {"ic-node:a": 1.0}),
            Job("b", {**KW, "backends": ["onnxruntime", "openvino"]}, {"ic-node:b": 1.0}, runtimes=("onnxruntime",))]
    merged, _ = run_fleet(str(bundle), _Lose(report, "b"), jobs, lambda n, m: None, ["x"])
    failed = [r for r in merged.rows if r.status == "run_failed"]
    assert {r.backend for r in failed} == {"onnxruntime"} and len(failed) == 2  # fp32, fp16
    assert sorted(x for x in merged.not_run if x.startswith("b:")) == ["b:onnxruntime/onnx/fp16/cpu/b1",
                                                                       "b:onnxruntime/onnx/fp32/cpu/b1"]
