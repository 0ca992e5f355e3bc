"""The A/B gate's fork servers (regress/ab_servers.py): launched before the bundles are verified for the
runners the selection and bundle B's manifest name, every one of them done importing before anything is timed,
each said ready once, where it is first used."""

from __future__ import annotations

import json

import pytest

from infer_compare.base.errors import UsageError
from infer_compare.base.progress import Progress
from infer_compare.measure.options import MeasureOptions
from infer_compare.regress import ab_servers
from infer_compare.regress.ab_servers import SideServers, early_runners, launch_early


class _Log(Progress):
    def __init__(self):
        self.lines: list[str] = []

    def log(self, msg: str) -> None:
        self.lines.append(msg)


def test_every_launched_server_has_imported_before_the_first_configuration_gets_its_own(monkeypatch):
    mods = {"x": ("json",), "y": ("csv", "statistics")}
    monkeypatch.setattr(ab_servers, "server_modules", lambda runner: mods.get(runner, ()))
    log = _Log()
    servers = SideServers({"a": None, "b": None}, log)
    try:
        for runner in ("x", "y"):
            servers.launch(runner)
        (fs,) = servers.distinct()  # one interpreter: one set for both sides
        assert len(fs.servers) == 2 and not any(s.ready for s in fs.servers.values())
        got = servers.for_runner("x")
        assert got["a"] is got["b"] is not None and got["a"].modules == ("json",)
        # y's imports are done too: nothing imports while timed
        assert all(s.ready for s in fs.servers.values())
        assert [m for m in log.lines if "ready" in m] == ["sides A and B: fork server ready: "
                                                          "json imported once for all configurations"]
        assert servers.for_runner("y")["b"].modules == ("csv", "statistics")
        assert sum("ready: csv, statistics" in m for m in log.lines) == 1
        servers.for_runner("y")
        assert sum("ready" in m for m in log.lines) == 2  # each said once
        assert servers.for_runner("nothing") == {}
    finally:
        servers.close()


def _bundle(tmp_path, formats):
    (tmp_path / "manifest.json").write_text(json.dumps({"artifacts": [{"format": f} for f in formats]}))
    return tmp_path


def test_the_runners_launched_early_follow_the_selection_and_the_bundle(tmp_path):
    b = _bundle(tmp_path, ["pytorch", "onnx"])
    sel = MeasureOptions(backends=["pytorch", "onnxruntime", "openvino"], devices=["cpu"])
    assert early_runners(b, sel) == ["pytorch", "onnxruntime", "openvino"]  # OpenVINO reads ONNX too
    assert early_runners(b, MeasureOptions(backends=["pytorch", "onnxruntime"],
                                           formats=["onnx"])) == ["onnxruntime"]
    assert "tensorrt" not in early_runners(b, MeasureOptions())  # not on the CPU
    assert early_runners(b, MeasureOptions(backends=["pytorch"], devices=["edgetpu"])) == []
    (tmp_path / "manifest.json").write_text("{not json")
    assert early_runners(b, sel) == []  # the verification says what is wrong, later
    assert early_runners(tmp_path / "missing", sel) == []


def test_the_idle_work_runs_in_the_wait_for_the_servers_and_only_there(monkeypatch, tmp_path):
    """The CLI gives the report writers' imports as ``idle``: run once, in the main thread, while a server is
    still importing; a gate whose servers are all ready runs nothing before its first block."""
    (tmp_path / "slow_import_for_test.py").write_text("import time\ntime.sleep(1.0)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the servers' interpreters find it
    monkeypatch.setattr(ab_servers, "server_modules", lambda runner: ("slow_import_for_test",))
    seen: list[object] = []
    servers = SideServers({"a": None, "b": None}, _Log(), idle=lambda: seen.append(servers.importing()))
    late = SideServers({"a": None, "b": None}, _Log(), idle=lambda: seen.append("late"))
    try:
        servers.launch("x")
        assert servers.for_runner("x")["b"].ready
        assert seen == [True]  # it ran while the server was importing, before the wait
        servers.for_runner("x")
        assert seen == [True]  # once
        late.launch("x")
        (fs,) = late.distinct()
        fs.settle()  # every server ready before the first configuration asks
        assert not late.importing() and late.for_runner("x")["a"].ready
        assert seen == [True]  # nothing added before the first block
    finally:
        servers.close()
        late.close()


def test_launch_early_refuses_a_missing_interpreter_before_launching_anything(monkeypatch, tmp_path):
    b = _bundle(tmp_path, ["onnx"])
    monkeypatch.setattr(ab_servers, "server_modules", lambda runner: ("json",))
    launched: list[str] = []
    monkeypatch.setattr(SideServers, "launch", lambda self, runner: launched.append(runner))
    sel = MeasureOptions(backends=["onnxruntime"], devices=["cpu"])
    with pytest.raises(UsageError, match="no-such-python: no such interpreter"):
        launch_early(b, sel, {"a": None, "b": str(tmp_path / "no-such-python")}, _Log())
    assert launched == []
    servers = launch_early(b, sel, {"a": None, "b": None}, _Log())
    assert launched == ["onnxruntime"] and servers.idle is None
