import numpy as np
import pytest

from infer_compare.formats import TOLERANCES
from infer_compare.parity import compare


def _logits(n=64, c=10, seed=0):
    return np.random.default_rng(seed).normal(0, 3, (n, c)).astype(np.float32)


def test_identical_outputs_pass_everything():
    ref = _logits()
    p = compare(ref, ref.copy(), TOLERANCES["fp32"], labels=ref.argmax(1))
    assert p.passed and p.max_abs == 0 and p.top1_agreement == 1 and p.cosine_min == pytest.approx(1.0)
    assert p.top5_agreement == 1.0 and p.accuracy == 1.0 == p.reference_accuracy


def test_fp16_noise_fails_fp32_but_passes_fp16():
    ref = _logits()
    noisy = ref + np.random.default_rng(1).normal(0, 1e-2, ref.shape).astype(np.float32)
    assert not compare(ref, noisy, TOLERANCES["fp32"]).passed
    p = compare(ref, noisy, TOLERANCES["fp16"])
    assert p.passed, p.failures


def test_wrong_outputs_fail_and_say_why():
    ref = _logits()
    bad = _logits(seed=5)
    p = compare(ref, bad, TOLERANCES["int8"])
    assert not p.passed
    assert any("cosine" in f for f in p.failures) and any("top-1" in f for f in p.failures)


def test_not_judged_reports_but_does_not_fail_except_nan():
    ref = _logits()
    bad = _logits(seed=5)
    p = compare(ref, bad, TOLERANCES["int8"], judge=False, note="random weights")
    assert p.passed and not p.judged and p.failures  # failures listed, not enforced
    nan = ref.copy()
    nan[0, 0] = np.nan
    assert not compare(ref, nan, TOLERANCES["int8"], judge=False).passed


def test_top1_not_judged_for_random_weights():
    ref = _logits()
    flipped = ref.copy()
    flipped[:, [0, 1]] = flipped[:, [1, 0]]  # many top-1 flips, cosine still high-ish
    p = compare(ref, flipped, TOLERANCES["bf16"], judge_top1=False)
    assert not any("top-1" in f for f in p.failures)
