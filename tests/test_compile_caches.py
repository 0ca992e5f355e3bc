"""torch.compile's on-disk caches under the tool's cache directory (backends/pytorch/compile_caches.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from infer_compare.backends.pytorch import compile_caches


def test_set_for_the_block_and_put_back(tmp_path, monkeypatch):
    for k in compile_caches.SUBDIRS:
        monkeypatch.delenv(k, raising=False)
    with compile_caches.kept_under(tmp_path) as env:
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "torchinductor")
        assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "triton")
        assert set(env) == set(compile_caches.SUBDIRS)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = "/elsewhere"  # torch may rewrite it during the run
    assert not any(k in os.environ for k in compile_caches.SUBDIRS)


def test_the_users_choice_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/mine")
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    with compile_caches.kept_under(tmp_path) as env:
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/mine"
        assert env == {"TRITON_CACHE_DIR": str(tmp_path / "triton")}
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/mine" and "TRITON_CACHE_DIR" not in os.environ


def test_no_cache_leaves_them_to_torch(monkeypatch):
    for k in compile_caches.SUBDIRS:
        monkeypatch.delenv(k, raising=False)
    with compile_caches.kept_under(None) as env:
        assert env == {} and not any(k in os.environ for k in compile_caches.SUBDIRS)


def test_children_see_them_before_torch_picks_its_default(tmp_path, monkeypatch):
    """The fault this fixes: torch's cache_dir() writes its default into the environment when first asked;
    set first, a child process's Inductor cache directory is the tool's."""
    for k in compile_caches.SUBDIRS:
        monkeypatch.delenv(k, raising=False)
    code = "from torch._inductor.runtime.cache_dir_utils import cache_dir; print(cache_dir())"
    with compile_caches.kept_under(tmp_path):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(tmp_path / "torchinductor")


def test_a_comparison_runs_with_them_set(tmp_path, monkeypatch):
    from infer_compare import compare

    for k in compile_caches.SUBDIRS:
        monkeypatch.delenv(k, raising=False)
    seen = []
    compare("lenet5", backends=["onnxruntime"], formats=["onnx"], precisions=["fp32"], devices=["cpu"],
            batch_sizes=[1], min_time_s=0.0, max_time_s=0.05,
            min_iters=1, target_ci=None, cache_dir=tmp_path,
            on_row=lambda rep: seen.append(os.environ.get("TORCHINDUCTOR_CACHE_DIR")))
    assert seen and set(seen) == {str(tmp_path / "torchinductor")}
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ


def test_torchs_own_default_is_no_choice_of_the_users(tmp_path, monkeypatch):
    """``import torchvision`` makes torch write its default into the environment before any comparison."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", compile_caches.torch_default())
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    with compile_caches.kept_under(tmp_path):
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "torchinductor")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == compile_caches.torch_default()


def test_the_default_agrees_with_torchs(monkeypatch):
    code = ("import os, torchvision; from infer_compare.backends.pytorch.compile_caches import "
            "torch_default; print(os.environ.get('TORCHINDUCTOR_CACHE_DIR') == torch_default())")
    env = {k: v for k, v in os.environ.items() if k not in compile_caches.SUBDIRS}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env).stdout
    assert out.strip() == "True"


def test_the_replica_agrees_without_torch_imported(monkeypatch):
    code = ("import sys; from infer_compare.backends.pytorch.compile_caches import torch_default; d = "
            "torch_default(); assert 'torch' not in sys.modules; from "
            "torch._inductor.runtime.cache_dir_utils import default_cache_dir; import os; print(d == "
            "os.path.abspath(default_cache_dir()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"
