"""merge: one comparison of one model across machines, rows labelled by machine."""

from __future__ import annotations

import json
import subprocess

import pytest

from infer_compare.base.errors import UsageError
from infer_compare.base.records import (
    OK,
    SCHEMA_VERSION,
    SKIPPED,
    Environment,
    LatencyStats,
    ModelInfo,
    ParityResult,
    Report,
    RunRecord,
    Settings,
    load_report,
)
from infer_compare.report.merge import machine_label, merge_reports, slug

from .conftest import PY, python_env


def _env(cpu: str, gpus=(), facts=None) -> Environment:
    return Environment("abc", "Linux", "6.1", "x86_64", "CPython 3.11.7", cpu, ("avx2",), 2, 4, 24.0, "0.1.0",
                       {"numpy": "2.4.6", "onnxruntime": "1.31.1" if not gpus else "1.30.0"}, tuple(gpus),
                       dict(facts or {}))


def _report(env: Environment, device: str, p50: float, model="resnet50", warnings=()) -> Report:
    lat = LatencyStats.from_samples_ns([int(p50 * 1e6)] * 5)
    par = ParityResult(32, 1e-5, 1e-6, 1e-6, 1.0, 1.0, 1.0, 1.0)
    rows = (
        RunRecord("onnxruntime", "onnx", "fp32", device, 1, OK, latency=lat, throughput=1000 / p50,
                  parity=par, samples_ns=(int(p50 * 1e6),) * 5),
        RunRecord("tensorrt", "tensorrt", "fp16", "cuda", None, SKIPPED, reason="no CUDA device found"),
    )
    minfo = ModelInfo(model, "torchvision", "random", "seed 0", "h" * 16, (3, 224, 224), 1000)
    settings = Settings({"cpu": (1, 8), "cuda": (1, 32, 256)}, 2, 3, 10, 1.0, 32, 600.0)
    return Report(SCHEMA_VERSION, "0.1.0", "2026-11-21T10:00:00+0000", ("infer-compare",), minfo, env,
                  settings, rows, tuple(warnings), ("a note",), 12.0)


CPU = _env("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz")
GPU = _env("AMD EPYC 9454 48-Core Processor", gpus=[{"name": "NVIDIA H200", "memory_mib": 143771}])
ORIN = _env("ARMv8 Processor rev 1 (v8l)", gpus=[{"name": "Orin (nvgpu)"}],
            facts={"jetson": {"model": "NVIDIA Jetson AGX Orin Developer Kit", "l4t": "36.4.3",
                              "jetpack": "6.2", "power_mode": "MAXN", "clocks_locked": True}})


def test_machine_labels():
    assert machine_label(CPU) == "xeon-platinum-8481c"
    assert machine_label(GPU) == "h200"
    assert machine_label(ORIN) == "jetson-agx-orin"
    assert machine_label(_env("AMD EPYC 7B13 64-Core Processor")) == "epyc-7b13"
    assert (machine_label(_env("", facts={"raspberry_pi": "Raspberry Pi 5 Model B Rev 1.0"}))
            == "raspberry-pi-5-b")
    assert slug("") == "machine"


def test_merge_labels_rows_and_keeps_each_environment():
    m = merge_reports([_report(CPU, "cpu", 40.0), _report(GPU, "cuda:0", 2.0, warnings=("slow clocks",))],
                      sources=["cpu.json", "gpu.json"])
    devs = [r.device for r in m.rows]
    assert devs == ["xeon-platinum-8481c:cpu", "xeon-platinum-8481c:cuda", "h200:cuda:0", "h200:cuda"]
    assert (set(m.machines) == {"xeon-platinum-8481c", "h200"}
            and m.machines["h200"].gpus[0]["name"] == "NVIDIA H200")
    assert m.warnings == ("h200: slow clocks",)
    assert m.environment.libraries["onnxruntime"] == "1.31.1 (xeon-platinum-8481c), 1.30.0 (h200)"
    assert m.environment.libraries["numpy"] == "2.4.6"
    assert any("cpu.json" in n and "gpu.json" in n for n in m.notes)
    assert m.rows[2].latency.p50_ms == pytest.approx(2.0)  # rows are carried unchanged but for the device
    back = Report.from_dict(json.loads(json.dumps(m.to_dict())))
    assert back == m


def test_labels_given_and_duplicates_disambiguated():
    m = merge_reports([_report(CPU, "cpu", 40.0), _report(CPU, "cpu", 41.0), _report(ORIN, "cuda:0", 9.0)],
                      labels=["ws before", None])
    assert [r.device for r in m.rows if r.batch_size] == ["ws-before:cpu", "xeon-platinum-8481c:cpu",
                                                          "jetson-agx-orin:cuda:0"]
    m = merge_reports([_report(CPU, "cpu", 40.0), _report(CPU, "cpu", 41.0)])
    assert list(m.machines) == ["xeon-platinum-8481c", "xeon-platinum-8481c-2"]


def test_different_models_are_refused():
    with pytest.raises(UsageError, match="different models"):
        merge_reports([_report(CPU, "cpu", 40.0), _report(GPU, "cuda:0", 2.0, model="lenet5")])
    with pytest.raises(UsageError, match="labels"):
        merge_reports([_report(CPU, "cpu", 40.0)], labels=["a", "b"])


def test_cli_merge_writes_every_report(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _report(CPU, "cpu", 40.0).save(a)
    _report(GPU, "cuda:0", 2.0).save(b)
    out = tmp_path / "merged"
    r = subprocess.run([PY, "-m", "infer_compare.cli", "merge", str(a), str(b), "--out", str(out),
                        "--label", "ws", "--label", "gpu-box"],
                       capture_output=True, text=True, env=python_env())
    assert r.returncode == 0, r.stderr
    rep = load_report(out / "results.json")
    assert {x.device for x in rep.rows if x.batch_size} == {"ws:cpu", "gpu-box:cuda:0"}
    md = (out / "results.md").read_text()
    assert "gpu-box:cuda:0" in md and "ws:cpu" in md
    for f in ("results.csv", "results.html"):
        assert (out / f).is_file() and "gpu-box:cuda:0" in (out / f).read_text()
    bad = subprocess.run([PY, "-m", "infer_compare.cli", "merge", str(a), str(tmp_path / "nope.json"),
                          "--out", str(out)], capture_output=True, text=True, env=python_env())
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
