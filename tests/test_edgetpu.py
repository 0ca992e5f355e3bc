"""Edge TPU: compiler log parsing, probes and skip reasons; a real run needs a Coral device."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

from infer_compare.backends.tflite import edgetpu_export as et
from infer_compare.backends.tflite.edgetpu_run import (
    EdgeTpuRunner,
    _coral_device,
    delegate_library,
    read_coverage,
    read_precheck,
)
from infer_compare.base.errors import BackendUnavailable

# The layout of edgetpu_compiler 16's summary (-s) and operation log, as documented at
# coral.ai/docs/edgetpu/compiler; the counts here are made up for the test.
PARTIAL_LOG = """Edge TPU Compiler version 16.0.384591198
Started a compilation timeout timer of 180 seconds.

Model compiled successfully in 1149 ms.

Input model: model.tflite
Input size: 3.95MiB
Output model: model_edgetpu.tflite
Output size: 4.12MiB
On-chip memory used for caching model parameters: 3.42MiB
On-chip memory remaining for caching model parameters: 4.31MiB
Off-chip memory used for streaming uncached model parameters: 0.00B
Number of Edge TPU subgraphs: 1
Total number of operations: 72
Operation log: model_edgetpu.log

Model successfully compiled but not all operations are supported by the Edge TPU. A percentage of the \
model will instead run on the CPU, which is slower.
Number of operations that will run on Edge TPU: 70
Number of operations that will run on CPU: 2

Operator                       Count      Status

ADD                            10         Mapped to Edge TPU
CONV_2D                        35         Mapped to Edge TPU
DEPTHWISE_CONV_2D              17         Mapped to Edge TPU
MEAN                           1          Mapped to Edge TPU
FULLY_CONNECTED                1          Mapped to Edge TPU
PAD                            6          Mapped to Edge TPU
TRANSPOSE                      1          Operation is otherwise supported, but not mapped due to some \
unspecified limitation
QUANTIZE                       1          Operation is otherwise supported, but not mapped due to some \
unspecified limitation
"""

# <model>_edgetpu.log as edgetpu_compiler writes it: a header and the same operator table.
OPERATION_LOG = ("Edge TPU Compiler version 16.0.384591198\nInput: model.tflite\n"
                 "Output: model_edgetpu.tflite\n\n" + PARTIAL_LOG[PARTIAL_LOG.index("Operator "):])

MOSTLY_CPU_LOG = """Operator                       Count      Status

CONV_2D                        1          Mapped to Edge TPU
HARD_SWISH                     12         Operation is working on an unsupported data type
MUL                            9          More than one subgraph is not supported
"""

ALL_MAPPED_SUMMARY = """Edge TPU Compiler version 16.0.384591198
Number of Edge TPU subgraphs: 1
Total number of operations: 12
"""


def test_parse_partial_coverage():
    cov = et.parse_log(PARTIAL_LOG)
    assert (cov["tpu_ops"], cov["cpu_ops"], cov["total_ops"], cov["subgraphs"]) == (70, 2, 72, 1)
    assert cov["ops"]["CONV_2D"] == {"count": 35, "tpu": 35, "cpu": 0, "status": ["Mapped to Edge TPU"]}
    assert cov["ops"]["TRANSPOSE"]["cpu"] == 1
    assert cov["tpu_fraction"] == pytest.approx(70 / 72)
    assert et.coverage_note(cov) is None


def test_one_operator_table_is_counted_once():
    """-s prints the operator table and <model>_edgetpu.log repeats it: 70/2/72, never 140/4/144."""
    cov = et.parse_log(PARTIAL_LOG, OPERATION_LOG)
    assert (cov["tpu_ops"], cov["cpu_ops"], cov["total_ops"], cov["subgraphs"]) == (70, 2, 72, 1)
    assert cov["table_from"] == "log" and cov["ops"]["CONV_2D"]["count"] == 35
    # the two texts pasted together still hold one table's worth of operations
    assert et.parse_log(PARTIAL_LOG + "\n" + OPERATION_LOG)["total_ops"] == 72
    # the .log's table is the one read
    other = OPERATION_LOG.replace("CONV_2D                        35", "CONV_2D                        30")
    assert et.parse_log(PARTIAL_LOG, other)["ops"]["CONV_2D"]["count"] == 30
    assert et.parse_log(PARTIAL_LOG)["table_from"] == "stdout"


def test_mostly_cpu_is_flagged():
    cov = et.parse_log(MOSTLY_CPU_LOG)
    assert (cov["tpu_ops"], cov["cpu_ops"], cov["total_ops"]) == (1, 21, 22)
    note = et.coverage_note(cov)
    assert note and note.startswith("MOSTLY ON THE CPU") and "HARD_SWISH" in note and "MUL" in note


def test_summary_without_table_means_all_mapped():
    cov = et.parse_log(ALL_MAPPED_SUMMARY)
    assert (cov["tpu_ops"], cov["cpu_ops"], cov["total_ops"]) == (12, 0, 12)
    assert et.parse_log("")["total_ops"] is None and et.coverage_note(et.parse_log("")) is None


def test_compiler_probe_says_why_and_how(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    av = et.EdgeTpuExporter.probe()
    assert not av.available and "edgetpu_compiler" in av.reason
    assert "apt-get install edgetpu-compiler" in av.hint and "x86-64" in av.hint


@pytest.mark.skipif(sys.platform == "win32", reason="shell script stand-in for the compiler")
def test_compiler_invocation_and_failure(monkeypatch, tmp_path):
    """The exporter's plumbing with a stand-in compiler (the real one is not installable here):
    argument list, output and log files parsed into op coverage, a failing exit is an ExportError
    that carries the compiler's stderr."""
    from infer_compare.backends.exporter import ExportContext
    from infer_compare.base.errors import ExportError

    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "edgetpu_compiler"
    log = tmp_path / "log.txt"
    log.write_text(PARTIAL_LOG)
    oplog = tmp_path / "oplog.txt"
    oplog.write_text(OPERATION_LOG)
    # like edgetpu_compiler 16 with -s: the summary and the operator table on stdout, and the same
    # table again in <model>_edgetpu.log beside the output
    script.write_text(f"""#!/bin/sh
if [ "$1" = "--version" ]; then echo "Edge TPU Compiler version 16.0.test"; exit 0; fi
if [ -n "$FAIL" ]; then echo "ERROR: Didn't find op for builtin opcode 'HARD_SWISH'" >&2; exit 1; fi
out="$3"; src="$4"
cp "$src" "$out/model_edgetpu.tflite"
cp {oplog} "$out/model_edgetpu.log"
cat {log}
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setattr("infer_compare.backends.tflite.common.inspect_model",
                        lambda p, *a: {"full_integer": True, "problems": []})
    src = tmp_path / "int8.tflite"
    src.write_bytes(_hand_made_model())
    ctx = ExportContext(model=None, model_name="x", input_shape=(3, 8, 8), num_classes=10, calibration=None)
    out = tmp_path / "out"
    out.mkdir()
    assert et.EdgeTpuExporter.probe().available
    res = et.EdgeTpuExporter().export(ctx, str(src), out, "int8")
    assert Path(res.path).name == "model_edgetpu.tflite" and Path(res.path).exists()
    assert (out / "model_edgetpu.log").exists()
    cov = res.options["op_coverage"]
    # counted once
    assert (cov["tpu_ops"], cov["cpu_ops"], cov["total_ops"], cov["subgraphs"]) == (70, 2, 72, 1)
    assert cov["ops"]["CONV_2D"]["count"] == 35 and res.options["compiler"] == "16.0.test"
    assert any("70/72" in n for n in res.notes)
    # the static pre-check ran on the source and sits next to the compiler's count
    assert res.options["precheck"]["summary"].startswith("1 of 3 ops would map to the Edge TPU")
    assert "pre-check predicted 1/3, compiler mapped 70/72 (they differ" in " | ".join(res.notes)
    monkeypatch.setenv("FAIL", "1")
    out2 = tmp_path / "out2"
    out2.mkdir()
    with pytest.raises(ExportError, match="HARD_SWISH.*pre-check: 1 of 3 ops would map"):
        et.EdgeTpuExporter().export(ctx, str(src), out2, "int8")
    with pytest.raises(ExportError, match="int8"):
        et.EdgeTpuExporter().export(ctx, str(src), out2, "fp32")


def _hand_made_model() -> bytes:
    """CONV_2D -> HARD_SWISH -> CONV_2D, written with the TFLite schema (see test_edgetpu_precheck)."""
    pytest.importorskip("ai_edge_litert.schema_py_generated")
    from .test_edgetpu_precheck import with_hard_swish

    return with_hard_swish()


def test_without_the_compiler_the_skip_reason_carries_the_prediction(monkeypatch, tmp_path):
    from infer_compare.backends.exporter import ExportContext

    monkeypatch.setenv("PATH", str(tmp_path))
    assert not et.EdgeTpuExporter.probe().available
    src = tmp_path / "int8.tflite"
    src.write_bytes(_hand_made_model())
    ctx = ExportContext(model=None, model_name="x", input_shape=(3, 8, 8), num_classes=10, calibration=None)
    said = et.EdgeTpuExporter.explain_unavailable(ctx, str(src), "int8")
    assert said.startswith("Edge TPU pre-check (edgetpu_compiler 16 as documented by Coral (no "
                           "compiler ran)): 1 of 3 ops would map to the Edge TPU; the first that "
                           "would not is HARD_SWISH")
    assert et.EdgeTpuExporter.explain_unavailable(ctx, str(src), "fp32") == ""
    assert et.EdgeTpuExporter.explain_unavailable(ctx, None, "int8") == ""
    (tmp_path / "bad.tflite").write_bytes(b"not a model")
    assert "could not read" in et.EdgeTpuExporter.explain_unavailable(ctx, str(tmp_path / "bad.tflite"),
                                                                      "int8")


def test_exporter_refuses_a_file_that_is_not_full_integer(monkeypatch, tmp_path):
    from infer_compare.backends.exporter import ExportContext
    from infer_compare.base.errors import ExportError

    monkeypatch.setattr("infer_compare.backends.tflite.common.inspect_model",
                        lambda p, *a: {"full_integer": False, "problems": ["float ops: ADD x16"]})
    ctx = ExportContext(model=None, model_name="x", input_shape=(3, 8, 8), num_classes=10, calibration=None)
    with pytest.raises(ExportError, match="full-integer.*ADD x16"):
        et.EdgeTpuExporter().export(ctx, str(tmp_path / "x.tflite"), tmp_path, "int8")


def test_runner_probe_without_device(monkeypatch):
    monkeypatch.setattr("infer_compare.catalog.device_kinds.edgetpu_devices", lambda: [])
    av = EdgeTpuRunner.probe("edgetpu")
    assert not av.available and "no Coral Edge TPU" in av.reason and av.hint
    assert not EdgeTpuRunner.supports("edgetpu", "fp32", "edgetpu:usb:0").available


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # litert Delegate.__del__
def test_missing_delegate_is_a_reason_not_a_crash(monkeypatch, tmp_path):
    """With a device 'present' but no libedgetpu, the probe or the delegate load says why."""
    from infer_compare.backends.runner import RunOptions
    from infer_compare.catalog import deps

    if deps.has("pycoral"):
        pytest.skip("pycoral is installed: it opens the device itself")
    monkeypatch.setattr("infer_compare.catalog.device_kinds.edgetpu_devices", lambda: ["edgetpu:usb:0"])
    av = EdgeTpuRunner.probe("edgetpu:usb:0")
    if av.available:
        pytest.skip("libedgetpu is installed here")
    assert "edgetpu" in av.reason.lower() and av.hint
    if not (deps.has("ai_edge_litert") or deps.has("tflite_runtime")):
        return
    from infer_compare.backends.tflite.common import interpreter_module

    mod, _, _ = interpreter_module()
    r = EdgeTpuRunner(str(tmp_path / "m_edgetpu.tflite"), "edgetpu:usb:0", RunOptions(precision="int8"))
    r._pkg = "ai_edge_litert"
    with pytest.raises(BackendUnavailable, match=delegate_library().replace(".", r"\.")):
        r._make_interpreter(mod)


def test_device_names_and_manifest_coverage(tmp_path):
    assert _coral_device("edgetpu:usb:0") == "usb:0" and _coral_device("edgetpu:pci:1") == "pci:1"
    assert _coral_device("edgetpu") == ""
    (tmp_path / "manifest.json").write_text('{"options": {"op_coverage": {"tpu_ops": 3, "total_ops": 4}, '
                                            '"precheck": {"tpu_ops": 4, "total_ops": 4, '
                                            '"summary": "4 of 4"}}}')
    art = str(tmp_path / "model_edgetpu.tflite")
    assert read_coverage(art) == {"tpu_ops": 3, "total_ops": 4}
    assert read_precheck(art)["tpu_ops"] == 4
    assert read_coverage(str(tmp_path / "nowhere" / "m.tflite")) is None
    assert read_precheck(str(tmp_path / "nowhere" / "m.tflite")) is None
    notes = et.coverage_notes(read_coverage(art), read_precheck(art))
    assert notes[-1] == ("pre-check predicted 4/4, compiler mapped 3/4 (they differ: the compiler's log has "
                         "the last word)")


@pytest.mark.edgetpu
def test_real_edgetpu_run(cache_dir):
    """Runs only where a Coral device, libedgetpu and edgetpu_compiler are all present."""
    from infer_compare import compare
    from infer_compare.catalog.device_kinds import edgetpu_devices

    if not edgetpu_devices():
        pytest.skip("no Coral Edge TPU found (USB 1a6e:089a / 18d1:9302, or /dev/apex_*)")
    av = et.EdgeTpuExporter.probe()
    if not av.available:
        pytest.skip(av.reason)
    rep = compare("lenet5", formats=["edgetpu"], cache_dir=cache_dir, warmup_iters=1, min_iters=5,
                  min_time_s=0.05)
    rows = [r for r in rep.rows if r.backend == "edgetpu"]
    assert rows and rows[0].status == "ok", rows[0].reason
    assert rows[0].extra.get("op_coverage") and np.isfinite(rows[0].latency.p50_ms)
