"""A full disk (issue 39): a row whose artifact could not be built for lack of space says "disk full
(ENOSPC)" whatever the exporter's words (OpenVINO says "iostream error"), and the run exits 1; a cache
entry that cannot be written anywhere is one line, exit 2. The disk is made full by a small tmpfs where
this machine lets the test mount one (root), else by exporters that fail as a full disk makes them."""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infer_compare.base import diskfull
from infer_compare.base.cache import Cache
from infer_compare.base.errors import DiskFullError
from infer_compare.cli import main

from .conftest import python_env

FAST = ["--min-iters", "3", "--warmup", "1", "--min-time", "0.05", "-b", "1", "--device", "cpu",
        "--precisions", "fp32"]


def test_reason_names_a_full_disk_whatever_the_words(tmp_path, monkeypatch):
    assert diskfull.reason(OSError(errno.ENOSPC, "No space left on device")).startswith(diskfull.DISK_FULL)
    wrapped = RuntimeError("export failed")
    wrapped.__cause__ = OSError(errno.EDQUOT, "Disk quota exceeded")
    assert diskfull.reason(wrapped) == diskfull.DISK_FULL
    vague = RuntimeError("basic_ios::clear: iostream error")
    assert diskfull.reason(vague, [tmp_path]) == ""  # plenty of space here: not taken for a full disk
    monkeypatch.setattr(diskfull, "LOW_FREE_BYTES", 1 << 62)
    assert diskfull.reason(vague, [tmp_path]).startswith(f"{diskfull.DISK_FULL} under {tmp_path}: ")
    assert diskfull.reason(ValueError("bad shape"), [tmp_path]) == ""


def test_a_cache_entry_that_fits_nowhere_is_one_line(tmp_path, monkeypatch):
    def build(d: Path) -> dict:
        (d / "w.pt").write_bytes(b"x")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos "
                           "205312 vs 205232") from \
            RuntimeError("basic_ios::clear: iostream error")

    monkeypatch.setattr(diskfull, "LOW_FREE_BYTES", 1 << 62)
    cache = Cache(tmp_path / "cache")
    with pytest.raises(DiskFullError, match=r"cannot build weights entry \w+: disk full \(ENOSPC\) under "):
        cache.get_or_build("weights", {"m": 1}, build)
    assert "disk full (ENOSPC)" in cache.unwritable  # it tried outside the cache first, and said so
    assert not any((tmp_path / "cache").rglob("w.pt"))  # nothing half-written left in the cache


@pytest.mark.parametrize("exporter", ["NoSpaceExporter", "IostreamExporter"])
def test_rows_that_failed_for_lack_of_space_say_so_and_the_run_exits_1(cache_dir, tmp_path, monkeypatch,
                                                                       capsys, exporter):
    from infer_compare.catalog import formats

    table = dict(formats.FORMATS)
    table["onnx"] = dataclasses.replace(table["onnx"], exporter=f"tests.fake_full_disk:{exporter}")
    monkeypatch.setattr(formats, "FORMATS", table)
    monkeypatch.setenv("PYTHONPATH", python_env()["PYTHONPATH"])
    # the free space the vague words are checked against
    monkeypatch.setattr(diskfull, "LOW_FREE_BYTES", 1 << 62)
    out = tmp_path / "out"
    code = main(["--model", "lenet5", "--formats", "pytorch,onnx", "--cache-dir", str(cache_dir), "-o",
                 str(out), *FAST])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "row(s) could not be built: disk full (ENOSPC)" in err
    from infer_compare.base.records import load_report

    rep = load_report(out / "results.json")
    onnx = next(r for r in rep.rows if r.format == "onnx")
    assert onnx.status == "export_failed" and "disk full (ENOSPC)" in onnx.reason, onnx.reason
    assert next(r for r in rep.rows if r.format == "pytorch").status == "ok"  # measured rows kept


def _mount_tmpfs(d: Path, size: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    d.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)],
                          capture_output=True).returncode == 0


@pytest.mark.slow
def test_a_real_full_tmpfs_under_the_cache(tmp_path):
    """LeNet-5 with its cache and temporary folder on a 200 kB tmpfs: its trained weights (205 kB) fit
    nowhere; PyTorch's own words are "unexpected pos": one line that says disk full, exit 2."""
    tiny = tmp_path / "tiny"
    if not _mount_tmpfs(tiny, "200k"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        env = {**python_env(), "TMPDIR": str(tiny)}
        p = subprocess.run([sys.executable, "-m", "infer_compare.cli", "--model", "lenet5", "--formats",
                            "pytorch", "--cache-dir", str(tiny), "-o", str(tmp_path / "out"), *FAST],
                           capture_output=True, text=True, env=env, timeout=900)
    finally:
        subprocess.run(["umount", str(tiny)], capture_output=True)
    assert p.returncode == 2, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert "Traceback" not in p.stderr and "disk full (ENOSPC)" in last, p.stderr
