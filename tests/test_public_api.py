"""issue 23 point 6: the Python API's public names and ``compare(data=...)``'s accepted forms; the face as
good as the CLI: compare()'s progress display and result folder, Report.save by suffix, the docstrings."""

from __future__ import annotations

import inspect
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import infer_compare
from infer_compare import api
from infer_compare.base.records import Report, load_report

from .conftest import FAST, lenet_onnx_bundle

# LeNet-5's one fp32 ONNX Runtime row on the CPU at batch 1: the quickest real comparison
ONE_ROW = dict(backends=["onnxruntime"], formats=["onnx"], precisions=["fp32"], devices=["cpu"],
               batch_sizes=[1], **FAST)
FORMATS = ("json", "md", "csv", "html")


def test_public_names_resolve_to_their_definitions():
    from infer_compare.bundle import export_bundle, run_bundle
    from infer_compare.prepare.inputs import DataOptions

    assert infer_compare.compare is api.compare
    assert infer_compare.load_report is api.load_report
    assert infer_compare.check_regression is api.check_regression
    assert infer_compare.DataOptions is DataOptions
    # the face's bundle functions wrap the bundle's (a progress display, run_bundle's output_dir), dropping
    # none of their parameters but the A/B gate's own cell_runner
    for face, inner in ((api.export_bundle, export_bundle), (api.run_bundle, run_bundle)):
        inner_params = set(inspect.signature(inner).parameters) - {"cell_runner"}
        assert inner_params <= set(inspect.signature(face).parameters), face
    for name in api.__all__:  # every public entry point of api.py is a public name of the package
        assert name in infer_compare.__all__ and getattr(infer_compare, name) is getattr(api, name)
    assert set(infer_compare.__all__) <= set(dir(infer_compare))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        infer_compare.nope  # noqa: B018


def test_import_is_light():
    code = ("import sys, json, infer_compare; from infer_compare import __all__ as a; "
            "print(json.dumps(sorted(m for m in ('numpy', 'torch', 'infer_compare.api', "
            "'infer_compare.prepare.user') if m in sys.modules)))")
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


@pytest.fixture(scope="module")
def report(cache_dir):
    """A real report: LeNet-5's one row, nothing shown."""
    return api.compare("lenet5", cache_dir=cache_dir, progress=False, **ONE_ROW)


def _is_format(path: Path, fmt: str, rep: Report) -> None:
    """``path`` holds ``rep`` in ``fmt``, judged by what each format must look like."""
    text = path.read_text(encoding="utf-8")
    if fmt == "json":
        assert load_report(path) == rep
    elif fmt == "html":
        assert text.lstrip().lower().startswith(("<!doctype html", "<html")) and "</html>" in text, text[:80]
    elif fmt == "md":
        assert text.startswith("# infer-compare: lenet5") and "\n|" in text, text[:80]
    else:
        header, first = text.splitlines()[:2]
        assert header.split(",")[:3] == ["label", "model", "backend"]
        assert first.startswith(rep.rows[0].label + ",")


def test_compare_writes_the_clis_result_folder_and_shows_progress_on_a_stream(cache_dir, tmp_path):
    out = tmp_path / "new" / "results"  # parents made too, as the CLI's -o
    shown = io.StringIO()
    rep = infer_compare.compare("lenet5", cache_dir=cache_dir, output_dir=out, progress=shown, **ONE_ROW)
    assert [r.status for r in rep.rows] == ["ok"]
    assert sorted(p.name for p in out.iterdir()) == sorted(f"results.{f}" for f in FORMATS)  # no probe left
    for fmt in FORMATS:
        _is_format(out / f"results.{fmt}", fmt, rep)
    shown, lines = shown.getvalue(), shown.getvalue().splitlines()
    for step in ("probing the environment", "computing the PyTorch FP32 reference outputs", "measuring"):
        assert f"· {step}" in lines, shown
    assert any(line.strip().startswith(f"ok {rep.rows[0].label}: p50 ") for line in lines), shown
    said = f"results in {out}: results.json, results.md, results.csv, results.html"
    assert said in " ".join(shown.split()), shown  # rich wraps a long line at 80 columns off a terminal
    assert "\x1b[" not in shown  # a stream that is not a terminal: plain lines, no bar, no colour


def test_save_writes_the_format_its_suffix_names(report, tmp_path):
    for fmt in FORMATS:
        path = tmp_path / f"x.{fmt.upper() if fmt == 'html' else fmt}"  # the suffix read case-blind
        report.save(path)
        _is_format(path, fmt, report)
    # written atomically: no temporary file left beside them
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.HTML", "x.csv", "x.json", "x.md"]


@pytest.mark.parametrize("name", ["x.txt", "x.markdown", "results"])
def test_save_refuses_a_suffix_that_names_no_format(report, tmp_path, name):
    with pytest.raises(ValueError, match=r"names no format; accepted: \.json, \.md, \.csv, \.html$"):
        report.save(tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_compare_shows_progress_on_stderr_unless_told_not_to(cache_dir, capfd):
    """As the CLI: the display on stderr by default (a captured stderr is no terminal: plain lines);
    ``progress=False``: nothing at all."""
    api.compare("lenet5", cache_dir=cache_dir, **ONE_ROW)
    out, err = capfd.readouterr()
    assert "· probing the environment" in err and "· measuring" in err and out == "", err
    api.compare("lenet5", cache_dir=cache_dir, progress=False, **ONE_ROW)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_compare_keeps_the_partial_report_when_interrupted(cache_dir, tmp_path):
    """Ctrl-C during the run (here: in ``on_row``) leaves the partial report in every format, as the CLI."""
    calls = []

    def stop(rep):
        calls.append(rep)
        if len(calls) == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        api.compare("lenet5", cache_dir=cache_dir, output_dir=tmp_path, progress=False, on_row=stop,
                    **ONE_ROW)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"results.{f}" for f in FORMATS)
    saved = load_report(tmp_path / "results.json")
    assert saved.complete is False and len(saved.rows) == 1 and calls[-1] == saved


def test_an_output_dir_that_cannot_be_written_fails_before_any_work(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(api.UsageError, match=r"output directory .*file/out is not writable"):
        api.compare("lenet5", output_dir=tmp_path / "file" / "out", progress=False, **ONE_ROW)


def test_run_bundle_writes_its_result_folder_and_shows_progress(cache_dir, tmp_path):
    bundle = lenet_onnx_bundle(tmp_path / "bundle", cache_dir)
    shown = io.StringIO()
    rep = api.run_bundle(bundle, cache_dir=cache_dir, output_dir=tmp_path / "out", progress=shown, **ONE_ROW)
    assert [r.status for r in rep.rows] == ["ok"]
    lines = shown.getvalue().splitlines()
    assert "· verifying the bundle" in lines and "· measuring" in lines, lines
    for fmt in FORMATS:
        _is_format(tmp_path / "out" / f"results.{fmt}", fmt, rep)


def test_check_regression_applies_the_default_rules(report):
    """``rules`` left out: the documented defaults, as ``infer-compare diff`` (not no rule at all)."""
    res = api.check_regression(report, report, allow_environment_change=True)
    assert res.default_rules and {r.metric for r in res.rules} >= {"p50", "throughput"}, res.rules


@pytest.mark.parametrize("name", ["compare", "load_report", "check_regression", "export_bundle",
                                  "run_bundle"])
def test_every_public_function_documents_each_parameter(name):
    """Google-style docstrings (an API reference is generated from them): each parameter under Args."""
    fn = getattr(infer_compare, name)
    doc = inspect.getdoc(fn) or ""
    assert re.search(r"^Args:$", doc, re.M) and re.search(r"^Returns:$", doc, re.M), doc[:200]
    args = doc.split("\nArgs:\n", 1)[1].split("\n\n", 1)[0]
    documented = set(re.findall(r"^    (?:\*\*)?(\w+):", args, re.M))
    assert documented == set(inspect.signature(fn).parameters), (name, documented)
