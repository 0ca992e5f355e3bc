"""issue 23 point 6: the Python API's public names and ``compare(data=...)``'s accepted forms."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import infer_compare
from infer_compare import api


def test_public_names_resolve_to_their_definitions():
    from infer_compare.bundle import export_bundle, run_bundle
    from infer_compare.prepare.inputs import DataOptions

    assert infer_compare.compare is api.compare
    assert infer_compare.load_report is api.load_report
    assert infer_compare.check_regression is api.check_regression
    assert infer_compare.DataOptions is DataOptions
    assert (infer_compare.export_bundle, infer_compare.run_bundle) == (export_bundle, run_bundle)
    for name in api.__all__:  # every public entry point of api.py is a public name of the package
        assert name in infer_compare.__all__ and getattr(infer_compare, name) is getattr(api, name)
    assert set(infer_compare.__all__) <= set(dir(infer_compare))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        infer_compare.nope  # noqa: B018


def test_import_is_light():
    code = ("import sys, json, infer_compare; from infer_compare import __all__ as a; "
            "print(json.dumps(sorted(m for m in ('numpy', 'torch', 'infer_compare.api', 'infer_compare.prepare.user') "
            "if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(Path(__file__).resolve().parents[1])).stdout
    assert json.loads(out) == []


def test_data_as_path_dict_or_dataoptions(tmp_path):
    from infer_compare.prepare.inputs import DataOptions

    assert api.data_options(None) is None
    assert api.data_options(str(tmp_path)) == DataOptions(data=str(tmp_path))
    assert api.data_options(tmp_path) == DataOptions(data=str(tmp_path))  # os.PathLike
    opts = DataOptions(data="x", labels="l.json")
    assert api.data_options(opts) is opts
    assert api.data_options({"data": "x", "max_images": 3}) == DataOptions(data="x", max_images=3)
    with pytest.raises(TypeError, match=r"unknown field\(s\) label; DataOptions has data, labels"):
        api.data_options({"data": "x", "label": "l.json"})
    with pytest.raises(TypeError, match=r"takes a path .* or infer_compare.DataOptions\(data, labels"):
        api.data_options(42)


def test_compare_reads_a_data_path(tmp_path):
    """``compare(data=PATH)`` reaches the data loader: a missing folder is the usual one-line UsageError
    (it used to be AttributeError: 'str' object has no attribute 'data')."""
    from infer_compare.base.errors import UsageError

    with pytest.raises(UsageError, match="nope"):
        api.compare("lenet5", data=str(tmp_path / "nope"), backends=["null"], cache_dir=tmp_path / "c",
                    batch_sizes=[1], min_time_s=0.0, max_time_s=0.01)
