"""One run-options object (MeasureOptions) for compare, run_bundle, soak and the fleet; one spelling of
the output flag in every subcommand; one way to start a child, whose failure to start is a failed row."""

import re
import subprocess

import numpy as np
import pytest

from infer_compare.base.errors import UsageError
from infer_compare.measure.options import MeasureOptions

from .conftest import python_env


def test_keywords_and_the_object_are_the_same_options():
    opts = MeasureOptions.of(None, {"batch_sizes": [1, 8], "backends": ["onnxruntime"]}, "compare")
    assert opts == MeasureOptions(batch_sizes=[1, 8], backends=["onnxruntime"])
    on_top = MeasureOptions.of(opts, {"min_time_s": 0.5}, "compare")
    assert on_top.batch_sizes == [1, 8] and on_top.min_time_s == 0.5 and opts.min_time_s == 0.2
    sel = opts.selection()
    assert sel.batch_sizes == (1, 8) and sel.backends == ("onnxruntime",)
    with pytest.raises(TypeError, match="unexpected keyword argument 'batch_size'; "
                                        "did you mean 'batch_sizes'"):
        MeasureOptions.of(None, {"batch_size": [1]}, "compare")
    with pytest.raises(UsageError, match="--min-iters"):
        MeasureOptions(min_iters=0).selection()


def test_the_api_takes_the_object_or_its_fields_and_refuses_unknown_ones():
    from infer_compare import MeasureOptions as Public
    from infer_compare import compare, run_bundle
    from infer_compare.soak import soak

    assert Public is MeasureOptions
    for fn in (compare, run_bundle, soak):
        with pytest.raises(TypeError, match="did you mean 'warmup_iters'"):
            fn("lenet5", warmup=3)
    with pytest.raises(UsageError, match="min_time_s, target_ci do not apply"):
        soak("lenet5", min_time_s=1.0, target_ci=0.1)
    with pytest.raises(UsageError, match="--artifact applies to a comparison"):
        run_bundle("nowhere", artifacts=["x.onnx"])


def test_every_measuring_subcommand_builds_the_same_options_from_the_same_flags():
    from infer_compare.cli import build_parser
    from infer_compare.cli.args import build_run_parser, build_soak_parser
    from infer_compare.cli.flags import measure_options
    from infer_compare.cli.fleet import build_fleet_parser

    common = ["--backends", "onnxruntime", "--device", "cpu", "-b", "1,4", "--threads", "2", "--warmup", "3",
              "--cell-timeout", "99", "--tflite-int8"]
    compare = measure_options(build_parser().parse_args(["--model", "lenet5", *common]))
    run = measure_options(build_run_parser().parse_args(["B", *common]))
    soak = measure_options(build_soak_parser().parse_args(["--model", "lenet5", *common]))
    fleet = measure_options(build_fleet_parser().parse_args(["run", "B", "--address", "h:1", "-o", "x",
                                                             *common]))
    assert compare == run == soak == fleet
    assert compare.batch_sizes == (1, 4) and compare.warmup_iters == 3 and compare.cell_timeout_s == 99.0
    assert compare.runner_options["tflite"]["int8"] is True
    with pytest.raises(UsageError, match="batch"):
        measure_options(build_parser().parse_args(["--model", "lenet5", "-b", "0"]))


def _flags(p) -> set[str]:
    return {s for a in p._actions for s in a.option_strings if a.help != "==SUPPRESS=="}


@pytest.mark.parametrize("which", ["compare", "export", "run", "merge", "soak", "fleet run"])
def test_one_spelling_of_the_output_folder_with_the_old_one_hidden(which, capsys):
    from infer_compare.cli import build_parser
    from infer_compare.cli.args import (
        build_export_parser,
        build_merge_parser,
        build_run_parser,
        build_soak_parser,
    )
    from infer_compare.cli.fleet import build_fleet_parser

    parsers = {"compare": (build_parser, ["--model", "m"]), "export": (build_export_parser, ["--model", "m"]),
               "run": (build_run_parser, ["B"]), "merge": (build_merge_parser, ["a.json"]),
               "soak": (build_soak_parser, ["--model", "m"]),
               "fleet run": (lambda: build_fleet_parser()._subparsers._group_actions[0].choices["run"],
                             ["B", "--address", "h:1"])}
    make, argv = parsers[which]
    p = make()
    assert {"-o", "--output-dir"} <= _flags(p) and "--out" not in _flags(p)
    assert not re.search(r"--out(?![\w-])", p.format_help())
    for spelling in ("-o", "--output-dir", "--out"):
        assert p.parse_args([*argv, spelling, "X"]).output_dir == "X"
    if which in ("export", "merge", "fleet run"):  # required there: said in one line with the new spelling
        with pytest.raises(UsageError, match="-o/--output-dir"):
            p.parse_args(argv)


def test_report_writes_one_file_with_o_output_and_the_old_out():
    from infer_compare.cli.args import build_report_parser

    p = build_report_parser()
    assert {"-o", "--output"} <= _flags(p)
    for spelling in ("-o", "--output", "--out"):
        assert p.parse_args(["r.json", spelling, "f.html"]).output == "f.html"


def test_the_old_out_is_no_longer_ambiguous_for_run():
    """``run B --out X`` used to fail as ambiguous (--output-dir, --output-kind)."""
    from infer_compare.cli.args import build_run_parser

    assert build_run_parser().parse_args(["B", "--out", "X"]).output_dir == "X"


def _spec(tmp_path):
    from infer_compare.measure.bench import LoopSettings
    from infer_compare.measure.cells import CellSpec

    np.save(tmp_path / "in.npy", np.zeros((4, 1, 32, 32), np.float32))
    return CellSpec(runner="null", artifact="none", batch_sizes=(1, 2), inputs=str(tmp_path / "in.npy"),
                    loop=LoopSettings(warmup_iters=1, min_iters=3, min_time_s=0.0))


def test_a_child_that_cannot_start_is_a_failed_row_and_the_run_goes_on(tmp_path, monkeypatch):
    """As under qemu-user (vfork's EFAULT) or on a board short of processes: every batch size of the
    configuration is a failed row that says why; run_cell returns, it does not raise."""
    from infer_compare.measure.isolate import run_cell

    def refuse(*a, **kw):
        raise OSError(14, "Bad address")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    res = run_cell(_spec(tmp_path), 60, tmp_path, "nostart", env=python_env())
    assert [r.batch_size for r in res] == [1, 2]
    assert all(r.status == "run_failed" for r in res)
    assert "could not start the isolate process: OSError: [Errno 14] Bad address" in res[0].error
    assert res[1].error.startswith("not measured: could not start")


def test_every_child_of_the_tool_starts_through_the_launcher():
    """No module but host/launch.py starts a Python child of the tool (``python -m infer_compare...``)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "infer_compare"
    starters = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                      if "sys.executable, \"-m\"" in p.read_text())
    assert starters == ["fleet/join.py", "host/launch.py"]  # join.py starts Ray's own CLI (`ray start`)
    assert "\"-m\", \"ray.scripts.scripts\"" in (root / "fleet" / "join.py").read_text()


def test_the_launcher_kills_the_group_on_a_timeout_and_keeps_the_tail(tmp_path):
    from infer_compare.host import launch

    log = tmp_path / "out.txt"
    rc, timed_out = launch.run("infer_compare.no_such_module", [], 60, log)
    assert (rc, timed_out) == (1, False) and \
        "No module named infer_compare.no_such_module" in launch.read_tail(log)
    assert launch.describe_exit(-9) == "killed by signal SIGKILL"
    rc, timed_out = launch.run("timeit", ["-n", "1", "-r", "1", "import time; time.sleep(60)"], 1, log)
    assert timed_out and rc == -9
