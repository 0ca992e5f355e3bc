"""The command line, through a real subprocess: help, env, bad input (one line, exit 2,
no traceback), a real run, and the exit code of a parity failure."""

import json
import os
import re
import subprocess
import sys

import pytest

from infer_compare.base.records import SCHEMA_VERSION

from .conftest import PY, python_env


def cli(*args, cwd=None, timeout=600):
    return subprocess.run([PY, "-m", "infer_compare.cli", *args], capture_output=True, text=True,
                          env=python_env(), cwd=cwd, timeout=timeout)


def _one_line_error(p, *needles):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    err = [ln for ln in p.stderr.splitlines() if ln.startswith("infer-compare: error:")]
    assert len(err) == 1, p.stderr
    for n in needles:
        assert n in err[0], err[0]


def test_help_and_version():
    p = cli("--help")
    assert p.returncode == 0 and "--model" in p.stdout and "--batch-sizes" in p.stdout
    p = cli("--version")
    assert p.returncode == 0 and "infer-compare" in p.stdout


def _help80(*args) -> list[str]:
    env = python_env()
    env["COLUMNS"] = "80"
    p = subprocess.run([PY, "-m", "infer_compare.cli", *args, "--help"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_help_leads_with_the_subcommands_and_the_ten_most_used_options():
    from infer_compare.cli import SUBCOMMANDS

    lines = _help80()
    top = lines[:16]  # the first screen: usage, then one line per subcommand
    assert all(len(ln) <= 80 for ln in top), top
    named = [ln.split()[0] for ln in top if ln.startswith("  ") and not ln.startswith("   ")]
    assert named == ["env", "report", "diff", "gate", "export", "run", "merge", "soak", "fleet", "compare"]
    assert set(named) == set(SUBCOMMANDS)
    headings = [ln for ln in lines if ln and not ln.startswith(" ") and ln.endswith(":")]
    assert headings[0] == "subcommands (each has --help):"
    assert headings[1].startswith("most used options") and headings[-1] == "help:", headings
    first = lines.index(headings[1])
    group = lines[first + 1:lines.index(headings[2])]
    flags = [ln.split()[0].rstrip(",") for ln in group if re.match(r"  -", ln)]
    assert flags == ["--model", "--input-shape", "--data", "--backends", "--formats", "--precisions",
                     "--device", "--batch-sizes", "--max-time", "--output-dir"]
    model = " ".join(" ".join(group).split())
    assert ".tflite" in model.split("--input-shape")[0]  # --model takes a .tflite file too
    order = ["what to measure", "your data", "how to measure", "PyTorch options", "output and cache",
             "regression gate", "help"]  # the rest by topic
    at = [next(i for i, h in enumerate(headings) if h.startswith(t)) for t in order]
    assert at == sorted(at) and at[0] == 2, headings


def test_every_option_keeps_a_help_text():
    import argparse

    from infer_compare.cli import build_parser, build_run_parser

    for p in (build_parser(), build_run_parser()):
        for a in p._actions:
            assert a.help and a.help.strip(), a.option_strings or a.dest
            assert a.help == argparse.SUPPRESS or len(a.help) > 5


def test_an_unknown_option_is_one_line_naming_the_closest():
    p = cli("--modle", "x")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.splitlines() == ["infer-compare: error: unknown option --modle (did you mean --model?)"]
    p = cli("--model", "lenet5", "--bach-sizes", "1")
    assert p.stderr.splitlines() == [
        "infer-compare: error: unknown option --bach-sizes (did you mean --batch-sizes?)"]
    assert p.returncode == 2


@pytest.mark.parametrize("argv, line", [
    (["envv"], "unknown subcommand envv (did you mean env?)"),
    (["mrege", "a.json"], "unknown subcommand mrege (did you mean merge?)"),
    (["report", "r.json", "--fromat", "html"], "unknown option --fromat (did you mean --format?)"),
    (["fleet", "jion"], "unknown subcommand fleet jion (did you mean join?)"),
    (["diff", "a.json", "b.json", "--fial-on", "p50:+5%"],
     "unknown option --fial-on (did you mean --fail-on?)"),
])
def test_subcommands_and_their_options_misspelled_are_one_line(argv, line):
    p = cli(*argv)
    assert p.returncode == 2 and p.stderr.splitlines() == [f"infer-compare: error: {line}"], p.stderr


def test_env_lists_every_backend():
    from infer_compare.catalog.formats import RUNNERS

    p = cli("env", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    names = {r["backend"] for r in d["backends"]}
    assert names == set(RUNNERS)
    for r in d["backends"]:
        assert r["available"] or r["reason"], r
    assert d["environment"]["cores_logical"] >= 1
    p = cli("env")
    assert p.returncode == 0 and "onnxruntime" in p.stdout


def test_unknown_model_suggests_closest(cache_dir):
    _one_line_error(cli("--model", "resnet5O"), "unknown model", "resnet50")
    _one_line_error(cli("--model", "lenet6"), "lenet5")


@pytest.mark.parametrize("bad", ["1,x", "0", "1,,8", "-4", "99999", "1.5"])
def test_bad_batch_list(bad, tmp_path):
    _one_line_error(cli("--model", "lenet5", "--batch-sizes", bad, "-o", str(tmp_path)), "batch size")


def test_missing_and_corrupt_weights(tmp_path):
    _one_line_error(cli("--model", "lenet5", "--weights", str(tmp_path / "nope.pt")),
                    "weights file not found")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"this is not a torch file")
    _one_line_error(cli("--model", "lenet5", "--weights", str(bad), "-o", str(tmp_path / "o")),
                    "cannot read weights file")


def test_unwritable_output_dir(tmp_path):
    if os.geteuid() == 0:
        target = "/proc/infer-compare-out"  # not writable even for root
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        target = str(ro / "sub")
    _one_line_error(cli("--model", "lenet5", "-o", target), "not writable")


def test_unknown_backend_and_device():
    _one_line_error(cli("--model", "lenet5", "--backends", "onnxruntme"), "unknown backend", "onnxruntime")
    _one_line_error(cli("--model", "lenet5", "--device", "tpu"), "unknown device")


def test_real_run_writes_reports(cache_dir, tmp_path):
    out = tmp_path / "out"
    p = cli("--model", "lenet5", "--backends", "onnxruntime", "--device", "cpu", "--batch-sizes", "1,2",
            "--min-time", "0.05", "--min-iters", "5", "--warmup", "1", "-o", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    d = json.loads((out / "results.json").read_text())
    assert d["schema_version"] == SCHEMA_VERSION and d["command"][0] == "infer-compare"
    ok = [r for r in d["rows"] if r["status"] == "ok"]
    assert {r["batch_size"] for r in ok} == {1, 2}
    assert all(len(r["samples_ns"]) == r["latency"]["count"] for r in ok)
    # parity is checked in every batch size: all 450 digits at the largest, a subset of 8 at batch 1
    b1 = next(r for r in ok if r["batch_size"] == 1)
    b2 = next(r for r in ok if r["batch_size"] == 2)
    assert b2["parity"]["n"] == 450 and b1["parity"]["n"] == 8
    assert b1["parity"]["passed"] and b2["parity"]["passed"]
    assert "onnxruntime" in p.stdout and "p50 ms" in p.stdout
    md = (out / "results.md").read_text()
    assert "| onnxruntime | onnx | fp32 | cpu | 1 |" in md


def test_parity_failure_exits_1(cache_dir, tmp_path, monkeypatch, capsys):
    """A row outside its tolerance is parity_failed and makes the exit code 1."""
    from infer_compare import cli as climod
    from infer_compare.catalog import formats

    monkeypatch.setitem(formats.TOLERANCES, "fp32",
                        formats.Tolerance(min_cosine=1.1, max_rel_err=0, min_top1=1))
    code = climod.main(["--model", "lenet5", "--backends", "onnxruntime", "--device", "cpu",
                        "--batch-sizes", "1", "--min-time", "0", "--min-iters", "2", "--warmup", "1",
                        "-o", str(tmp_path), "-q"])
    assert code == 1
    d = json.loads((tmp_path / "results.json").read_text())
    failed = [r for r in d["rows"] if r["status"] == "parity_failed"]
    assert failed and "cosine" in failed[0]["reason"]


def test_requested_backend_skipped_exits_1(cache_dir, tmp_path):
    p = cli("--model", "lenet5", "--backends", "tensorrt", "--batch-sizes", "1", "-o", str(tmp_path), "-q")
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "explicitly requested" in p.stderr


def test_core_import_is_light():
    code = ("import sys, infer_compare, infer_compare.cli, infer_compare.api, infer_compare.base.records, "
            "infer_compare.catalog.formats, infer_compare.report, infer_compare.host.env\n"
            "heavy = [m for m in ('torch', 'onnxruntime', 'openvino', 'tensorflow', 'tensorrt', 'onnx') "
            "if m in sys.modules]\nassert not heavy, heavy")
    p = subprocess.run([sys.executable, "-c", code], env=python_env(), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_precision_run_in_another_format_is_not_a_failure():
    """OpenVINO skips fp32 on the ONNX file (its float rows run its own IR): with --backends openvino
    --precisions fp32 named, that skip is not a requested row that did not run; fp32 missing everywhere is."""
    from types import SimpleNamespace as NS

    from infer_compare.cli.output import requested_not_run

    def row(fmt, status, kind=None, batch=1):
        return NS(backend="openvino", format=fmt, precision="fp32", device="cpu", batch_size=batch,
                  status=status, skip_kind=kind)

    settings = NS(requested={"backends": ["openvino"], "precisions": ["fp32"], "devices": ["cpu"]})
    skipped = row("onnx", "skipped", "unsupported", batch=None)  # a format skip has no batch size
    assert requested_not_run(NS(settings=settings, rows=[skipped, row("openvino", "ok")])) == []
    assert requested_not_run(NS(settings=settings, rows=[skipped, row("openvino", "run_failed")])) != []
    assert skipped in requested_not_run(NS(settings=settings, rows=[skipped]))
