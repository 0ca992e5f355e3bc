"""Hostile and odd input (issue 39): every file the tool reads is checked before use, every file it
writes is safe to open. Results files with wrong types deep down, nesting 10000 levels deep and
unknown row statuses; bundle arrays whose header claims more than the file holds; 16-bit, palette,
CMYK, alpha and EXIF-rotated images; markup in results.md, formulas in results.csv; a closed pipe.
The fuzz tests of each reader are in tests/test_hostile_fuzz.py; the full disk in
tests/test_disk_full.py."""

from __future__ import annotations

import io
import json
import re
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from infer_compare.base.errors import SchemaError, UsageError
from infer_compare.base.records import Report, load_report
from infer_compare.cli import main

from .conftest import PY, ROOT, python_env

RESULTS = ROOT / "reports" / "cpu-lenet5" / "results.json"


def _doc() -> dict:
    return json.loads(RESULTS.read_text())


def _write(tmp_path: Path, d, name: str = "results.json") -> Path:
    p = tmp_path / name
    p.write_text(d if isinstance(d, str) else json.dumps(d))
    return p


def _one_line_exit_2(capsys, argv: list[str], *needles: str) -> str:
    """The command ends with exit 2 and one line on stderr naming what is wrong (no traceback)."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


# ------------------------------------------------------------------------- results.json


def _row_with_latency(d: dict) -> dict:
    return next(r for r in d["rows"] if r.get("latency"))


@pytest.mark.parametrize("edit, field, expected", [
    (lambda d: _row_with_latency(d)["latency"].__setitem__("p50_ms", "fast"),
     ".latency.p50_ms", "valid number"),
    (lambda d: d["rows"][0].__setitem__("notes", 5), "rows[0].notes", "valid list"),
    (lambda d: d["rows"][0].__setitem__("batch_size", True), "rows[0].batch_size", "valid integer"),
    (lambda d: d["settings"].__setitem__("batch_sizes", {"cpu": ["one"]}), "settings.batch_sizes.cpu[0]",
     "valid integer"),
    (lambda d: d["environment"].__setitem__("gpus", [{"name": ["x"]}]), "environment.gpus[0].name",
     "valid string"),
    (lambda d: d["rows"][0].__setitem__("extra", {"calibration": {"ms": "12"}}),
     "rows[0].extra.calibration.ms", "valid number"),
    (lambda d: d["model"].pop("name"), "model.name", "required"),
])
def test_wrong_types_deep_down_are_one_line_naming_the_field(tmp_path, capsys, edit, field, expected):
    d = _doc()
    edit(d)
    p = _write(tmp_path, d)
    with pytest.raises(SchemaError, match=expected):
        load_report(p)
    for argv in (["report", str(p), "--format", "md"], ["diff", str(RESULTS), str(p)],
                 ["merge", str(RESULTS), str(p), "-o", str(tmp_path / "m")]):
        _one_line_exit_2(capsys, argv, str(p), field, expected)
    assert not (tmp_path / "m").exists() or not any((tmp_path / "m").iterdir())


def test_unknown_row_status_is_refused(tmp_path, capsys):
    d = _doc()
    d["rows"][1]["status"] = "great"
    p = _write(tmp_path, d)
    _one_line_exit_2(capsys, ["report", str(p), "--format", "csv"], "rows[1].status", "'ok'", "'great'")
    d = _doc()
    d["rows"][0]["scenario"] = "sometimes"
    _one_line_exit_2(capsys, ["report", str(_write(tmp_path, d)), "--format", "csv"], "rows[0].scenario")


@pytest.mark.parametrize("where", ["rows", "extra", "top"])
def test_nesting_ten_thousand_deep_is_refused(tmp_path, capsys, where):
    deep = "[" * 10000 + "]" * 10000
    if where == "top":
        text = deep
    else:
        d = _doc()
        marker = "\"__deep__\""
        if where == "rows":
            d["rows"] = "__deep__"
        else:
            d["rows"][0]["extra"] = {"x": "__deep__"}
        text = json.dumps(d).replace(marker, deep)
    p = _write(tmp_path, text)
    for argv in (["report", str(p), "--format", "json"], ["diff", str(p), str(RESULTS)]):
        _one_line_exit_2(capsys, argv, str(p), "recursion limit")


def test_real_results_files_still_load():
    for p in sorted((ROOT / "reports").glob("*/results.json")):
        assert load_report(p).rows, p


def test_nan_parity_figures_written_as_null_still_load(tmp_path):
    d = _doc()
    row = next(r for r in d["rows"] if r.get("parity"))
    row["parity"]["max_abs"] = None  # the writer turns NaN into null
    assert load_report(_write(tmp_path, d)).rows


def test_a_report_from_another_node_is_checked_too():
    d = _doc()
    d["rows"][0]["status"] = 3
    with pytest.raises(SchemaError, match=r"node-7: field rows\[0\].status"):
        Report.from_dict(d, where="node-7")


# ------------------------------------------------------------------------- writers


def _hostile_report() -> Report:
    rep = load_report(RESULTS)
    name = "<script>alert(1)</script>|[x](javascript:alert(2))"
    rows = list(rep.rows)
    rows[0] = rows[0].replace(status="export_failed", reason="<img src=x onerror=alert(3)> ` `` ```",
                              notes=("=cmd|' /C calc'!A0",))
    return rep.replace(model=rep.model.replace(name=name), rows=tuple(rows),
                       command=("infer-compare", "--model", "`<b>x</b>`"), warnings=("<!-- hidden -->",))


def test_results_md_escapes_markup_in_every_cell_and_heading():
    from infer_compare.report import render

    md = render(_hostile_report(), "md")
    # the command is a code span (markup inside one is shown as text), fenced longer than its own backticks
    assert "- command: `` infer-compare --model `<b>x</b>` ``\n" in md
    outside = md.replace("`` infer-compare --model `<b>x</b>` ``", "")
    for raw in ("<script", "<img", "<b>", "<!--"):
        assert raw not in outside, raw
    assert not re.search(r"(?<!\\)\]\(javascript:", md)  # no link: its brackets are escaped
    # '>' needs no escaping once '<' cannot open a tag
    assert "# infer-compare: &lt;script>alert(1)&lt;/script>\\|\\[x\\](javascript:alert(2))\n" in md
    assert "&lt;img src=x onerror=alert(3)> \\` \\`\\` \\`\\`\\`" in md  # the failure's reason


def test_results_csv_neutralizes_formula_cells_but_keeps_numbers():
    import csv as csvmod

    from infer_compare.report import render

    rep = _hostile_report()
    rep = rep.replace(model=rep.model.replace(name="=HYPERLINK(\"http://x\")"),
                      rows=(rep.rows[0].replace(backend="+cmd", device="@SUM(A1)",
                                                reason="-2+3"),) + rep.rows[1:])
    lines = list(csvmod.DictReader(io.StringIO(render(rep, "csv"))))
    first = lines[0]
    assert first["model"] == "'=HYPERLINK(\"http://x\")" and first["backend"] == "'+cmd"
    assert first["device"] == "'@SUM(A1)" and first["reason"] == "'-2+3"
    for line in lines:
        for k, v in line.items():
            assert not v.startswith(("=", "+", "@", "\t", "\r")), (k, v)
            if v.startswith("-"):
                float(v)  # a negative number stays a number
    measured = next(line for line in lines if line["latency_p50_ms"])
    assert float(measured["latency_p50_ms"]) > 0


# ------------------------------------------------------------------------- arrays


def _forged_npy(shape=(10**6, 10**6)) -> bytes:
    from numpy.lib import format as npformat

    buf = io.BytesIO()
    npformat.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return buf.getvalue() + b"\0" * 64


def test_npy_header_claiming_a_huge_shape_is_refused_before_allocation(tmp_path):
    from infer_compare.base import npyfile
    from infer_compare.data.user import PreprocessSpec, load_data

    p = tmp_path / "x.npy"
    p.write_bytes(_forged_npy())
    with pytest.raises(ValueError, match=r"header says shape \(1000000, 1000000\).*holds 64 bytes"):
        npyfile.load(p)
    with pytest.raises(UsageError, match="header says shape"):
        load_data(p, preprocess=PreprocessSpec(), input_shape=(1, 28, 28))
    z = tmp_path / "x.npz"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("images.npy", _forged_npy((10**5, 3, 224, 224)))
    with pytest.raises(UsageError, match="x.npz:images.npy: header says shape"):
        load_data(z, preprocess=PreprocessSpec(), input_shape=(3, 224, 224))
    ok = tmp_path / "ok.npy"
    np.save(ok, np.ones((2, 3), np.float32))
    assert npyfile.load(ok).shape == (2, 3)


def test_bundle_array_with_a_forged_header_is_refused(tmp_path):
    from infer_compare.bundle import BundleError
    from infer_compare.bundle.run import load_inputs
    from infer_compare.bundle.verify import Verified

    (tmp_path / "data").mkdir()
    (tmp_path / "data/eval.npy").write_bytes(_forged_npy((10**6, 1, 28, 28)))
    np.save(tmp_path / "data/reference.npy", np.zeros((2, 10), np.float32))
    man = {"input": {"shape": [1, 28, 28]}, "data": {"eval": {"path": "data/eval.npy"},
                                                     "reference": {"path": "data/reference.npy"}}}
    with pytest.raises(BundleError, match=r"data/eval cannot be read.*header says shape "
                                          r"\(1000000, 1, 28, 28\)"):
        load_inputs(Verified(tmp_path, man, 2, 0))


# ------------------------------------------------------------------------- images


def _images(d: Path) -> None:
    from PIL import Image

    d.mkdir()
    Image.fromarray(np.linspace(0, 65535, 32 * 32).reshape(32, 32).astype(np.uint16)).save(d / "g16.png")
    Image.new("RGBA", (32, 32), (10, 200, 30, 0)).save(d / "alpha.png")
    Image.new("CMYK", (32, 32), (0, 255, 255, 0)).save(d / "cmyk.jpg")
    p = Image.new("P", (32, 32))
    p.putpalette([255, 0, 0] * 256)
    p.save(d / "palette.png")
    e = Image.new("RGB", (32, 16), (255, 0, 0))
    ex = e.getexif()
    ex[0x0112] = 6  # rotated 90 degrees
    e.save(d / "exif.jpg", exif=ex, quality=100)


def test_images_of_other_modes_are_converted_faithfully_and_said(tmp_path):
    from infer_compare.data.user import PreprocessSpec, load_data

    _images(tmp_path / "imgs")
    spec = PreprocessSpec(resize=None, crop=None, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0), scale=1.0,
                          size=(32, 32))
    data = load_data(tmp_path / "imgs", preprocess=spec)
    by = dict(zip(sorted(p.name for p in (tmp_path / "imgs").iterdir()), data.images, strict=True))
    g = by["g16.png"]
    assert g.min() == 0 and g.max() == 255 and 120 < g.mean() < 135  # a ramp, not a white frame
    assert (by["palette.png"].mean(axis=(1, 2)).round() == [255, 0, 0]).all()
    assert (by["cmyk.jpg"].mean(axis=(1, 2)).round() == [255, 0, 0]).all()
    assert (by["alpha.png"].mean(axis=(1, 2)).round() == [10, 200, 30]).all()
    for said in ("16-bit grayscale scaled to 8 bits (value / 257)", "alpha channel dropped",
                 "CMYK converted to RGB without a colour profile",
                 "rotated or flipped per its EXIF orientation"):
        assert said in data.description, data.description


def test_exif_rotation_is_applied():
    from PIL import Image

    from infer_compare.data.user import modes

    e = Image.new("RGB", (32, 16))
    e.putpixel((0, 0), (255, 255, 255))
    buf = io.BytesIO()
    ex = e.getexif()
    ex[0x0112] = 6
    e.save(buf, format="PNG", exif=ex)
    img, notes = modes.standard(Image.open(io.BytesIO(buf.getvalue())))
    assert img.size == (16, 32) and notes == ["rotated or flipped per its EXIF orientation"]


def test_deeply_nested_labels_file_is_one_line(tmp_path):
    from infer_compare.data.user import PreprocessSpec, load_data

    (tmp_path / "imgs/cat").mkdir(parents=True)
    from PIL import Image

    Image.new("RGB", (8, 8)).save(tmp_path / "imgs/cat/a.png")
    labels = tmp_path / "labels.json"
    labels.write_text("[" * 10000 + "]" * 10000)
    with pytest.raises(UsageError, match="labels file .* is not valid JSON: recursion limit"):
        load_data(tmp_path / "imgs", preprocess=PreprocessSpec(), labels_file=str(labels))


# ------------------------------------------------------------------------- io maps, pipes


def test_tflite_io_map_with_wrong_types_is_refused(tmp_path):
    from infer_compare.backends.tflite.bindings import read_io_map
    from infer_compare.base.errors import RunnerError

    f = tmp_path / "m.tflite"
    Path(str(f) + ".io.json").write_text(json.dumps({"io_map": {"inputs": ["x"], "channel_last": ["yes"]}}))
    with pytest.raises(RunnerError, match=r"io_map: field channel_last\[0\]: "
                                          r"Input should be a valid boolean"):
        read_io_map(str(f))
    Path(str(f) + ".io.json").write_text(json.dumps({"io_map": {"inputs": ["x"], "channel_last": [True]}}))
    assert read_io_map(str(f)) == {"inputs": ["x"], "channel_last": [True]}


def test_diff_json_into_a_closed_pipe_ends_quietly(tmp_path):
    """`infer-compare diff A B --json | head -1`: the reader goes away; no BrokenPipeError traceback."""
    # its diff is ~90 kB: more than a pipe holds
    big = ROOT / "reports" / "gpu-h100-resnet50" / "results.json"
    cmd = f"{PY} -m infer_compare.cli diff {big} {big} --json | head -c 1 >/dev/null"
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True,
                       env=python_env(), timeout=300)
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr
    assert p.returncode == 141, (p.returncode, p.stderr)


def test_hostile_results_never_write_outside_the_output_folder(tmp_path, capsys):
    d = _doc()
    d["rows"][0]["device"] = "../../escape"
    d["environment"]["cpu_model"] = "/etc/passwd"
    p = _write(tmp_path, d)
    out = tmp_path / "out"
    assert main(["merge", str(p), str(RESULTS), "-o", str(out), "--label", "../a", "--label", "/b"]) == 0
    capsys.readouterr()
    written = {x.relative_to(tmp_path).as_posix() for x in tmp_path.rglob("*") if x.is_file()}
    assert written - {"results.json"} <= {f"out/results.{e}" for e in ("json", "md", "csv", "html")}, written

