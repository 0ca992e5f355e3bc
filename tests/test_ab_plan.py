"""The A/B gate measures the baseline's plan: every configuration bundle A carries is measured on A, and one
that the candidate B lacks, failed to build or cannot load fails the gate on that row (exit 1, the row
named), unless accepted by name (--allow-missing LABEL). A configuration only B has is listed as new.
Real LeNet-5 bundles, the CLI as a CI job runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infer_compare import load_report

OV_ROW = "openvino/openvino/fp32/cpu/b1"
ORT_ROW = "onnxruntime/onnx/fp32/cpu/b1"

# the OpenVINO exporter made to fail in the export's processes (a broken converter in the candidate's
# environment): the bundle is written without the IR, its manifest says export_failed
BROKEN_EXPORT = '''
from infer_compare.backends.openvino import export as _m
def export(self, *a, **k):
    raise RuntimeError("the converter broke")
_m.OpenVinoExporter.export = export
'''
# side B's OpenVINO runner cannot load its artifact
NO_LOAD = '''
from infer_compare.backends.openvino import run as _m
def load(self, *a, **k):
    raise RuntimeError("this runtime cannot read the IR")
_m.OpenVinoRunner.load = load
'''


def _site(tmp: Path, name: str, text: str) -> dict[str, str]:
    site = tmp / f"site-{name}"
    site.mkdir()
    (site / "sitecustomize.py").write_text(text)
    return {**os.environ, "PYTHONPATH": str(site)}


def _export(out: Path, formats: str, env: dict[str, str] | None = None, *extra: str) -> None:
    r = subprocess.run([sys.executable, "-m", "infer_compare", "export", "--model", "lenet5", "--formats",
                        formats, "--precisions", "fp32", "-o", str(out), "-q", *extra], capture_output=True,
                       text=True, timeout=600, env=env)
    assert (out / "manifest.json").exists(), r.stdout[-2000:] + r.stderr[-2000:]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    root = tmp_path_factory.mktemp("plan")
    _export(root / "a", "onnx,openvino")
    _export(root / "b-onnx-only", "onnx")
    return root


@pytest.fixture(scope="module")
def broken(bundles):
    _export(bundles / "b-broken", "onnx,openvino", _site(bundles, "broken", BROKEN_EXPORT), "--allow-partial",
            "--no-cache")
    return bundles / "b-broken"


def _gate(a: Path, b: Path, out: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    # the plan's verdicts only: no timing rule, so that the exit status says what the plan did, not a p50
    # verdict of one process pair of unchanged code (wrong now and then by design: its interval does not
    # cover the difference between two processes)
    cmd = [sys.executable, "-m", "infer_compare", "gate", str(a), str(b), "--backends",
           "onnxruntime,openvino", "--formats", "onnx,openvino", "--precisions", "fp32", "--device", "cpu",
           "-b", "1", "--threads", "1", "--replicates", "1", "--pairs", "6", "--fail-on", "accuracy:-0.5",
           "-o", str(out), "-q", *extra]
    g = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"})
    got = json.loads((out / "gate.json").read_text()) if (out / "gate.json").exists() else {}
    return g, got


def _missing(got: dict, label: str) -> list[str]:
    return [v for v in got.get("violations", []) if v.startswith(label + ":")]


def test_a_candidate_that_dropped_a_configuration_fails_on_that_row(bundles, tmp_path):
    g, got = _gate(bundles / "a", bundles / "b-onnx-only", tmp_path / "g")
    said = g.stdout + g.stderr
    assert g.returncode == 1, said[-3000:]
    gone = _missing(got, OV_ROW)
    assert gone and "not in bundle B" in gone[0] and f"--allow-missing {OV_ROW}" in gone[0], got
    assert OV_ROW in said
    # the baseline's row was measured (alone) and says nothing of B
    a = {r.label: r for r in load_report(tmp_path / "g" / "baseline" / "results.json").rows}
    assert a[OV_ROW].status == "ok" and "bundle B" not in a[OV_ROW].reason
    b = {r.label: r for r in load_report(tmp_path / "g" / "results.json").rows}
    assert b[OV_ROW].status == "skipped" and "not in bundle B" in b[OV_ROW].reason
    assert a[ORT_ROW].status == b[ORT_ROW].status == "ok"


def test_the_missing_row_is_accepted_by_name_and_only_by_name(bundles, tmp_path):
    g, got = _gate(bundles / "a", bundles / "b-onnx-only", tmp_path / "other", "--allow-missing",
                   "tensorrt/*")
    assert g.returncode == 1 and _missing(got, OV_ROW), g.stdout[-3000:]
    g, got = _gate(bundles / "a", bundles / "b-onnx-only", tmp_path / "named", "--allow-missing",
                   "openvino/*")
    assert not _missing(got, OV_ROW) and g.returncode != 1, g.stdout[-3000:] + g.stderr[-2000:]
    assert any(x.startswith(OV_ROW) for x in got["accepted_missing"]), got


def test_a_configuration_only_the_candidate_has_is_listed_as_new(bundles, tmp_path):
    g, got = _gate(bundles / "b-onnx-only", bundles / "a", tmp_path / "g")
    assert not _missing(got, OV_ROW) and g.returncode != 1, g.stdout[-3000:] + g.stderr[-2000:]
    rep = load_report(tmp_path / "g" / "results.json")
    assert OV_ROW not in {r.label for r in rep.rows if r.status == "ok"}  # not measured: A has no such plan
    assert any(n.startswith("new in bundle B") and "openvino fp32" in n for n in rep.notes), rep.notes


def test_a_candidate_whose_artifact_failed_to_build_fails_on_that_row(bundles, broken, tmp_path):
    man = json.loads((broken / "manifest.json").read_text())
    assert any(d.get("format") == "openvino" and d.get("status") == "export_failed"
               for d in man["not_built"]), man["not_built"]
    g, got = _gate(bundles / "a", broken, tmp_path / "g")
    assert g.returncode == 1, g.stdout[-3000:] + g.stderr[-2000:]
    gone = _missing(got, OV_ROW)
    assert gone and "was ok, now export_failed" in gone[0] and "the converter broke" in gone[0], got
    g, got = _gate(bundles / "a", broken, tmp_path / "ok", "--allow-missing", OV_ROW)
    assert not _missing(got, OV_ROW) and g.returncode != 1, g.stdout[-3000:]


def test_a_candidate_whose_runtime_cannot_load_its_artifact_fails_on_that_row(bundles, tmp_path):
    env = _site(tmp_path, "noload", NO_LOAD)
    py = tmp_path / "python-b"
    py.write_text(f'#!/bin/sh\nPYTHONPATH="{env["PYTHONPATH"]}" exec "{sys.executable}" "$@"\n')
    py.chmod(0o755)
    g, got = _gate(bundles / "a", bundles / "a", tmp_path / "g", "--python-b", str(py))
    assert g.returncode == 1, g.stdout[-3000:] + g.stderr[-2000:]
    gone = _missing(got, OV_ROW)
    assert gone and "was ok, now run_failed" in gone[0] and "cannot read the IR" in gone[0], got
    assert not _missing(got, ORT_ROW)


# both sides' ONNX Runtime calls go through the same wrapper (a draw, two clock reads), so that the one
# difference between them is the stall: side B's stalls in 5 % of its calls (each of those three times as
# long), drawn with a seed; its median moves little, its p99 a lot. The wrapper's own cost is on both sides:
# with it on B alone, a slow CI machine judged B's median 6 % slower, the wrapper's cost in a 0.09 ms call
STALL = '''
import os, random, time
import onnxruntime as _ort
_run, _rng, _p = _ort.InferenceSession.run, random.Random(7), float(os.environ["STALL_P"])
def run(self, *a, **k):
    t0 = time.perf_counter()
    out = _run(self, *a, **k)
    spent = time.perf_counter() - t0
    if _rng.random() < _p:
        end = time.perf_counter() + 2 * spent
        while time.perf_counter() < end:
            pass
    return out
_ort.InferenceSession.run = run
'''


def test_a_stall_in_5_percent_of_calls_fails_the_p99_rule_and_not_the_median(bundles, tmp_path):
    env = _site(tmp_path, "stall", STALL)
    side = {}
    for name, p in (("a", 0.0), ("b", 0.05)):
        side[name] = tmp_path / f"python-{name}"
        side[name].write_text(f'#!/bin/sh\nSTALL_P={p} PYTHONPATH="{env["PYTHONPATH"]}" '
                              f'exec "{sys.executable}" "$@"\n')
        side[name].chmod(0o755)
    out = tmp_path / "g"
    a = str(bundles / "a")
    cmd = [sys.executable, "-m", "infer_compare", "gate", a, a, "--backends", "onnxruntime", "--formats",
           "onnx", "--precisions", "fp32", "--device", "cpu", "-b", "1", "--threads", "1", "--python-a",
           str(side["a"]), "--python-b", str(side["b"]), "--fail-on", "p50:+5%", "--fail-on", "p99:+10%",
           "-o", str(out), "-q"]
    g = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"})
    got = json.loads((out / "gate.json").read_text())
    checks = {c["rule"]: c for c in got["rows"][0]["checks"] if c["rule"].startswith("p")}
    assert checks["p99:+10%"]["verdict"] == "regression", (checks, g.stdout[-3000:])
    assert checks["p50:+5%"]["verdict"] != "regression", checks
    assert g.returncode == 1
    # a rule the gate cannot judge is refused before anything is measured
    r = subprocess.run([*cmd[:-3], "--fail-on", "max:+10%", "-o", str(tmp_path / "max"), "-q"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "cannot judge max" in r.stderr and not (tmp_path / "max").exists(), r.stderr
