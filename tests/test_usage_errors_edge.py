"""issue 23 point 9: a --device with nothing of it here fails at once (one line, exit 2, before the
preparation), and usage errors leave no empty result folder behind."""

from __future__ import annotations

import pytest

from infer_compare.api import check_devices_present
from infer_compare.base.errors import UsageError

HERE = {"cpu": ["cpu"], "cuda": ["cuda:0"], "edgetpu": []}


def test_named_devices_absent_is_a_usage_error():
    check_devices_present(None, HERE)
    check_devices_present(["cuda"], HERE)
    check_devices_present(["cuda:0"], HERE)
    check_devices_present(["cpu", "edgetpu"], HERE)  # some present: the absent one is a skipped row
    with pytest.raises(UsageError, match=r"--device cuda:1: cuda:1 is not among cuda:0; "
                                         r"devices here: cpu, cuda:0"):
        check_devices_present(["cuda:1"], HERE)
    with pytest.raises(UsageError, match=r"--device edgetpu: no Coral Edge TPU found"):
        check_devices_present(["edgetpu"], HERE)


def test_cli_device_cuda_without_cuda_fails_before_any_work(tmp_path, monkeypatch, capsys):
    from infer_compare.cli import main

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no CUDA device, whatever this machine has
    out = tmp_path / "deep" / "results"
    code = main(["--model", "lenet5", "--device", "cuda", "-b", "1", "-o", str(out)])
    cap = capsys.readouterr()
    assert code == 2
    assert cap.err.strip() == ("infer-compare: error: --device cuda: no CUDA device found (NVML / NVIDIA "
                               "driver); devices here: cpu" + "".join(f", {d}" for d in _edgetpus()))
    assert "preparing" not in cap.out + cap.err
    assert not (tmp_path / "deep").exists()  # the folders it made are gone again


def test_run_checks_devices_before_the_bundle(tmp_path, monkeypatch):
    from infer_compare.bundle import run_bundle

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    with pytest.raises(UsageError, match="--device cuda: no CUDA device found"):
        run_bundle(tmp_path / "no-such-bundle", devices=["cuda"])


def test_export_usage_error_leaves_no_bundle_folder(tmp_path, capsys):
    from infer_compare.cli import main

    out = tmp_path / "b" / "bundle"
    assert main(["export", "--model", "lenet5", "--formats", "onnx", "--precisions", "fp64", "--out",
                 str(out)]) == 2
    assert not (tmp_path / "b").exists()


def _edgetpus() -> list[str]:
    from infer_compare.catalog.device_kinds import edgetpu_devices

    return edgetpu_devices()
