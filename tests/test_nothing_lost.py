"""Nothing measured is lost or overwritten, and doing nothing is no success: a second run into one output
folder keeps the first one's results (a dated folder beside it), merge refuses to write over a measured
run's results, SIGHUP (the terminal closing) saves the rows measured so far marked incomplete and exits
129, and a run, gate or diff that measured or compared no row exits non-zero with its reason.

The model is a tiny ONNX file (an image input of 3 x 8 x 8: the bundled photos feed it) measured on ONNX
Runtime's fp32 row alone; the SIGHUP run is LeNet-5's, as tests/test_faults.py interrupts it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from infer_compare.base.records import load_report

from .conftest import PY, python_env

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

FAST = ["--device", "cpu", "--backends", "onnxruntime", "--precisions", "fp32", "-b", "1",
        "--min-time", "0.05", "--max-time", "0.3", "--min-iters", "3", "--warmup", "1", "-q"]


def tiny_image_onnx(path: Path) -> Path:
    """[N, 3, 8, 8] -> mean over H, W -> [N, 3] x [3, 5]: a five-class 'classifier' of 8 x 8 images."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32), "W")
    axes = numpy_helper.from_array(np.array([2, 3], np.int64), "axes")
    g = helper.make_graph([helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=0),
                           helper.make_node("MatMul", ["m", "W"], ["y"])], "tiny",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])], [w, axes])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def cli(*args, cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "infer_compare.cli", *map(str, args)], env=python_env(), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, cache_dir) -> Path:
    return tiny_image_onnx(tmp_path_factory.mktemp("tiny") / "tiny.onnx")


@pytest.fixture(scope="module")
def bundle(tiny, tmp_path_factory, cache_dir) -> Path:
    """An ONNX-only bundle of the tiny model."""
    out = tmp_path_factory.mktemp("bundle") / "b"
    p = cli("export", "--model", tiny, "--formats", "onnx", "--precisions", "fp32", "-o", out, "-q",
            "--cache-dir", cache_dir)
    assert p.returncode == 0, p.stderr
    return out


def test_a_second_run_into_one_folder_keeps_both(tiny, tmp_path, cache_dir):
    out = tmp_path / "results"
    first = cli("--model", tiny, *FAST, "-o", out, "--cache-dir", cache_dir)
    assert first.returncode == 0, first.stderr
    before = (out / "results.json").read_bytes()
    second = cli("--model", tiny, *FAST, "-o", out, "--cache-dir", cache_dir)
    assert second.returncode == 0, second.stderr
    assert (out / "results.json").read_bytes() == before, "the second run replaced the first one's results"
    siblings = [p for p in tmp_path.iterdir() if p.name.startswith("results-")]
    assert len(siblings) == 1 and re.fullmatch(r"results-\d{4}-\d\d-\d\dT\d{4}(-\d+)?", siblings[0].name)
    assert load_report(siblings[0] / "results.json").rows
    said = [ln for ln in second.stderr.splitlines() if "earlier run" in ln]
    assert len(said) == 1 and str(siblings[0]) in said[0] and "--overwrite" in said[0], second.stderr
    third = cli("--model", tiny, *FAST, "-o", out, "--overwrite", "--cache-dir", cache_dir)
    assert third.returncode == 0, third.stderr
    assert (out / "results.json").read_bytes() != before and "replacing" in third.stderr
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("results-")]) == 1


def test_merge_refuses_to_overwrite_results_it_did_not_write(tiny, tmp_path, cache_dir):
    run = tmp_path / "run"
    p = cli("--model", tiny, *FAST, "-o", run, "--cache-dir", cache_dir)
    assert p.returncode == 0, p.stderr
    before = {f.name: f.read_bytes() for f in run.iterdir()}
    for target in (run, tmp_path / "elsewhere"):  # the measured file itself, then a copy of it elsewhere
        if target != run:
            target.mkdir()
            (target / "results.json").write_bytes(before["results.json"])
        m = cli("merge", run / "results.json", "-o", target)
        assert m.returncode == 2, m.stderr
        assert len(m.stderr.strip().splitlines()) == 1 and "Traceback" not in m.stderr, m.stderr
        assert "--overwrite" in m.stderr
    assert {f.name: f.read_bytes() for f in run.iterdir()} == before, "merge wrote over a measured run"
    merged = tmp_path / "merged"
    assert cli("merge", run / "results.json", "-o", merged).returncode == 0
    again = cli("merge", run / "results.json", "-o", merged)  # an earlier merge's files: replaced, said
    assert again.returncode == 0 and "replacing the earlier merge" in again.stderr, again.stderr
    forced = cli("merge", run / "results.json", "-o", tmp_path / "elsewhere", "--overwrite")
    assert forced.returncode == 0, forced.stderr
    assert load_report(tmp_path / "elsewhere" / "results.json").command[:2] == ("infer-compare", "merge")


def _read_rows(stream, printed: list[str], lines: list[str], first: threading.Event) -> None:
    """The measured rows the progress display prints ('  ok LABEL: p50 ...'), as they come."""
    for line in stream:
        lines.append(line)
        m = re.match(r"\s+(?:ok|parity_failed) (\S+): p50", line)
        if m:
            printed.append(m.group(1))
            first.set()


def test_sighup_saves_the_rows_measured_marked_incomplete(tmp_path, cache_dir):
    """A real SIGHUP to a real run once its first row is printed: exit 129, every printed row in
    results.json, the report incomplete "interrupted by SIGHUP", one line saying so."""
    out = tmp_path / "out"
    cmd = [PY, "-m", "infer_compare.cli", "--model", "lenet5", "--device", "cpu", "--formats", "pytorch,onnx",
           "--precisions", "fp32", "-b", "1,2,4", "--min-time", "3", "--max-time", "3", "--target-ci", "0",
           "-o", str(out), "--cache-dir", str(cache_dir)]
    # a SIGHUP ignored by whatever started the tests (nohup) stays ignored in the run, by design: the run is
    # started as from a terminal
    proc = subprocess.Popen(cmd, env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    printed: list[str] = []
    lines: list[str] = []
    first = threading.Event()
    reader = threading.Thread(target=_read_rows, args=(proc.stderr, printed, lines, first), daemon=True)
    reader.start()
    try:
        assert first.wait(600) and proc.poll() is None, \
            f"the run ended ({proc.poll()}) before its first row could be printed: {''.join(lines[-5:])}"
        proc.send_signal(signal.SIGHUP)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(10)
    assert proc.returncode == 129, "".join(lines[-5:])
    assert "interrupted (SIGHUP" in "".join(lines[-5:])
    rep = load_report(out / "results.json")
    assert rep.complete is False and "SIGHUP" in rep.incomplete_reason and rep.not_run
    saved = {r.label for r in rep.rows if r.status in ("ok", "parity_failed")}
    assert printed and set(printed) <= saved, (printed, saved)
    assert "incomplete" in (out / "results.md").read_text().lower()


def test_an_empty_run_exits_non_zero_with_its_reason(bundle, tmp_path):
    p = cli("run", bundle, "--formats", "tflite", "-o", tmp_path / "r", "-q")
    assert p.returncode == 1, p.stderr
    said = [ln for ln in p.stderr.splitlines() if "no row was measured" in ln]
    assert len(said) == 1 and "TFLite fp32 is not in this bundle" in said[0], p.stderr


def test_an_empty_gate_is_not_a_pass(bundle, tmp_path):
    p = cli("gate", bundle, bundle, "--formats", "tflite", "-o", tmp_path / "g", "-q")
    assert p.returncode == 3, p.stdout + p.stderr
    assert "no regression" not in p.stdout and "NOTHING COMPARED" in p.stdout
    assert "nothing was compared" in p.stderr
    assert json.loads((tmp_path / "g" / "gate.json").read_text())["rows_compared"] == 0


def test_a_diff_against_a_baseline_without_rows_is_not_a_pass(bundle, tmp_path):
    run = tmp_path / "run"
    p = cli("run", bundle, *FAST, "-o", run)
    assert p.returncode == 0, p.stderr
    empty = json.loads((run / "results.json").read_text())
    empty["rows"] = []
    (tmp_path / "empty.json").write_text(json.dumps(empty))
    d = cli("diff", tmp_path / "empty.json", run / "results.json")
    assert d.returncode == 3, d.stdout + d.stderr
    assert "no regression" not in d.stdout and "nothing was compared" in d.stderr
    same = cli("diff", run / "results.json", run / "results.json", "--allow-unjudged")
    assert same.returncode == 0, same.stdout + same.stderr  # rows compared: the gate still passes

