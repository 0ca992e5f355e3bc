"""Bytecode under the tool's cache where the installation keeps none (infer_compare/host/pycache.py)."""

import importlib
import importlib.util
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from infer_compare.host import pycache
from infer_compare.measure import forkservers


@pytest.fixture
def fake_pkg(tmp_path, monkeypatch):
    pkg = tmp_path / "src" / "ic_fake_ro_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    importlib.invalidate_caches()
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv(pycache.OFF_ENV, raising=False)
    return pkg


def _fake_sys(monkeypatch, dont_write=0, prefix=None):
    fake = SimpleNamespace(pycache_prefix=prefix, flags=SimpleNamespace(dont_write_bytecode=dont_write),
                           dont_write_bytecode=bool(dont_write))
    monkeypatch.setattr(pycache, "sys", fake)
    return fake


def test_prefix_for_a_read_only_installation_and_for_no_bytecode_writing(fake_pkg, tmp_path, monkeypatch):
    cache = str(tmp_path / "cache")
    want = {"PYTHONPYCACHEPREFIX": os.path.join(cache, "pycache"), "PYTHONDONTWRITEBYTECODE": ""}
    _fake_sys(monkeypatch)
    assert pycache.prefix_env(cache, ("ic_fake_ro_pkg",)) == {}  # writable, Python writes its own bytecode
    with monkeypatch.context() as m:
        m.setattr(pycache.os, "access", lambda path, mode: False)  # a read-only site-packages
        assert forkservers.bytecode_env(("?ic_fake_ro_pkg",), cache) == want
    _fake_sys(monkeypatch, dont_write=1)  # PYTHONDONTWRITEBYTECODE=1 (containers)
    assert pycache.prefix_env(cache, ("ic_fake_ro_pkg",)) == want


def test_no_prefix_once_bytecode_exists_or_when_the_user_chose(fake_pkg, tmp_path, monkeypatch):
    cache = str(tmp_path / "cache")
    fake = _fake_sys(monkeypatch, dont_write=1)
    monkeypatch.setenv(pycache.OFF_ENV, "0")
    assert pycache.prefix_env(cache, ("ic_fake_ro_pkg",)) == {}
    monkeypatch.delenv(pycache.OFF_ENV)
    fake.pycache_prefix = "/elsewhere"  # the user's own prefix is kept
    assert pycache.prefix_env(cache, ("ic_fake_ro_pkg",)) == {}
    fake.pycache_prefix = None
    assert pycache.prefix_env("", ("ic_fake_ro_pkg",)) == {}  # no cache (--no-cache)
    pyc = importlib.util.cache_from_source(str(fake_pkg / "__init__.py"))
    os.makedirs(os.path.dirname(pyc), exist_ok=True)
    open(pyc, "wb").close()
    assert pycache.prefix_env(cache, ("ic_fake_ro_pkg",)) == {}
    assert pycache.prefix_env(cache, ("ic_no_such_module_at_all",)) == {}


def test_keep_bytecode_writes_it_under_the_cache_in_this_process_and_its_children(fake_pkg, tmp_path):
    """A real interpreter with PYTHONDONTWRITEBYTECODE=1: after keep_bytecode, its own imports and a
    child's leave .pyc files under the cache and none next to the sources."""
    cache = tmp_path / "cache"
    code = ("import os, subprocess, sys\n"
            "from infer_compare.host.pycache import keep_bytecode\n"
            f"print(keep_bytecode({str(cache)!r}, ('ic_fake_ro_pkg',)))\n"
            "import ic_fake_ro_pkg\n"
            "subprocess.run([sys.executable, '-c', 'import ic_fake_ro_pkg.sub'], check=True)\n")
    (fake_pkg / "sub.py").write_text("Y = 2\n")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join([str(fake_pkg.parent), os.getcwd()])}
    env.pop("PYTHONPYCACHEPREFIX", None)
    env.pop(pycache.OFF_ENV, None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[0] == str(cache / "pycache")
    written = {p.name.split(".")[0] for p in (cache / "pycache").rglob("*.pyc")}
    assert {"__init__", "sub"} <= written  # the parent's import and the child's
    assert not (fake_pkg / "__pycache__").exists()


@pytest.mark.parametrize("command", [["--model", "lenet5"], ["run", "b"], ["soak", "--model", "lenet5"]])
def test_the_commands_that_measure_keep_bytecode_before_their_heavy_imports(command, tmp_path):
    """The bytecode prefix is set before the measuring code (and numpy) is imported, so that those imports
    find their bytecode under the cache too (0.8 s of imports on the lent GPU machine, which sets
    PYTHONDONTWRITEBYTECODE=1). Not ``export``: its parser's default (``--max-batch``) imports the bundle
    package; its minutes of building dwarf that."""
    code = ("import sys\n"
            "import infer_compare.cli as cli, infer_compare.cli.compare as c, infer_compare.cli.soak as s\n"
            "def keep(args):\n"
            "    heavy = [m for m in ('infer_compare.api', 'infer_compare.bundle', 'infer_compare.soak', "
            "'numpy')\n             if m in sys.modules]\n"
            "    print('HEAVY', heavy)\n"
            "    raise SystemExit(7)\n"
            "c.keep_bytecode = s.keep_bytecode = keep\n"
            f"cli.main({command!r})\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 7, out.stderr[-2000:]
    assert "HEAVY []" in out.stdout
