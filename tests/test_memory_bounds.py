"""Arrays from elsewhere in bounded memory: the memory available is read from the cgroup (v2 memory.max,
v1 memory.limit_in_bytes) where there is one, a compressed .npz member is refused from the size its zip
entry declares before anything is inflated (a real bomb: 3 MiB that inflate to 3 GiB), large .npy files
are memory-mapped rather than read, and a run whose data cannot fit says so in one line before it starts."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import struct
import subprocess
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest

from .conftest import PY, python_env

ENV_LIMIT = "INFER_COMPARE_MEMORY_LIMIT"  # base/memory.py's (named here: these tests run on older code too)
BOMB_ROWS = 786_432  # x 1 x 32 x 32 float32: 3 GiB once inflated
GiB = 1 << 30


# ------------------------------------------------------------------------------------ the cgroup reader


def test_cgroup_limit_files_parse_max_and_numbers():
    from infer_compare.base import memory

    assert memory.parse_limit("max\n") is None
    assert memory.parse_limit("1073741824\n") == GiB
    assert memory.parse_limit("9223372036854771712\n") is None  # cgroup v1's "no limit"
    assert memory.parse_limit("") is None and memory.parse_limit("garbage") is None
    assert memory.parse_size("512M") == 512 << 20 and memory.parse_size("2g") == 2 * GiB
    assert memory.parse_size("1048576") == 1 << 20
    with pytest.raises(ValueError, match="not a size"):
        memory.parse_size("lots")


def _fake_cgroups(root: Path, monkeypatch, proc: str, files: dict[str, str]) -> None:
    from infer_compare.base import memory

    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "proc-cgroup").write_text(proc)
    monkeypatch.setattr(memory, "CGROUP_ROOT", str(root / "sys"))
    monkeypatch.setattr(memory, "PROC_CGROUP", str(root / "proc-cgroup"))


def test_cgroup_v2_limit_less_use_and_the_tightest_ancestor(tmp_path, monkeypatch):
    from infer_compare.base import memory

    _fake_cgroups(tmp_path, monkeypatch, "0::/jobs/run1\n", {
        "sys/jobs/run1/memory.max": "max\n",
        "sys/jobs/run1/memory.current": "123\n",
        "sys/jobs/memory.max": f"{2 * GiB}\n",  # the parent's limit binds its children
        "sys/jobs/memory.current": f"{GiB}\n",
        "sys/jobs/memory.stat": f"anon 1\nfile 2\ninactive_file {256 << 20}\nactive_file 3\n",
    })
    assert memory.cgroup_available() == GiB + (256 << 20)  # 2 GiB - (1 GiB used - 256 MiB reclaimable)
    assert memory.available() == min(memory.host_available(), GiB + (256 << 20))
    monkeypatch.setenv(memory.ENV_LIMIT, "100M")
    assert memory.available() == 100 << 20
    assert "INFER_COMPARE_MEMORY_LIMIT" in memory.describe(memory.available())


def test_cgroup_v1_limit_and_no_limit(tmp_path, monkeypatch):
    from infer_compare.base import memory

    _fake_cgroups(tmp_path, monkeypatch, "5:cpu:/x\n4:memory:/box\n0::/\n", {
        "sys/memory/box/memory.limit_in_bytes": f"{GiB}\n",
        "sys/memory/box/memory.usage_in_bytes": f"{512 << 20}\n",
        "sys/memory/box/memory.stat": "cache 1\ntotal_inactive_file 0\n",
        "sys/memory/memory.limit_in_bytes": "9223372036854771712\n",
        "sys/memory.max": "max\n",
    })
    assert memory.cgroup_available() == 512 << 20
    assert "cgroup" in memory.describe(memory.available())
    (tmp_path / "sys/memory/box/memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert memory.cgroup_available() is None


# ------------------------------------------------------------------------------------------ the bomb


def _zip_entry(name: bytes, crc: int, csize: int, usize: int, offset: int, central: bool) -> bytes:
    if central:
        return struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0, crc, csize, usize, len(name),
                           0, 0, 0, 0, 0, offset) + name
    return struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, csize, usize, len(name), 0) + name


def write_bomb(path: Path, rows: int = BOMB_ROWS) -> int:
    """An .npz whose one member, eval.npy, a valid [rows, 1, 32, 32] float32 array of zeros, is a few MiB of
    deflate that inflate to rows x 4 KiB. Written block by block (a 64 MiB block of zeros deflated once,
    repeated after full flushes), never held inflated. Returns the inflated size."""
    from numpy.lib import format as npformat

    head = io.BytesIO()
    header = {"descr": "<f4", "fortran_order": False, "shape": (rows, 1, 32, 32)}
    npformat.write_array_header_1_0(head, header)
    block = bytes(64 << 20)
    n_blocks, rest = divmod(rows * 4096, len(block))
    assert rest == 0
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(head.getvalue()) + c.flush(zlib.Z_FULL_FLUSH)
    one = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    last = c.flush(zlib.Z_FINISH)
    crc = zlib.crc32(head.getvalue())
    for _ in range(n_blocks):
        crc = zlib.crc32(block, crc)
    usize = len(head.getvalue()) + rows * 4096
    csize = len(first) + n_blocks * len(one) + len(last)
    with open(path, "wb") as f:
        f.write(_zip_entry(b"eval.npy", crc, csize, usize, 0, central=False))
        f.write(first)
        for _ in range(n_blocks):
            f.write(one)
        f.write(last)
        cd_at = f.tell()
        cd = _zip_entry(b"eval.npy", crc, csize, usize, 0, central=True)
        f.write(cd)
        f.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(cd), cd_at, 0))
    return usize


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("bomb") / "eval.npz"
    assert write_bomb(p) == 128 + 3 * GiB
    assert p.stat().st_size < 8 << 20
    import zipfile

    with zipfile.ZipFile(p) as z:  # a real one: zipfile inflates it as declared (its first 64 MiB read here)
        info = z.getinfo("eval.npy")
        assert info.file_size == 128 + 3 * GiB and info.compress_size < 8 << 20
        with z.open(info) as m:
            got = m.read(64 << 20)
    assert len(got) == 64 << 20 and got[:6] == b"\x93NUMPY" and not any(got[4096:])
    return p


def _lowered_cgroup(tmp_path: Path, monkeypatch, limit: int) -> None:
    files = {"sys/memory.max": f"{limit}\n", "sys/memory.current": "0\n"}
    _fake_cgroups(tmp_path, monkeypatch, "0::/\n", files)


def test_a_bomb_is_refused_before_inflating_under_a_lower_cgroup_limit(bomb, tmp_path, monkeypatch):
    from infer_compare.base import npyfile

    _lowered_cgroup(tmp_path, monkeypatch, 2 * GiB)  # 2 GiB: the 3 GiB member cannot fit
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"eval\.npz:eval\.npy: its zip entry declares 3\.00 GiB.*"
                                             r"cgroup"):
            npyfile.load(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak:,} bytes allocated before the refusal"


def test_a_bomb_in_a_bundle_is_refused_before_the_run_starts(bomb, lenet_onnx, tmp_path):
    """``run`` of a bundle whose data/eval.npz is the bomb (its hash made to match), with the cap lowered by
    the environment: exit 2, one line, and the process never grew anywhere near the inflated size."""
    b = tmp_path / "b"
    shutil.copytree(lenet_onnx, b)
    shutil.copyfile(bomb, b / "data" / "eval.npz")
    m = json.loads((b / "manifest.json").read_text())
    m["files"]["data/eval.npz"] = {"sha256": hashlib.sha256((b / "data/eval.npz").read_bytes()).hexdigest(),
                                   "size": (b / "data/eval.npz").stat().st_size}
    (b / "manifest.json").write_text(json.dumps(m))
    env = {**python_env(), ENV_LIMIT: "2G"}
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
               "print('MAXRSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
               "sys.exit(r.returncode)")
    cmd = [PY, "-m", "infer_compare", "run", str(b), "-q", "-o", str(tmp_path / "o"), "--device", "cpu",
           "--backends", "onnxruntime", "-b", "1"]
    r = subprocess.run([PY, "-c", wrapper, *cmd], capture_output=True, text=True, env=env, timeout=600)
    lines = r.stderr.strip().splitlines()
    rss_kib = int(lines[-1].split()[1])
    assert r.returncode == 2, r.stderr[-3000:]
    assert len(lines) == 2 and "Traceback" not in r.stderr, r.stderr
    assert "3.00 GiB" in lines[0] and ENV_LIMIT in lines[0] and "refused" in lines[0], lines[0]
    assert rss_kib < 1_500_000, f"peak RSS {rss_kib} KiB: the bomb was inflated"


@pytest.fixture(scope="module")
def lenet_onnx(cache_dir, tmp_path_factory) -> Path:
    from .conftest import lenet_onnx_bundle

    return lenet_onnx_bundle(tmp_path_factory.mktemp("mem") / "lenet5", cache_dir)


def test_a_real_run_under_a_memory_limit(bomb, tmp_path):
    """Under a real cgroup memory limit (systemd-run, cgroup v2): the reader finds the limit by itself."""
    probe = subprocess.run(["systemd-run", "--quiet", "--scope", "-p", "MemoryMax=2G", "true"],
                           capture_output=True, text=True) if shutil.which("systemd-run") else None
    if probe is None or probe.returncode != 0:
        why = ("systemd-run is not installed" if probe is None
               else (probe.stderr.strip().splitlines() or ["?"])[0])
        pytest.skip(f"no real cgroup memory limit can be set here: {why}")
    code = (f"from infer_compare.base import npyfile\ntry:\n    npyfile.load({str(bomb)!r})\n"
            "except ValueError as e:\n    print(e)\n")
    r = subprocess.run(["systemd-run", "--quiet", "--scope", "-p", "MemoryMax=2G", PY, "-c", code],
                       capture_output=True, text=True, env=python_env(), timeout=300)
    assert r.returncode == 0 and "declares 3.00 GiB" in r.stdout and "cgroup" in r.stdout, r.stdout + r.stderr


# ------------------------------------------------------------------------------- large arrays, read once


def test_a_large_npy_is_memory_mapped_not_read(tmp_path):
    from infer_compare.base import npyfile

    p = tmp_path / "x.npy"
    a = np.lib.format.open_memmap(p, mode="w+", dtype=np.float32, shape=(4096, 1, 32, 32))  # 64 MiB
    a[::7] = 1.0
    a.flush()
    del a
    tracemalloc.start()
    try:
        got = npyfile.load(p, mmap=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got.shape == (4096, 1, 32, 32) and got.dtype == np.float32 and float(got[7].max()) == 1.0
    assert peak < 4 << 20, f"{peak:,} bytes allocated: the file was read, not mapped"
    got[0] = 5.0  # copy-on-write: the array is writable, the file stays as it was
    assert float(np.load(p, mmap_mode="r")[0].max()) == 1.0


def test_users_npy_data_is_mapped_and_not_copied(tmp_path):
    from infer_compare.data.user import PreprocessSpec, load_data

    p = tmp_path / "x.npy"
    np.save(p, np.random.default_rng(0).random((64, 1, 28, 28), dtype=np.float32))
    data = load_data(p, preprocess=PreprocessSpec(), input_shape=(1, 28, 28))
    base = data.images
    while getattr(base, "base", None) is not None and not isinstance(base, np.memmap):
        base = base.base
    assert isinstance(base, np.memmap) or type(base).__name__ == "mmap", type(base)


def test_users_data_that_cannot_fit_is_refused_in_one_line(tmp_path, cache_dir):
    p = tmp_path / "big.npy"
    np.lib.format.open_memmap(p, mode="w+", dtype=np.float32, shape=(8192, 1, 28, 28)).flush()  # 25 MiB
    env = {**python_env(), ENV_LIMIT: "16M"}
    cmd = [PY, "-m", "infer_compare", "--model", "lenet5", "-q", "--data", str(p), "--device", "cpu",
           "--backends", "onnxruntime", "-o", str(tmp_path / "o")]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 2, r.stderr[-3000:]
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and "big.npy" in err, err
    assert ENV_LIMIT in err, err


def test_stored_npz_members_are_mapped_and_compressed_ones_inflated_once(tmp_path):
    from infer_compare.base import npyfile

    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    f = np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3))
    np.savez(tmp_path / "s.npz", x=x, f=f)
    np.savez_compressed(tmp_path / "c.npz", x=x, f=f)
    for name in ("s.npz", "c.npz"):
        got = npyfile.load(tmp_path / name, mmap=True)
        assert list(got) == ["x", "f"]
        np.testing.assert_array_equal(got["x"], x)
        np.testing.assert_array_equal(got["f"], f)
        assert got["x"].flags.writeable
