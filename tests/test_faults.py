"""Faults, one test each: cache artifacts tampered with, truncated or deleted; a tampered
reference; concurrent builders; an unwritable or full cache; incomplete reports refused
by the regression gate. Small fake builds stand in for exports (they write a few files),
plus one end-to-end check on the real LeNet-5 cache."""

from __future__ import annotations

import errno
import multiprocessing
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from infer_compare.base.cache import FULL_HASH_BELOW, MANIFEST, Cache, key_of, read_entry

BIG = FULL_HASH_BELOW + 4096  # checked by size and mtime, hashed only when they changed
PARTS = {"model": "fake", "precision": "fp32"}


def _payload(n: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


class FakeExport:
    """A build function that writes a big weights file and a small graph file, and counts its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, d: Path) -> dict:
        self.calls += 1
        (d / "model.bin").write_bytes(_payload(BIG))
        (d / "sub").mkdir()
        (d / "sub" / "model.xml").write_text("<net>fake</net>\n")
        return {"file": "sub/model.xml"}


def _cache(root: Path, **kw) -> tuple[Cache, list[str]]:
    said: list[str] = []
    return Cache(root, warn=said.append, **kw), said


def _tamper(p: Path) -> None:
    """Change bytes in place, keeping the size; move the mtime on as a real write would
    (file timestamps are coarse: a write within the same tick can keep the old mtime)."""
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    st = p.stat()
    p.write_bytes(bytes(data))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


FAULTS = {
    "tampered": lambda e: _tamper(e.file("model.bin")),
    "tampered-small": lambda e: _tamper(e.file("sub/model.xml")),
    "truncated": lambda e: e.file("model.bin").write_bytes(e.file("model.bin").read_bytes()[:1000]),
    "deleted": lambda e: e.file("sub/model.xml").unlink(),
}
EXPECTED = {"tampered": "model.bin does not match the sha256",
            "tampered-small": "sub/model.xml does not match",
            "truncated": "model.bin has 1000 bytes", "deleted": "sub/model.xml is missing"}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_damaged_artifact_is_rebuilt_with_one_line(tmp_path, fault):
    cache, said = _cache(tmp_path)
    build = FakeExport()
    first = cache.get_or_build("openvino", PARTS, build)
    assert not first.hit and cache.get_or_build("openvino", PARTS, build).hit and build.calls == 1
    FAULTS[fault](first)

    again = cache.get_or_build("openvino", PARTS, build)
    assert build.calls == 2 and not again.hit and again.path == first.path
    assert EXPECTED[fault] in again.rebuilt_because
    assert len(said) == 1 and "\n" not in said[0]
    assert (said[0].startswith(f"cache entry openvino/{key_of(PARTS)} is not trusted: ")
            and EXPECTED[fault] in said[0])
    assert again.file("model.bin").read_bytes() == _payload(BIG)
    assert again.file("sub/model.xml").read_text() == "<net>fake</net>\n"
    assert cache.get_or_build("openvino", PARTS, build).hit and build.calls == 2  # the new entry is trusted
    assert not [p.name for p in (tmp_path / "openvino").iterdir() if p.name.startswith((".tmp", ".trash"))]


def test_same_size_tamper_with_old_mtime_needs_full_verification(tmp_path):
    cache, _ = _cache(tmp_path)
    build = FakeExport()
    e = cache.get_or_build("onnx", PARTS, build)
    p = e.file("model.bin")
    st = p.stat()
    _tamper(p)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # size and mtime as recorded: only a hash can tell
    full, said = _cache(tmp_path, verify="full")
    again = full.get_or_build("onnx", PARTS, build)
    assert build.calls == 2 and "model.bin does not match" in again.rebuilt_because and len(said) == 1


def test_manifest_without_hashes_is_not_trusted(tmp_path):
    """Entries written before the manifest recorded hashes are rebuilt once, not trusted."""
    cache, said = _cache(tmp_path)
    build = FakeExport()
    e = cache.get_or_build("onnx", PARTS, build)
    man = e.file(MANIFEST)
    man.write_text(man.read_text().replace('"files"', '"old_files"'))
    assert cache.lookup("onnx", PARTS) is None
    again = cache.get_or_build("onnx", PARTS, build)
    assert build.calls == 2 and "no file hashes" in again.rebuilt_because and len(said) == 1


def test_tampered_reference_is_rebuilt(tmp_path):
    """The real reference code path (prepare.reference_outputs) on a tiny network: a changed
    reference.npy would silently move every parity verdict; it must be rebuilt."""
    torch = pytest.importorskip("torch")
    from infer_compare.prepare.prepared import reference_outputs as _reference

    class DS:
        eval = np.random.default_rng(0).standard_normal((20, 6)).astype(np.float32)

        @staticmethod
        def digest() -> str:
            return "fake-inputs"

    torch.manual_seed(0)
    net = torch.nn.Linear(6, 3).eval()
    cache, said = _cache(tmp_path)
    ref = _reference(cache, net, "w0", DS)
    path = next((tmp_path / "reference").glob("*/reference.npy"))
    bad = ref.copy()
    bad[3, 1] += 0.5
    np.save(path, bad)  # same shape, same size: a silent change of the reference
    again = _reference(cache, net, "w0", DS)
    np.testing.assert_array_equal(again, ref)
    assert len(said) == 1 and "reference.npy does not match the sha256" in said[0]


# ---------------------------------------------------------------------- concurrency


def test_two_threads_racing_without_a_lock_both_get_a_verified_entry(tmp_path):
    """No lock: both build at the same time; the loser of the rename uses the winner's entry."""
    barrier = threading.Barrier(2, timeout=30)
    seen: list = []

    def build(d: Path) -> dict:
        (d / "model.bin").write_bytes(_payload(BIG, seed=1))
        barrier.wait()  # both builds are in flight before either installs
        return {"file": "model.bin"}

    def worker():
        c = Cache(tmp_path, locking=False, warn=seen.append)
        seen.append(c.get_or_build("onnx", PARTS, build))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    entries = [x for x in seen if not isinstance(x, str)]
    assert len(entries) == 2 and len(seen) == 2, seen  # no warnings
    assert sorted(e.hit for e in entries) == [False, True]
    assert entries[0].path == entries[1].path
    assert read_entry(entries[0].path, full=True)[0] is not None
    assert entries[0].file("model.bin").read_bytes() == _payload(BIG, seed=1)
    assert [p.name for p in (tmp_path / "onnx").iterdir()] == [key_of(PARTS)]


def _proc_build(root: str, log: str, barrier) -> None:
    def build(d: Path) -> dict:
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(0.5)  # widen the window in which the other process would build too
        (d / "model.bin").write_bytes(_payload(BIG, seed=2))
        return {"file": "model.bin"}

    barrier.wait(30)
    e = Cache(root).get_or_build("onnx", PARTS, build)
    ok = (read_entry(e.path, full=True)[0] is not None
          and e.file("model.bin").read_bytes() == _payload(BIG, seed=2))
    raise SystemExit(0 if ok and not e.private else 3)


def test_two_processes_on_one_fresh_cache(tmp_path):
    """Two runs building the same entry at once: both get a verified entry; with the
    per-entry lock (filelock), only one of them builds."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(2)
    log = tmp_path / "builds.log"
    procs = [ctx.Process(target=_proc_build, args=(str(tmp_path / "c"), str(log), barrier)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    builds = log.read_text().split()
    locking = Cache(tmp_path).locking
    assert len(builds) == (1 if locking else len(builds)) and 1 <= len(builds) <= 2
    assert Cache(tmp_path / "c").lookup("onnx", PARTS) is not None
    left = sorted(p.name for p in (tmp_path / "c" / "onnx").iterdir() if not p.name.endswith(".lock"))
    assert left == [key_of(PARTS)]


def test_no_cache_builds_privately_and_keeps_the_shared_entry(tmp_path):
    shared_cache, _ = _cache(tmp_path)
    build = FakeExport()
    shared = shared_cache.get_or_build("onnx", PARTS, build)
    before = shared.file(MANIFEST).read_bytes()
    with open(shared.file("model.bin"), "rb") as reader:  # another run is reading it
        nocache = Cache(tmp_path, enabled=False)
        private = nocache.get_or_build("onnx", PARTS, build)
        assert build.calls == 2 and private.private and not private.hit
        assert not private.path.is_relative_to(tmp_path)
        assert private.file("model.bin").read_bytes() == _payload(BIG)
        assert reader.read() == _payload(BIG)
    assert shared.file(MANIFEST).read_bytes() == before and shared_cache.lookup("onnx", PARTS) is not None
    nocache.close()
    assert not private.path.exists() and shared.path.exists()


# ------------------------------------------------------------- unwritable or full cache


def test_cache_path_that_cannot_be_created_warns_and_builds_privately(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    cache, said = _cache(blocker / "cache")  # ENOTDIR, even for root
    build = FakeExport()
    e = cache.get_or_build("onnx", PARTS, build)
    e2 = cache.get_or_build("onnx", {**PARTS, "precision": "fp16"}, build)
    assert e.private and e2.private and build.calls == 2
    assert e.file("model.bin").read_bytes() == _payload(BIG) and e.file("sub/model.xml").is_file()
    assert len(said) == 1 and "cannot write to the cache" in said[0] and str(blocker) in said[0]
    assert cache.get_or_build("onnx", PARTS, build) is e and build.calls == 2  # reused within the run
    cache.close()
    assert not e.path.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory anyway")
def test_read_only_cache_still_serves_its_entries(tmp_path):
    root = tmp_path / "ro"
    build = FakeExport()
    Cache(root).get_or_build("onnx", PARTS, build)
    for d in (root, root / "onnx"):
        d.chmod(0o555)
    try:
        cache, said = _cache(root)
        assert cache.get_or_build("onnx", PARTS, build).hit and build.calls == 1
        e = cache.get_or_build("onnx", {**PARTS, "precision": "int8"}, build)
        assert e.private and build.calls == 2 and len(said) == 1 and "cannot write" in said[0]
    finally:
        for d in (root, root / "onnx"):
            d.chmod(0o755)


def test_read_only_file_system_still_serves_its_entries(tmp_path, monkeypatch):
    """The same as above for root, who may write into a mode-555 directory: the cache's
    file system refuses new directories (EROFS), as a read-only mount would."""
    import infer_compare.base.cache as cachemod

    root = tmp_path / "ro"
    build = FakeExport()
    Cache(root).get_or_build("onnx", PARTS, build)
    real = cachemod.tempfile.mkdtemp

    def mkdtemp(*a, dir=None, **kw):
        if dir is not None and Path(dir).is_relative_to(root):
            raise OSError(errno.EROFS, "Read-only file system", str(dir))
        return real(*a, dir=dir, **kw)

    monkeypatch.setattr(cachemod.tempfile, "mkdtemp", mkdtemp)
    cache, said = _cache(root)
    assert cache.get_or_build("onnx", PARTS, build).hit and build.calls == 1
    e = cache.get_or_build("onnx", {**PARTS, "precision": "int8"}, build)
    assert e.private and build.calls == 2 and e.file("model.bin").read_bytes() == _payload(BIG)
    assert len(said) == 1 and "cannot write to the cache" in said[0] and "Read-only file system" in said[0]
    assert cache.get_or_build("onnx", {**PARTS, "precision": "fp16"}, build).private and len(said) == 1


def test_full_cache_disk_goes_on_without_caching(tmp_path):
    root = tmp_path / "cache"
    calls: list[Path] = []

    def build(d: Path) -> dict:
        calls.append(d)
        if d.is_relative_to(root):
            raise OSError(errno.ENOSPC, "No space left on device")
        (d / "model.onnx").write_bytes(b"onnx")
        return {"file": "model.onnx"}

    cache, said = _cache(root)
    e = cache.get_or_build("onnx", PARTS, build)
    assert e.private and e.file("model.onnx").read_bytes() == b"onnx" and len(calls) == 2
    assert len(said) == 1 and "No space left on device" in said[0]
    assert not list((root / "onnx").glob(".tmp*"))


def test_failed_build_propagates_and_leaves_nothing(tmp_path):
    cache, said = _cache(tmp_path)

    def broken(d: Path) -> dict:
        (d / "half.onnx").write_bytes(b"partial")
        raise RuntimeError("converter crashed")

    with pytest.raises(RuntimeError, match="converter crashed"):
        cache.get_or_build("onnx", PARTS, broken)
    assert not said and not any((tmp_path / "onnx").glob(".tmp*")) and cache.lookup("onnx", PARTS) is None


# ------------------------------------------------------------------- incomplete reports


def _report(complete: bool = True, p50: float = 2.0):
    from infer_compare.base.records import (
        OK,
        SCHEMA_VERSION,
        Environment,
        LatencyStats,
        ModelInfo,
        ParityResult,
        Report,
        RunRecord,
        Settings,
    )

    env = Environment("abc", "Linux", "6.1", "x86_64", "CPython 3.11.7", "Some CPU", ("avx2",), 2, 4, 24.0,
                      "0.1.0", {"numpy": "2.4.6"}, (), {})
    samples = tuple(int(p50 * 1e6) + i for i in range(40))
    row = RunRecord("onnxruntime", "onnx", "fp32", "cpu", 1, OK,
                    latency=LatencyStats.from_samples_ns(samples), throughput=1000 / p50,
                    parity=ParityResult(32, 1e-5, 1e-6, 1e-6, 1.0, 1.0, 1.0, 1.0), samples_ns=samples)
    minfo = ModelInfo("lenet5", "lenet", "trained", "x", "h" * 16, (1, 32, 32), 10)
    settings = Settings({"cpu": (1, 8)}, 2, 3, 10, 1.0, 32, 600.0)
    extra = {} if complete else {"complete": False, "incomplete_reason": "interrupted by SIGINT",
                                 "not_run": ("onnxruntime/onnx/fp32/cpu/b8", "openvino/openvino/fp32/cpu/b1")}
    return Report(SCHEMA_VERSION, "0.1.0", "2026-11-21T10:00:00+0000", ("infer-compare",), minfo, env,
                  settings, (row,), **extra)


def _diff(capsys, *args) -> tuple[int, str, str]:
    from infer_compare.cli import main

    code = main(["diff", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("which", ["baseline", "current"])
def test_diff_refuses_an_incomplete_report_unless_allowed(tmp_path, capsys, which):
    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    _report(complete=which != "baseline").save(base)
    _report(complete=which != "current").save(cur)
    code, out, err = _diff(capsys, base, cur, "--fail-on", "p50:+10%")
    assert code == 2 and not out and "Traceback" not in err
    assert len(err.splitlines()) == 1 and err.startswith("infer-compare: error: ")
    path = base if which == "baseline" else cur
    assert (f"({path}) is incomplete (interrupted by SIGINT; 2 cells did not run)" in err
            and "--allow-incomplete" in err)

    code, out, err = _diff(capsys, base, cur, "--fail-on", "p50:+10%", "--allow-incomplete")
    assert code == 0 and not err, err
    flat = " ".join(out.split())  # the gate's view wraps at 80 columns
    assert "is incomplete" in flat and "onnxruntime/onnx/fp32/cpu/b8" in flat and "no regression" in flat


def test_incomplete_report_is_said_in_every_format(tmp_path, capsys):
    import csv
    import io

    from rich.console import Console

    from infer_compare.base.records import load_report
    from infer_compare.report import render
    from infer_compare.report.terminal import print_report

    path = tmp_path / "results.json"
    _report(complete=False).save(path)
    rep = load_report(path)
    assert not rep.complete and rep.not_run[0] == "onnxruntime/onnx/fp32/cpu/b8"
    con = Console(file=io.StringIO(), width=250)
    print_report(rep, console=con)
    texts = {"terminal": con.file.getvalue(), "md": render(rep, "md"), "html": render(rep, "html")}
    for fmt, text in texts.items():
        assert "INCOMPLETE RESULTS (interrupted by SIGINT): 2 cells did not run" in text, fmt
        assert "openvino/openvino/fp32/cpu/b1" in text, fmt
    lines = list(csv.DictReader(io.StringIO(render(rep, "csv"))))
    assert [ln["report_complete"] for ln in lines] == ["false"] * 3
    assert [(ln["status"], ln["backend"], ln["batch_size"]) for ln in lines[1:]] == [
        ("not_run", "onnxruntime", "8"), ("not_run", "openvino", "1")]

    done = _report()
    assert all("INCOMPLETE" not in render(done, f) for f in ("md", "html", "csv"))
    assert [ln["report_complete"] for ln in csv.DictReader(io.StringIO(render(done, "csv")))] == ["true"]


def test_version_1_results_load_as_complete(tmp_path):
    from infer_compare.base.records import Report

    d = _report().to_dict()
    for k in ("complete", "not_run", "incomplete_reason"):
        del d[k]
    d["schema_version"] = 1
    rep = Report.from_dict(d)
    assert rep.complete and rep.not_run == () and rep.schema_version == 1


@pytest.mark.parametrize("where", ["a directory", "a missing directory"])
def test_failed_report_save_leaves_no_tmp_and_says_where(tmp_path, where):
    target = tmp_path / "out.json"  # the suffix names the format (Report.save refuses a path without one)
    if where == "a directory":
        target.mkdir()  # os.replace onto a directory fails after the temporary file is written
        (target / "x").write_text("keep")
    else:
        target = tmp_path / "missing" / "results.json"
    with pytest.raises(OSError) as ei:
        _report().save(target)
    msg = str(ei.value)
    assert str(target) in msg and "\n" not in msg and ei.value.strerror
    assert sorted(p.name for p in tmp_path.rglob("*")) == (
        ["out.json", "x"] if where == "a directory" else [])


# ------------------------------------------------------------------ end to end, LeNet-5


@pytest.mark.slow
def test_tampered_onnx_in_the_real_lenet_cache_is_rebuilt(cache_dir, caplog):
    """A real comparison after a byte of the cached ONNX file changed: the export is rebuilt
    (not reused), the row is measured, and the reason is said in one line."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    from infer_compare import compare

    from .conftest import FAST

    kw = dict(backends=["onnxruntime"], formats=["onnx"], precisions=["fp32"], devices=["cpu"],
              batch_sizes=[1], cache_dir=cache_dir, **FAST)
    first = compare("lenet5", **kw)
    row = next(r for r in first.rows if r.status == "ok")
    onnx = Path(row.export.path)
    assert onnx.is_relative_to(cache_dir)
    _tamper(onnx)
    caplog.set_level("WARNING", logger="infer_compare.base.cache")
    second = compare("lenet5", **kw)
    again = next(r for r in second.rows if r.label == row.label)
    assert again.status == "ok" and not again.export.cached and again.export.path == row.export.path
    said = [r.getMessage() for r in caplog.records] + list(second.warnings)
    assert any(f"{onnx.name} does not match the sha256" in m for m in said), said
    assert read_entry(onnx.parent, full=True)[0] is not None


# ------------------------------------------------------------------ faults of a whole run


def test_crashing_and_hanging_exporters_become_export_failed_rows(cache_dir, monkeypatch):
    """The OpenVINO exporter segfaults, the TFLite one hangs past --export-timeout: both are export_failed
    rows with the reason; PyTorch and ONNX Runtime rows are measured."""
    import dataclasses

    from infer_compare import compare
    from infer_compare.catalog import formats

    from .conftest import python_env

    table = dict(formats.FORMATS)
    table["openvino"] = dataclasses.replace(table["openvino"],
                                            exporter="tests.fake_exporters:CrashingExporter")
    table["tflite"] = dataclasses.replace(table["tflite"], exporter="tests.fake_exporters:HangingExporter")
    monkeypatch.setattr(formats, "FORMATS", table)
    monkeypatch.setenv("PYTHONPATH", python_env()["PYTHONPATH"])
    t0 = time.perf_counter()
    # the real ONNX export alone takes ~7 s on a 2-core VM
    rep = compare("lenet5", devices=["cpu"], formats=["pytorch", "onnx", "openvino", "tflite"],
                  precisions=["fp32"], batch_sizes=[1], cache_dir=cache_dir, use_cache=False, warmup_iters=1,
                  min_iters=3, min_time_s=0.0, max_time_s=0.5, export_timeout_s=40)
    assert time.perf_counter() - t0 < 400
    by = {(r.backend, r.format): r for r in rep.rows}
    assert by[("openvino", "openvino")].status == "export_failed"
    assert ("crashed" in by[("openvino", "openvino")].reason
            and "SIGSEGV" in by[("openvino", "openvino")].reason)
    assert by[("tflite", "tflite")].status == "export_failed"
    assert "timed out after 40 s" in by[("tflite", "tflite")].reason
    assert by[("pytorch", "pytorch")].status == "ok" and by[("onnxruntime", "onnx")].status == "ok"


def _children_of(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return False


@pytest.mark.parametrize("sig,code", [(2, 130), (15, 143)], ids=["SIGINT", "SIGTERM"])
def test_interrupt_saves_an_incomplete_report_and_leaves_no_child(tmp_path, cache_dir, sig, code):
    """A real signal to a real run while a measuring child is alive: exit 130/143, the partial
    results.json loads and says incomplete with the cells that did not run, no child survives."""
    import json
    import signal
    import subprocess

    from infer_compare.base.records import load_report

    from .conftest import PY, python_env

    out = tmp_path / "out"
    cmd = [PY, "-m", "infer_compare.cli", "--model", "lenet5", "--device", "cpu",
           "--formats", "pytorch,onnx,openvino", "--precisions", "fp32", "-b", "1,2",
           "--min-time", "3", "--max-time", "3", "--target-ci", "0",
           "-q", "-o", str(out), "--cache-dir", str(cache_dir)]
    proc = subprocess.Popen(cmd, env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 600
    children: list[int] = []
    while time.time() < deadline and proc.poll() is None:
        rows = []
        if (out / "results.json").exists():
            try:
                rows = json.loads((out / "results.json").read_text())["rows"]
            except (json.JSONDecodeError, KeyError):
                rows = []
        children = _children_of(proc.pid)
        if any(r["batch_size"] for r in rows) and children:
            break
        time.sleep(0.2)
    assert proc.poll() is None and children, "the run ended before it could be interrupted"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    rep = load_report(out / "results.json")
    assert rep.complete is False and rep.not_run and rep.incomplete_reason
    assert any(r.batch_size for r in rep.rows)
    assert (out / "results.html").exists() and "incomplete" in (out / "results.md").read_text().lower()
    time.sleep(0.5)
    assert not [c for c in children if _alive(c)], "a measuring child survived its parent"


def test_unusable_output_directory_is_a_one_line_usage_error(tmp_path):
    import subprocess

    from .conftest import PY, python_env

    blocker = tmp_path / "file"
    blocker.write_text("x")
    p = subprocess.run([PY, "-m", "infer_compare.cli", "--model", "lenet5", "-o", str(blocker / "out")],
                       env=python_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "output directory" in p.stderr and "not writable" in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("flag", ["--batch-sizes", "--backends", "--formats", "--precisions", "--device"])
def test_empty_list_flags_are_usage_errors(flag):
    import subprocess

    from .conftest import PY, python_env

    p = subprocess.run([PY, "-m", "infer_compare.cli", "--model", "lenet5", flag, ""], env=python_env(),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr


def test_an_interrupt_a_runtime_import_swallowed_still_stops_the_run(cache_dir, monkeypatch):
    """A SIGINT during ``import onnxruntime`` came out of its pybind11 init as an ImportError, which the
    probe turned into "fails to import": the run went on and exited 0. The handler remembers the signal and
    the measuring loop raises it again after the probe."""
    from infer_compare import compare
    from infer_compare.backends.onnxruntime.run import OnnxRuntimeRunner
    from infer_compare.base import interrupts
    from infer_compare.base.records import Availability

    def probe(cls, device="cpu"):
        try:
            try:
                interrupts.on_sigint(2, None)  # what the signal handler does, mid-import
            except KeyboardInterrupt as e:
                raise ImportError("initialization failed") from e
        except Exception as e:  # the probe: a failing import makes the runtime unavailable
            return Availability(False, f"onnxruntime fails to import: {e}")

    monkeypatch.setattr(OnnxRuntimeRunner, "probe", classmethod(probe))
    saved = []
    with pytest.raises(KeyboardInterrupt):
        compare("lenet5", devices=["cpu"], formats=["pytorch", "onnx"], precisions=["fp32"], batch_sizes=[1],
                cache_dir=cache_dir, warmup_iters=1, min_iters=3, min_time_s=0.0, max_time_s=0.2,
                on_row=saved.append)
    assert saved and saved[-1].complete is False and any(r.status == "ok" for r in saved[-1].rows)
    with interrupts.watch():  # a new run starts with no interrupt on record
        interrupts.check()
