"""The bundled photos' crops through the cache (prepare/prepared.py): a warm run reads the arrays it built
before instead of decoding, cropping and resizing the photos again, and gets the same bytes."""

import numpy as np
import pytest

from infer_compare.base.cache import Cache
from infer_compare.data import bundled
from infer_compare.data.bundled import Preprocess
from infer_compare.prepare import prepared


def test_the_second_run_reads_the_same_crops_from_the_cache(tmp_path, monkeypatch):
    pytest.importorskip("skimage")
    pytest.importorskip("sklearn")
    pre = Preprocess(resize=40, crop=32)
    cache = Cache(tmp_path)
    first = prepared.photo_sets_cached(cache, pre, n_eval=4, n_calib=3, seed=0)
    direct = bundled.photo_sets(pre, n_eval=4, n_calib=3, seed=0)
    def built_again(*a, **k):
        raise RuntimeError("built again")

    monkeypatch.setattr(prepared.datamod, "photo_sets", built_again)
    again = prepared.photo_sets_cached(cache, pre, n_eval=4, n_calib=3, seed=0)
    for got in (first, again):
        assert np.array_equal(got.eval, direct.eval) and np.array_equal(got.calibration, direct.calibration)
        assert got.description == direct.description and got.sources == direct.sources
        assert got.digest() == direct.digest()
    with pytest.raises(RuntimeError, match="built again"):  # another seed is another entry
        prepared.photo_sets_cached(cache, pre, n_eval=4, n_calib=3, seed=1)
