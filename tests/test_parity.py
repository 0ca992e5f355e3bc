import glob
from pathlib import Path

import numpy as np
import pytest

from infer_compare.base.records import load_report
from infer_compare.catalog.formats import TOLERANCES
from infer_compare.parity.checks import FLOOR_COSINE_MEAN, min_cosine_worst
from infer_compare.parity.scores import compare

ROOT = Path(__file__).resolve().parents[1]


def _logits(n=64, c=10, seed=0):
    return np.random.default_rng(seed).normal(0, 3, (n, c)).astype(np.float32)


def _noisy(ref, sigma, seed=1):
    return ref + np.random.default_rng(seed).normal(0, sigma, ref.shape).astype(np.float32)


def test_identical_outputs_pass_everything():
    ref = _logits()
    p = compare(ref, ref.copy(), TOLERANCES["fp32"], labels=ref.argmax(1))
    assert p.passed and p.max_abs == 0 and p.top1_agreement == 1 and p.cosine_min == pytest.approx(1.0)
    assert p.top5_agreement == 1.0 and p.accuracy == 1.0 == p.reference_accuracy
    assert p.reason == "" and p.floor_failures == ()


def test_fp16_noise_fails_fp32_but_passes_fp16():
    ref = _logits()
    noisy = _noisy(ref, 1e-2)
    assert not compare(ref, noisy, TOLERANCES["fp32"]).passed
    p = compare(ref, noisy, TOLERANCES["fp16"])
    assert p.passed, p.failures


def test_wrong_outputs_fail_and_say_why():
    ref = _logits()
    bad = _logits(seed=5)
    p = compare(ref, bad, TOLERANCES["int8"])
    assert not p.passed
    assert any("cosine" in f for f in p.failures) and any("top-1" in f for f in p.failures)
    assert p.reason.startswith("cosine")


@pytest.mark.parametrize("precision", ["fp16", "bf16", "int8"])
def test_one_wrong_image_out_of_32_fails(precision):
    tol = TOLERANCES[precision]
    ref = _logits(n=32, c=1000, seed=2)
    out = _noisy(ref, 1e-3)
    rng = np.random.default_rng(7)
    out[17] = ref[17] * 0.3 + rng.normal(0, 3, ref.shape[1]).astype(np.float32)  # one image badly wrong
    p = compare(ref, out, tol, judge_top1=False)
    if precision == "int8":  # no max-error limit: before the worst-sample rule this row passed
        assert p.cosine_mean >= tol.min_cosine and tol.max_rel_err is None
    assert not p.passed and p.worst_index == 17
    assert any("worst sample (#17)" in f for f in p.failures), p.failures
    assert p.tolerance["min_cosine_worst"] == pytest.approx(min_cosine_worst(tol))
    # the same outputs without the bad image pass
    good = compare(np.delete(ref, 17, 0), np.delete(out, 17, 0), tol, judge_top1=False)
    assert good.passed, good.failures


def test_not_judged_reports_but_does_not_fail_above_the_floor():
    ref = _logits(c=1000)
    out = _noisy(ref, 1.2)  # cosine about 0.93: outside int8's tolerance, above the floor
    p = compare(ref, out, TOLERANCES["int8"], judge=False, note="random weights")
    assert FLOOR_COSINE_MEAN < p.cosine_mean < TOLERANCES["int8"].min_cosine
    assert p.passed and not p.judged and p.failures and not p.floor_failures  # listed, not enforced
    assert p.reason == ""


def test_an_unjudged_row_below_the_floor_fails_with_the_reason():
    ref = _logits(c=1000)
    out = ref * 0.2 + _logits(c=1000, seed=9)  # cosine about 0.2: random weights or not, this is broken
    p = compare(ref, out, TOLERANCES["int8"], judge=False)
    assert not p.passed and not p.judged
    assert p.floor_failures and "sanity floor" in p.floor_failures[0]
    assert p.reason.startswith("below the sanity floor") and "cosine" in p.reason
    nan = ref.copy()
    nan[0, 0] = np.nan
    p = compare(ref, nan, TOLERANCES["int8"], judge=False)
    assert not p.passed and "NaN" in p.reason
    # one image far off fails the floor even when the mean is fine
    one = _noisy(ref, 0.01)
    one[3] = -ref[3]
    p = compare(ref, one, TOLERANCES["int8"], judge=False)
    assert p.cosine_mean > FLOOR_COSINE_MEAN and not p.passed and "#3" in p.reason


def test_top1_not_judged_for_random_weights():
    ref = _logits()
    flipped = ref.copy()
    flipped[:, [0, 1]] = flipped[:, [1, 0]]  # many top-1 flips, cosine still high-ish
    p = compare(ref, flipped, TOLERANCES["bf16"], judge_top1=False)
    assert not any("top-1" in f for f in p.failures)


def test_measured_worst_samples_pass_the_worst_sample_tolerance():
    """The committed reports' judged rows (real runs) keep passing with the worst-sample rule."""
    seen = 0
    for f in glob.glob(str(ROOT / "reports" / "*" / "results.json")):
        for r in load_report(f).rows:
            if r.parity is not None and r.parity.judged and r.parity.passed:
                assert r.parity.cosine_min >= min_cosine_worst(TOLERANCES[r.precision]), (f, r.label)
                seen += 1
    assert seen > 20


def test_top1_is_judged_on_the_samples_that_are_not_near_ties():
    """A 4-class output: one sample's top two differ by 0.0008; fp16's error (within its 5e-2 of max |ref|)
    flips it. Judged on the other samples, the row passes and says so; a flip on a clear margin fails."""
    from infer_compare.catalog.formats import TOLERANCES

    ref = np.array([[2.0, 0.1, 0.2, 0.3], [0.5, 0.5008, 0.1, 0.0], [0.1, 2.5, 0.3, 0.2],
                    [0.2, 0.1, 1.9, 0.0]] * 2)
    out = ref.copy()
    out[1, 0] += 0.005  # the near-tie flips
    res = compare(ref, out, TOLERANCES["fp16"])
    assert res.passed and res.top1_agreement == 1.0 and res.near_ties == 2
    assert "2 near-ties" in res.note and "1 of them flipped" in res.note
    clear = ref.copy()
    clear[0, 1] = 2.5  # sample 0 (margin 1.7) flips: beyond any fp16 error
    bad = compare(ref, clear, TOLERANCES["fp16"])
    assert not bad.passed and bad.top1_agreement < 1.0
