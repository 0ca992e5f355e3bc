"""issue 23 point 9: every exporter process runs in a scratch working directory, so that no converter
litters the user's current directory (onnxruntime's int8 quantizer wrote sym_shape_infer_temp.onnx there)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from infer_compare.artifacts.child import ExportSpec, build
from infer_compare.backends.exporter import ExportResult

from .conftest import PY, python_env

SEEN: dict[str, str] = {}


class LitteringExporter:
    """Writes a temporary file into the current directory, as some converters do."""

    def export(self, ctx, source, out_dir: Path, precision: str) -> ExportResult:
        SEEN["cwd"] = os.getcwd()
        Path("sym_shape_infer_temp.onnx").write_bytes(b"temp")
        out = out_dir / "model.bin"
        out.write_bytes(b"artifact")
        return ExportResult(str(out), {}, [])


def test_the_exporter_runs_in_a_scratch_directory(tmp_path, monkeypatch):
    user_dir = tmp_path / "user"
    user_dir.mkdir()
    monkeypatch.chdir(user_dir)
    (tmp_path / "out").mkdir()
    res = build(ExportSpec(exporter=f"{__name__}:LitteringExporter", precision="int8", source=None,
                           out_dir="../out"))  # a relative out_dir is the caller's, not the scratch's
    assert res["ok"], res
    assert Path(res["path"]) == tmp_path / "out" / "model.bin"
    assert list(user_dir.iterdir()) == [] and os.getcwd() == str(user_dir)
    assert SEEN["cwd"] != str(user_dir) and not Path(SEEN["cwd"]).exists()  # the scratch folder is gone


@pytest.mark.slow
def test_onnx_int8_export_leaves_the_cwd_clean(tmp_path):
    pytest.importorskip("onnxruntime")
    cwd = tmp_path / "work"
    cwd.mkdir()
    proc = subprocess.run([PY, "-m", "infer_compare", "export", "--model", "lenet5", "--formats", "onnx",
                           "--precisions", "int8", "--out", "bundle", "--cache-dir", str(tmp_path / "cache")],
                          cwd=cwd, env=python_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in cwd.iterdir()) == ["bundle"]
