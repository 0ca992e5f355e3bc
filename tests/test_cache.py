import pytest

from infer_compare.base.cache import MANIFEST, Cache, key_of, verify_files


def test_build_once_then_hit(tmp_path):
    c = Cache(tmp_path)
    calls = []

    def build(d):
        calls.append(d)
        (d / "a.bin").write_bytes(b"x" * 10)
        return {"file": "a.bin"}

    e1 = c.get_or_build("onnx", {"k": 1}, build)
    e2 = c.get_or_build("onnx", {"k": 1}, build)
    e3 = c.get_or_build("onnx", {"k": 2}, build)
    assert not e1.hit and e2.hit and not e3.hit
    assert len(calls) == 2
    assert e1.path == e2.path != e3.path
    assert (e1.path / "a.bin").read_bytes() == b"x" * 10
    assert e2.manifest["parts"] == {"k": 1} and "build_s" in e2.manifest


def test_interrupted_build_leaves_nothing_trusted(tmp_path):
    c = Cache(tmp_path)

    def bad(d):
        (d / "half.onnx").write_bytes(b"partial")
        raise KeyboardInterrupt  # e.g. Ctrl-C in the middle of an export

    with pytest.raises(KeyboardInterrupt):
        c.get_or_build("onnx", {"k": 1}, bad)
    assert c.lookup("onnx", {"k": 1}) is None
    assert not any(p.name.startswith(".tmp") for p in (tmp_path / "onnx").iterdir())
    # an entry directory without its manifest (e.g. written by hand, or by an old tool) is not trusted
    key_dir = tmp_path / "onnx" / key_of({"k": 1})
    key_dir.mkdir()
    (key_dir / "f").write_text("stale")
    assert c.lookup("onnx", {"k": 1}) is None

    ok = c.get_or_build("onnx", {"k": 1}, lambda d: (d / "f").write_text("good") and {"file": "f"})
    assert not ok.hit and (ok.path / "f").read_text() == "good" and (ok.path / MANIFEST).is_file()


def test_disabled_cache_rebuilds(tmp_path):
    n = []
    Cache(tmp_path).get_or_build("x", {"a": 1}, lambda d: n.append(1) or {})
    Cache(tmp_path, enabled=False).get_or_build("x", {"a": 1}, lambda d: n.append(1) or {})
    assert len(n) == 2


def test_manifest_records_every_file(tmp_path):
    import hashlib

    def build(d):
        (d / "m.onnx").write_bytes(b"graph")
        (d / "weights").mkdir()
        (d / "weights" / "w.bin").write_bytes(b"\0" * 100)
        return {"file": "m.onnx"}

    e = Cache(tmp_path).get_or_build("onnx", {"k": 1}, build)
    files = e.manifest["files"]
    assert set(files) == {"m.onnx", "weights/w.bin"}
    assert files["weights/w.bin"]["size"] == 100
    assert files["m.onnx"]["sha256"] == hashlib.sha256(b"graph").hexdigest()
    assert files["m.onnx"]["mtime_ns"] == (e.path / "m.onnx").stat().st_mtime_ns  # the rename keeps it
    assert verify_files(e.path, e.manifest, full=True) == ""
    assert Cache(tmp_path).lookup("onnx", {"k": 1}).manifest["files"] == files


def test_bad_verify_mode_is_refused():
    with pytest.raises(ValueError, match="verify"):
        Cache(verify="sometimes")


def test_entry_locked_by_another_run_for_too_long_is_built_privately(tmp_path):
    filelock = pytest.importorskip("filelock")
    said = []
    c = Cache(tmp_path, warn=said.append, lock_timeout_s=0.2)
    assert c.locking
    (tmp_path / "onnx").mkdir()
    with filelock.FileLock(str(tmp_path / "onnx" / f".{key_of({'k': 1})}.lock")):  # another run, stuck
        e = c.get_or_build("onnx", {"k": 1}, lambda d: (d / "f").write_text("x") and {})
    assert e.private and (e.path / "f").read_text() == "x"
    assert len(said) == 1 and "building it privately" in said[0]
    assert c.lookup("onnx", {"k": 1}) is None  # nothing was written to the shared cache
    assert not c.unwritable  # a busy entry does not turn caching off for the others
    c.close()
    assert not e.path.exists()


def test_entry_dir_finds_shared_and_private_entries(tmp_path):
    from infer_compare.base.cache import entry_dir

    def build(d):
        (d / "sub").mkdir()
        (d / "sub" / "m.xml").write_text("x")
        return {"file": "sub/m.xml"}

    shared = Cache(tmp_path).get_or_build("openvino", {"k": 1}, build)
    with Cache(tmp_path, enabled=False) as c:
        private = c.get_or_build("openvino", {"k": 1}, build)
        assert entry_dir(private.file("sub/m.xml")) == private.path != shared.path
    assert entry_dir(shared.file("sub/m.xml")) == shared.path
    assert entry_dir(tmp_path / "elsewhere.txt") is None
