import numpy as np
import pytest

from infer_compare import models
from infer_compare.base.cache import Cache
from infer_compare.base.errors import UsageError
from infer_compare.data import bundled as data


def test_resolve_builtins_and_aliases():
    assert models.resolve("LeNet-5").name == "lenet5"
    s = models.resolve("resnet50")
    assert s.input_shape == (3, 224, 224) and s.num_classes == 1000
    assert s.preprocess.resize == 232 and s.preprocess.crop == 224  # from torchvision's weights metadata
    assert models.resolve("mobilenet_v3_large").family == "torchvision"
    assert models.resolve("squeezenet1_0").name == "squeezenet1_0"  # any torchvision classification model


def test_unknown_model_suggests():
    with pytest.raises(UsageError, match="did you mean 'mobilenet_v2'"):
        models.resolve("mobilenetv_2")
    with pytest.raises(UsageError, match="unknown model 'fasterrcnn"):
        models.resolve("fasterrcnn_resnet50_fpn")  # a detection model is not a classification model


def test_photo_sets_are_real_distinct_and_held_out():
    pre = data.Preprocess(resize=64, crop=56)
    a = data.photo_sets(pre, n_eval=8, n_calib=8, seed=0)
    b = data.photo_sets(pre, n_eval=8, n_calib=8, seed=0)
    assert np.array_equal(a.eval, b.eval)  # deterministic
    assert a.eval.shape == (8, 3, 56, 56) and a.eval.dtype == np.float32
    assert len({x.tobytes() for x in a.eval}) == 8  # all distinct inputs
    evp = {s.split("[")[0] for s in a.sources["eval"]}
    cap = {s.split("[")[0] for s in a.sources["calibration"]}
    assert evp and cap and not evp & cap  # evaluation photos never calibrate
    assert 0.5 < float(a.eval.std()) < 2.0  # normalised real images, not noise or constants


def test_digits_split():
    d = data.digit_sets()
    assert d.eval.shape == (450, 1, 32, 32) and d.train.shape == (1347, 1, 32, 32)
    assert d.eval.min() >= 0 and d.eval.max() <= 1
    assert np.bincount(d.eval_labels).min() >= 43 and np.bincount(d.eval_labels).max() <= 46  # stratified


def test_auto_weights_use_the_local_hub_cache(tmp_path, monkeypatch):
    """'auto' picks pretrained weights only when the file is already in the torch hub cache."""
    import torch

    from infer_compare.models import torchvision_zoo as tvz

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torchhome"))
    spec = models.resolve("mobilenet_v2")
    pre = data.Preprocess(resize=64, crop=56)
    ds = data.photo_sets(pre, n_eval=2, n_calib=4)
    warnings = []
    # nothing cached: seeded random weights, loudly
    torch.manual_seed(1)
    _, info, _, _ = models.load(spec, "auto", ds, Cache(tmp_path / "c"), warn=warnings.append)
    assert info.weights == "random" and not info.meaningful_top1 and info.bn_recalibrated
    assert warnings and "SEEDED RANDOM" in warnings[0]
    # put a state dict where torchvision would have downloaded it
    path, looked = tvz.cached_weights_file("mobilenet_v2")
    assert path is None
    import os

    os.makedirs(os.path.dirname(looked), exist_ok=True)
    sd = models.build_architecture(spec).state_dict()
    torch.save(sd, looked)
    warnings.clear()
    _, info2, wpath, _ = models.load(spec, "auto", ds, Cache(tmp_path / "c"), warn=warnings.append)
    assert info2.weights == "pretrained" and info2.meaningful_top1 and not warnings
    assert wpath == looked and info2.weights_hash == models.state_dict_hash(sd)


def test_weights_file_that_does_not_fit(tmp_path):
    import torch

    spec = models.resolve("lenet5")
    p = tmp_path / "w.pt"
    torch.save({"conv.weight": torch.zeros(3)}, p)
    with pytest.raises(UsageError, match="does not fit lenet5"):
        models.load(spec, str(p), data.digit_sets(), Cache(tmp_path / "c"))
