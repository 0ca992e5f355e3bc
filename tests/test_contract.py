"""The contract every registered runtime keeps, parametrized over the registry: its
runner and exporter paths resolve, probes never raise and say why and how to install
when unavailable, declared options are well formed and round-trip through the CLI
and the process boundary, and no runtime package imports another."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

from infer_compare import backends
from infer_compare.backends.exporter import Exporter
from infer_compare.backends.runner import Runner
from infer_compare.base.errors import UsageError
from infer_compare.base.records import Availability
from infer_compare.catalog.device_kinds import DEVICE_KINDS
from infer_compare.catalog.formats import FORMATS, PRECISIONS, TOLERANCES, build_chain
from infer_compare.catalog.options import Options
from infer_compare.catalog.runtimes import load_impl, options_class, runners, runtimes
from infer_compare.cli import build_parser, build_run_parser, runner_options_from_args
from infer_compare.cli.flags import runner_flags

RUNNERS = sorted(runners())
EXPORTERS = sorted({(f.name, f.exporter_for(f.artifact_for(p))) for f in FORMATS.values()
                    for p in f.precisions})
PACKAGE = Path(backends.__file__).parent


def test_every_runtime_folder_is_registered():
    folders = {m.name for m in pkgutil.iter_modules(backends.__path__) if m.ispkg}
    assert folders == {rt.name for rt in runtimes()}
    assert folders >= {"pytorch", "onnxruntime", "openvino", "tensorrt", "tflite", "null"}


@pytest.mark.parametrize("name", RUNNERS)
def test_runner_resolves_and_declares_what_it_runs(name):
    info = runners()[name]
    cls = load_impl(info.impl)
    assert issubclass(cls, Runner)
    assert info.device_kinds and set(info.device_kinds) <= set(DEVICE_KINDS)
    assert set(info.formats) <= set(FORMATS)
    assert issubclass(options_class(name), Options)


@pytest.mark.parametrize("name", RUNNERS)
@pytest.mark.parametrize("kind", sorted(DEVICE_KINDS))
def test_runner_probe_never_raises_and_explains(name, kind):
    av = load_impl(runners()[name].impl).probe(kind)
    assert isinstance(av, Availability)
    if not av.available:
        assert av.reason.strip(), f"{name} on {kind}: unavailable without a reason"
        if kind in runners()[name].device_kinds and not av.reason.lower().startswith(("no ", "the ")):
            assert av.hint.strip(), f"{name} on {kind}: no install hint for '{av.reason}'"


@pytest.mark.parametrize("fmt,impl", EXPORTERS)
def test_exporter_resolves_and_probe_explains(fmt, impl):
    cls = load_impl(impl)
    assert issubclass(cls, Exporter)
    av = cls.probe()
    assert isinstance(av, Availability)
    if not av.available:
        assert av.reason.strip() and (av.hint.strip() or "GPU" in av.reason), (fmt, av)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_format_rows_are_consistent(fmt):
    f = FORMATS[fmt]
    assert f.precisions and set(f.precisions) <= set(PRECISIONS)
    assert f.runners, f"no runtime declares that it runs {fmt}"
    for p in f.precisions:
        tol = f.tolerance(p)
        assert tol is f.tolerances.get(p, TOLERANCES[p])
        chain = build_chain(fmt, p)
        assert chain[0][0] == "pytorch" and chain[-1] == (fmt, f.artifact_for(p))
    if f.options_from is not None:
        assert f.options_from in runners()


def test_a_wrong_registry_string_fails_here_not_as_a_skipped_row():
    with pytest.raises((ImportError, AttributeError)):
        load_impl("infer_compare.backends.onnxruntime.run:OnnxRuntimeRunnr")


@pytest.mark.parametrize("name", RUNNERS)
def test_options_round_trip_through_the_process_boundary(name):
    cls = options_class(name)
    default = cls()
    assert cls.from_dict(default.to_dict()) == default
    for f in cls.fields_info():
        assert f.help.strip(), f"{name}.{f.name} has no help text"
        if f.choices is not None:
            assert f.default in f.choices


def _flag_value(f):
    if f.kind == "bool":
        return None
    if f.choices:
        return next(c for c in f.choices if c not in ("", f.default))
    return {"int": "7", "float": "7.5", "str": "x"}[f.kind]


@pytest.mark.parametrize("build", [build_parser, build_run_parser], ids=["compare", "run"])
def test_every_declared_option_has_a_flag_that_reaches_its_runner(build):
    base = ["--model", "lenet5"] if build is build_parser else ["bundle"]
    for fl in runner_flags():
        v = _flag_value(fl.field)
        args = build().parse_args(base + [fl.flag] + ([] if v is None else [v]))
        got = runner_options_from_args(args)
        for runner, f in fl.owners:
            want = ((not f.default) if f.kind == "bool"
                    else {"int": int, "float": float, "str": str}[f.kind](v))
            assert got[runner][f.name] == want, (fl.flag, runner)
            options_class(runner).build(runner, got[runner])  # and it validates


def test_run_offers_the_same_runner_options_as_the_comparison():
    def flags(p):
        return {a for act in p._actions for a in act.option_strings}

    mine = {fl.flag for fl in runner_flags()}
    assert mine <= flags(build_parser()) and mine <= flags(build_run_parser())


def test_unknown_or_invalid_runner_options_are_usage_errors_naming_the_runner():
    from infer_compare.measure.plan import check_runner_options

    with pytest.raises(UsageError, match="openvino.*performance_hint"):
        check_runner_options({"openvino": {"perf_hint": "LATENCY"}})
    with pytest.raises(UsageError, match="must be one of"):
        check_runner_options({"openvino": {"performance_hint": "FAST"}})
    with pytest.raises(UsageError, match="takes a number"):
        check_runner_options({"tensorrt": {"workspace_mib": "big"}})
    with pytest.raises(UsageError, match="unknown runner"):
        check_runner_options({"openvinoo": {}})
    assert check_runner_options({"openvino": {"performance_hint": "THROUGHPUT"}})[
        "openvino"].performance_hint == "THROUGHPUT"


@pytest.mark.parametrize("rt", sorted(rt.name for rt in runtimes()))
def test_runtime_declaration_imports_nothing_heavy(rt):
    import sys

    before = set(sys.modules)
    importlib.reload(importlib.import_module(f"infer_compare.backends.{rt}"))
    heavy = {"torch", "onnxruntime", "openvino", "tensorrt", "ai_edge_litert", "tensorflow"}
    assert not (set(sys.modules) - before) & heavy
