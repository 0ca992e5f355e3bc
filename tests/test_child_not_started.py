"""A measuring child that cannot be started (qemu-user's EFAULT under proot, a board short of memory or
processes) is a failed row that says why, and the run goes on to its report: checked end to end on a
LeNet-5 bundle with a launcher that refuses on purpose. And a row measured under an emulator says so."""

from __future__ import annotations

import subprocess

import pytest

from infer_compare.base.records import OK, RUN_FAILED

from .conftest import FAST


@pytest.fixture(scope="module")
def onnx_bundle(cache_dir, tmp_path_factory):
    from infer_compare.bundle import export_bundle

    out = tmp_path_factory.mktemp("bundles") / "lenet5-onnx"
    export_bundle("lenet5", out, formats=["onnx"], precisions=["fp32", "int8"], cache_dir=cache_dir)
    return out


def _refusing(real, refused: list[str]):
    """subprocess.Popen that cannot start the tool's measuring children (the fork server included)."""

    def popen(args, *a, **kw):
        module = args[args.index("-m") + 1] if isinstance(args, list) and "-m" in args else ""
        if module.startswith("infer_compare.measure"):
            refused.append(module)
            raise OSError(14, "Bad address")
        return real(args, *a, **kw)

    return popen


def test_every_configuration_whose_child_cannot_start_is_a_failed_row(onnx_bundle, cache_dir, monkeypatch,
                                                                      tmp_path):
    from infer_compare.bundle import run_bundle
    from infer_compare.report import write_all

    refused: list[str] = []
    monkeypatch.setattr(subprocess, "Popen", _refusing(subprocess.Popen, refused))
    rep = run_bundle(onnx_bundle, batch_sizes=[1, 2], devices=["cpu"], cache_dir=cache_dir, **FAST)
    measured = [r for r in rep.rows if r.backend == "onnxruntime"]
    assert refused and {(r.precision, r.batch_size) for r in measured} == {("fp32", 1), ("fp32", 2),
                                                                           ("int8", 1), ("int8", 2)}
    assert all(r.status == RUN_FAILED for r in measured)
    assert all("could not start" in r.reason and "Errno 14" in r.reason for r in measured
               if r.batch_size == 1)
    assert not any(r.status == OK for r in measured)
    write_all(rep, tmp_path / "out")  # the run ended with its report, not a traceback
    assert (tmp_path / "out" / "results.json").exists()


def test_a_runner_under_an_emulator_notes_it(monkeypatch):
    import platform

    from infer_compare.backends.runner import Runner
    from infer_compare.host import arm

    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    monkeypatch.setenv(arm.EMULATION_ENV, "qemu-aarch64-static 7.2 user mode")
    (note,) = Runner("x.onnx").notes
    assert note.startswith("emulated aarch64: qemu-aarch64-static 7.2 user mode") and "not a board's" in note
    monkeypatch.delenv(arm.EMULATION_ENV)
    monkeypatch.setattr(arm, "_read", lambda p: "")  # an Arm board: its own cpuinfo, no binfmt handler
    assert Runner("x.onnx").notes == []
