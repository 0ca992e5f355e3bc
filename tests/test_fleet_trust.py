"""The fleet's trust model without a cluster: the untrusting channel (a node's answer read as data, never
unpickled: size bound, JSON, envelope, results schema; Ray's error objects named, not loaded), the executor
that uses it, a token file others may read refused, Ray's folder of the tool's own (mode 700). The same
with a real two-node cluster and a crafted node: tests/test_fleet_cluster.py."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import socket
import stat
import sys
import types
from pathlib import Path

import pytest

from infer_compare.base.errors import UsageError
from infer_compare.fleet import auth, channel, private, ray_executor
from infer_compare.fleet.executor import Job

from .conftest import ROOT

REPORT = ROOT / "tests" / "data" / "reports" / "cpu-resnet50-v1.json"
HAS_RAY = importlib.util.find_spec("ray") is not None


def _answer(**over) -> dict:
    return {"report": json.loads(REPORT.read_text()), "node": {"host": "h", "task": {"nice": 0}}, **over}


class _Marker:
    """Unpickling it writes a file: what a compromised node would send."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (eval, (f"__import__('pathlib').Path({self.path!r}).write_text('unpickled')",))


class _Buffer:
    def __init__(self, data: bytes):
        self.data = data

    def to_pybytes(self) -> bytes:
        return self.data


def _ray(data: bytes | None, meta: bytes, size: int | None = None, calls: list | None = None):
    """A stand-in for Ray as the channel reads it: the owner's size of the object, then its bytes and
    metadata."""
    calls = [] if calls is None else calls

    def get_objects(refs, timeout_ms):
        calls.append("get_objects")
        return [(_Buffer(data) if data is not None else None, meta, None)]

    worker = types.SimpleNamespace(core_worker=types.SimpleNamespace(get_objects=get_objects))
    ns = types.SimpleNamespace
    fake = ns(_private=ns(worker=ns(global_worker=worker)))
    exp = types.ModuleType("ray.experimental")
    exp.get_object_locations = lambda refs, timeout_ms=-1: {refs[0]: {"object_size": size}}
    return fake, exp


@pytest.fixture
def fake_ray(monkeypatch):
    def make(data, meta, size=None, calls=None):
        fake, exp = _ray(data, meta, size, calls)
        monkeypatch.setitem(sys.modules, "ray.experimental", exp)
        return fake
    return make


def test_a_json_answer_with_a_valid_report_is_taken(fake_ray):
    blob = channel.as_data(_answer())
    out, report = channel.read_answer(fake_ray(blob, b"RAW", len(blob) + 3), "ref", "node n cpu")
    assert out["report"]["rows"] and out["node"]["host"] == "h"
    assert len(report.rows) == len(out["report"]["rows"])


def test_a_pickled_answer_is_refused_and_never_unpickled(fake_ray, tmp_path):
    marker = tmp_path / "marker"
    blob = pickle.dumps(_Marker(marker))
    with pytest.raises(channel.Refused, match=r"node n cpu returned a pickled Python object \(Ray metadata "
                       r"'PYTHON'\), not the JSON the untrusted channel takes; not unpickled"):
        channel.read_answer(fake_ray(blob, b"PYTHON"), "ref", "node n cpu")
    with pytest.raises(channel.Refused, match="returned bytes that are not JSON"):  # a pickle as RAW bytes
        channel.read_answer(fake_ray(blob, b"RAW"), "ref", "node n cpu")
    assert not marker.exists()


def test_an_answer_over_the_bound_is_refused_before_it_is_fetched(fake_ray):
    calls: list = []
    ray = fake_ray(b"", b"RAW", size=channel.MAX_ANSWER_BYTES + 4, calls=calls)
    with pytest.raises(channel.Refused, match=r"returned 67108868 bytes, more than the 64 MiB .*; not "
                       "fetched"):
        channel.read_answer(ray, "ref", "node n cpu")
    assert calls == []  # the owner's size said so: nothing fetched
    ray = fake_ray(b'{"error": "' + b"x" * 40 + b'"}', b"RAW", size=None)  # size unknown: bounded once read
    with pytest.raises(channel.Refused, match="returned 53 bytes, more than the 0 MiB"):
        channel.read_answer(ray, "ref", "node n cpu", max_bytes=10)


@pytest.mark.parametrize("blob, why", [
    (b"\xff\xfe", "not JSON"),
    (b"[1, 2]", "node n cpu's answer: field (top level): Input should be a valid dictionary"),
    (b'{"error": "a", "absent": "b"}', "exactly one of report, error, absent expected, got error, absent"),
    (b'{"node": {"host": "h"}}', "exactly one of report, error, absent expected, got none"),
    (b'{"error": 7}', "field error: Input should be a valid string"),
    (b'{"error": "x", "node": {"task": {"nice": "0"}}}',
     "field node.task.nice: Input should be a valid integer"),
    (b'{"report": {"rows": []}}', "node n cpu's report: not an infer-compare results file"),
    (b"[" * 5000 + b"]" * 5000, "not JSON"),  # nesting past the parser's bound: one line, no RecursionError
])
def test_answers_that_break_the_envelope_or_the_results_schema_are_refused(blob, why):
    with pytest.raises(channel.Refused, match=None) as e:
        channel.parse_answer(blob, "node n cpu")
    assert why in str(e.value) and "\n" not in str(e.value)


def test_a_report_with_one_bad_field_is_refused_naming_it():
    a = _answer()
    a["report"]["rows"][0]["batch_size"] = "one"
    with pytest.raises(channel.Refused, match=r"node n cpu's report: field rows\[0\]\.batch_size"):
        channel.parse_answer(channel.as_data(a), "node n cpu")


def test_an_error_line_of_a_node_is_one_bounded_line():
    out, report = channel.parse_answer(channel.as_data({"error": "boom\n" * 500}), "node n cpu")
    assert "\n" not in out["error"] and len(out["error"]) == channel.MAX_LINE and report is None


@pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed (infer-compare[fleet])")
def test_rays_error_objects_are_named_not_loaded(fake_ray):
    from ray.core.generated.common_pb2 import ErrorType

    died = str(ErrorType.Value("NODE_DIED")).encode()
    with pytest.raises(channel.Lost, match="node n cpu: Ray reports NODE_DIED"):
        channel.read_answer(fake_ray(b"\x80\x05pickled details", died), "ref", "node n cpu")


def test_another_rays_internals_refuse_rather_than_unpickle(monkeypatch):
    exp = types.ModuleType("ray.experimental")
    exp.get_object_locations = lambda refs, timeout_ms=-1: {}
    monkeypatch.setitem(sys.modules, "ray.experimental", exp)
    with pytest.raises(channel.Refused, match="cannot be read as data with this Ray .*refused rather than "
                       "unpickled"):
        channel.read_answer(types.SimpleNamespace(), "ref", "node n cpu")


def _executor_ray(waits: list):
    """A stand-in Ray for the executor: tasks answer at once; ray.get would unpickle, so it fails the test."""
    got = {}

    def remote(**_kw):
        def wrap(fn):
            class _Task:
                def options(self, **_o):
                    return self

                def remote(self, *a):
                    ref = object()
                    got[ref] = (a, fn(*a))
                    return ref
            return _Task()
        return wrap

    def wait(p, num_returns, timeout, **kw):
        waits.append(kw)
        return p[:1], p[1:]

    def get(_ref):
        raise AssertionError("ray.get on an untrusted node's answer")
    fake = types.SimpleNamespace(remote=remote, put=lambda d: d, get=get, wait=wait,
                                 cancel=lambda *a, **k: None)
    return fake, got


def test_the_untrusted_executor_reads_as_data_and_refuses_absent_after_shipping(monkeypatch, tmp_path):
    (tmp_path / "manifest.json").write_text("{}")
    waits: list = []
    fake, got = _executor_ray(waits)

    def node(data, sha, job, path=""):  # a node that says it lacks the bundle, even once shipped
        return channel.as_data({"absent": "not here"} if job.target == "liar" else _answer())
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setattr(ray_executor, "run_on_node_data", node)
    monkeypatch.setattr(ray_executor, "pack", lambda path: (b"tar", "sha"))
    monkeypatch.setattr(ray_executor, "read_answer",
                        lambda ray, ref, where: channel.parse_answer(got[ref][1], where))
    here = socket.gethostname()
    jobs = [Job("ok", {}, host=here), Job("liar", {}, host=here)]
    ok, liar = ray_executor.RayExecutor(poll_s=0, untrusted=True).run(str(tmp_path), jobs, lambda n, m: None)
    assert ok.report["rows"] and not ok.error and ok.checked.rows
    assert liar.error == "answer refused: node liar said the bundle was absent after it was shipped"
    assert waits and all(w == {"fetch_local": False} for w in waits)  # nothing fetched before its size


def test_a_token_file_others_may_read_is_refused(monkeypatch, tmp_path):
    tok = tmp_path / "auth_token"
    tok.write_text("0" * 64)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tok))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    for mode in (0o644, 0o640, 0o604):
        tok.chmod(mode)
        with pytest.raises(UsageError) as e:
            auth.enable(create=True)
        assert str(e.value) == (f"the Ray token file {tok} is readable by others (mode {mode:o}): "
                                f"chmod 600 {tok}")
    tok.chmod(0o600)
    assert auth.enable() == f"token authentication on (token: {tok})"


def test_a_new_token_and_its_folder_are_this_users_only(monkeypatch, tmp_path):
    tok = tmp_path / "dot-ray" / "auth_token"
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tok))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    old = os.umask(0o022)
    try:
        auth.enable(create=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE(tok.stat().st_mode) == 0o600 and stat.S_IMODE(tok.parent.stat().st_mode) == 0o700


def test_rays_folder_is_the_tools_own_mode_700(monkeypatch, tmp_path):
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "t"))
    d = private.ray_temp_dir()
    base = tmp_path / "t" / f"ic-ray-{os.geteuid()}"
    assert d == base / "ray" and stat.S_IMODE(base.stat().st_mode) == 0o700
    base.chmod(0o777)  # one of this user's, opened: narrowed again
    private.ray_temp_dir()
    assert stat.S_IMODE(base.stat().st_mode) == 0o700
    base.rmdir()
    base.symlink_to(tmp_path)  # planted by someone: refused
    with pytest.raises(UsageError, match=r"is a link, not this user's: remove it or set RAY_TMPDIR"):
        private.ray_temp_dir()


def test_what_ray_opens_to_everyone_is_narrowed_to_this_user(tmp_path):
    root = tmp_path / "ray"
    (root / "session" / "sockets").mkdir(parents=True)
    (root / "session" / "logs.txt").write_text("x")
    (root / "latest").symlink_to(root / "session")
    for p in (root, root / "session", root / "session" / "sockets"):
        p.chmod(0o777)
    (root / "session" / "logs.txt").chmod(0o644)
    assert private.tighten(root) == 4
    assert {stat.S_IMODE(p.lstat().st_mode) for p in root.rglob("*") if not p.is_symlink()} | \
        {stat.S_IMODE(root.stat().st_mode)} == {0o700, 0o600}
    assert private.tighten(root) == 0


def test_a_report_that_breaks_the_schema_is_a_refused_job_and_the_others_are_kept():
    """Without --untrusted too: the node's report is checked before it is merged; one that breaks the results
    schema fails that node's job with the reason, and every other node's rows are kept."""
    from infer_compare.fleet.executor import JobResult
    from infer_compare.fleet.run import run_fleet

    good, bad = _answer()["report"], _answer()["report"]
    bad["rows"][0]["status"] = "great"

    class _Executor:
        def run(self, bundle, jobs, on_event):
            return [JobResult(j, good if j.target == "a" else bad, node={"host": j.target}) for j in jobs]
    merged, results = run_fleet("", _Executor(), [Job("a", {}), Job("b", {})], lambda n, m: None, ["t"])
    assert results[1].report is None and results[1].error.startswith("answer refused: node b's report: field "
                                                                     "rows[0].status")
    assert merged.machines and list(merged.machines) == ["a"] and not merged.complete
    assert {r.extra.get("machine") for r in merged.rows} == {"a", "b"}
    assert any(r.status == "run_failed" and "answer refused" in r.reason for r in merged.rows)


def test_an_answer_that_is_not_a_dict_is_refused_without_untrusted_too(monkeypatch, tmp_path):
    (tmp_path / "manifest.json").write_text("{}")
    fake, got = _executor_ray([])
    fake.get = lambda ref: got[ref][1]
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setattr(ray_executor, "run_on_node", lambda data, sha, job, path="": b"{}")
    (res,) = ray_executor.RayExecutor(poll_s=0).run(str(tmp_path), [Job("n", {}, host=socket.gethostname())],
                                                    lambda n, m: None)
    assert res.error == "answer refused: node n returned an object of type bytes, not an answer"
