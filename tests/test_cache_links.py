"""A cache reached through a symbolic link: an export's entry names its file inside the entry, and an entry an
older infer-compare wrote pointing through ``..`` into its build folder is rebuilt, not trusted."""

from __future__ import annotations

import json
import os

import pytest

from infer_compare.artifacts.chain import inside
from infer_compare.base.cache import Cache
from infer_compare.base.errors import InferCompareError


def _linked(tmp_path):
    real = tmp_path / "c1"
    real.mkdir()
    link = tmp_path / "c2"
    link.symlink_to(real)
    return link


def test_an_exporter_that_gives_its_files_real_path_makes_an_entry_that_outlives_its_build_folder(tmp_path):
    cache = Cache(_linked(tmp_path))

    def build(d):  # an exporter that reports the resolved path of what it wrote (as isolated exports may)
        (d / "model.onnx").write_bytes(b"onnx")
        return {"file": inside(os.path.realpath(d / "model.onnx"), d)}

    e = cache.get_or_build("onnx", {"k": 1}, build)
    assert e.manifest["file"] == "model.onnx"
    assert (e.path / e.manifest["file"]).read_bytes() == b"onnx"


def test_a_file_outside_the_build_folder_is_an_exporters_error(tmp_path):
    (tmp_path / "elsewhere.onnx").write_bytes(b"x")
    (tmp_path / "build").mkdir()
    with pytest.raises(InferCompareError, match="outside its build folder"):
        inside(tmp_path / "elsewhere.onnx", tmp_path / "build")


def test_an_entry_pointing_out_of_itself_is_rebuilt(tmp_path):
    cache = Cache(_linked(tmp_path))
    built = []

    def old_build(d):  # what the old code stored: the file's real path relative to the unresolved folder
        (d / "model.onnx").write_bytes(b"onnx")
        built.append(1)
        return {"file": os.path.relpath(os.path.realpath(d / "model.onnx"), d)}

    first = cache.get_or_build("onnx", {"k": 1}, old_build)
    assert first.manifest["file"].startswith("..")  # the bug as it was (checks the test's premise)
    assert not (first.path / first.manifest["file"]).exists()

    def new_build(d):
        (d / "model.onnx").write_bytes(b"onnx")
        built.append(2)
        return {"file": inside(d / "model.onnx", d)}

    again = cache.get_or_build("onnx", {"k": 1}, new_build)
    assert built == [1, 2] and "outside the entry" in again.rebuilt_because
    assert (again.path / again.manifest["file"]).is_file()
    assert json.loads((again.path / "manifest.json").read_text())["file"] == "model.onnx"
