"""models/loaded.py: a built-in architecture rebuilt from its state dict without the random initialisation the
state dict overwrites; the same module as build-then-copy, and that path wherever the shortcut would
differ."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from infer_compare import models  # noqa: E402
from infer_compare.models import lenet  # noqa: E402
from infer_compare.models.loaded import meta_left, with_state_dict  # noqa: E402


def _saved(build, tmp_path, seed=3):
    torch.manual_seed(seed)
    m = build().eval()
    path = tmp_path / "sd.pt"
    torch.save(m.state_dict(), path)
    return m, path


def test_same_module_as_build_then_copy(tmp_path):
    ref, path = _saved(lenet.build, tmp_path)
    got = with_state_dict(lenet.build, torch.load(path, weights_only=True)).eval()
    assert meta_left(got) == []
    a, b = ref.state_dict(), got.state_dict()
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(a[k], b[k]), k
        assert b[k].is_contiguous()
    x = torch.randn(2, 1, 32, 32)
    with torch.inference_mode():
        assert torch.equal(ref(x), got(x))
    assert all(p.requires_grad for p in got.parameters())  # as the copied-into parameters were


def test_no_random_numbers_drawn(tmp_path):
    """The old path draws the module's initial weights from torch's generator; the new one draws none."""
    _, path = _saved(lenet.build, tmp_path)
    sd = torch.load(path, weights_only=True)
    before = torch.get_rng_state()
    with_state_dict(lenet.build, sd)
    assert torch.equal(torch.get_rng_state(), before), "the module's own random initialisation ran"
    m = lenet.build()
    m.load_state_dict(sd)
    assert not torch.equal(torch.get_rng_state(), before)  # the check does see the old path's draws


def test_rebuild_of_a_builtin_architecture(tmp_path):
    spec = {"family": "lenet", "name": "lenet5", "input_shape": [1, 32, 32], "num_classes": 10}
    ref, path = _saved(lambda: models.build_architecture(spec), tmp_path)
    got = models.rebuild(spec, str(path))
    assert not got.training and meta_left(got) == []
    for k, v in ref.state_dict().items():
        assert torch.equal(v, got.state_dict()[k])


class _Computed(nn.Module):
    """A constructor that computes tensors the state dict does not hold."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.register_buffer("scale", torch.full((2,), 2.0), persistent=False)
        self.anchors = [torch.arange(3.0)]

    def forward(self, x):
        return self.fc(x) * self.scale + self.anchors[0].sum()


def test_tensors_the_constructor_computes_fall_back_to_the_old_path(tmp_path):
    ref, path = _saved(_Computed, tmp_path)
    with torch.device("meta"):
        probe = _Computed()
    assert set(meta_left(probe)) >= {"scale", "anchors", "fc.weight", "fc.bias"}
    got = with_state_dict(_Computed, torch.load(path, weights_only=True))
    assert meta_left(got) == []
    x = torch.randn(3, 4)
    assert torch.equal(ref(x), got(x))


def test_non_contiguous_tensors_are_copied_as_before():
    m = nn.Linear(4, 3)
    sd = {"weight": torch.randn(4, 3).t(), "bias": torch.randn(3)}
    assert not sd["weight"].is_contiguous()
    got = with_state_dict(lambda: nn.Linear(4, 3), sd)
    assert got.weight.is_contiguous() and torch.equal(got.weight, sd["weight"])
    del m


def test_a_state_dict_that_does_not_fit_raises_as_before():
    sd = nn.Linear(4, 3).state_dict()
    with pytest.raises(RuntimeError, match="size mismatch"):
        with_state_dict(lambda: nn.Linear(5, 3), sd)
    with pytest.raises(RuntimeError, match="Missing key"):
        with_state_dict(lambda: nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 1)),
                        {"0." + k: v for k, v in sd.items()})
