"""Data problems named as data problems, before anything is measured: NaN or Inf in the input samples
(refused, the file and the samples named, not blamed on the runtimes), dtype conversions said with what
they lost (float64 -> float32: the largest rounding; int8 and bool -> float32: values kept exactly), an
animated image's frames (the first used, of how many), and a model file whose name the locale cannot decode
(a name problem, not "not a valid ONNX file")."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from infer_compare.base.errors import UsageError
from infer_compare.data.user import PreprocessSpec, load_data

from .conftest import FAST, PY, python_env

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

RNG = np.random.default_rng(1)
X = RNG.standard_normal((16, 8))  # float64, 16 samples of 8 values


def tiny_onnx(path) -> str:
    """[N, 8] x [8, 5]: a model whose input is no image (its data comes from --data)."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32), "W")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "tiny",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.fsdecode(path))
    return os.fsdecode(path)


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    return tiny_onnx(tmp_path_factory.mktemp("tiny") / "tiny.onnx")


def _inputs_note(rep) -> str:
    return next(n for n in rep.notes if n.startswith("inputs:"))


def _compare(model: str, data, cache_dir):
    from infer_compare import compare

    return compare(model, data=str(data), devices=["cpu"], backends=["onnxruntime"], precisions=["fp32"],
                   batch_sizes=[1], cache_dir=cache_dir, max_time_s=0.3, **FAST)


def test_nan_and_inf_samples_are_refused_naming_the_data(tmp_path):
    x = X.astype(np.float32)
    x[:12, 0] = np.nan
    x[3, 1] = np.inf
    np.save(tmp_path / "nan.npy", x)
    with pytest.raises(UsageError) as e:
        load_data(tmp_path / "nan.npy", preprocess=PreprocessSpec(), input_shape=(8,))
    msg = str(e.value)
    assert e.value.exit_code == 2 and "\n" not in msg
    assert "nan.npy" in msg and "12 of 16 input samples hold NaN or Inf" in msg and "samples 0, 1, 2" in msg
    mask = np.ones((16, 2))
    mask[5] = -np.inf
    np.savez(tmp_path / "named.npz", x=X.astype(np.float32), mask=mask)
    with pytest.raises(UsageError, match=r"1 of 16 input samples .*samples 5; sample 5: input 'mask': -Inf"):
        load_data(tmp_path / "named.npz", preprocess=PreprocessSpec())
    big = X.copy()
    big[7, 2] = 1e300  # finite in float64, Inf once read as float32: refused as well, the conversion said
    np.save(tmp_path / "big.npy", big)
    with pytest.raises(UsageError, match=r"1 of 16 input samples .*sample 7: \+Inf at \[2\]"):
        load_data(tmp_path / "big.npy", preprocess=PreprocessSpec(), input_shape=(8,))


def test_nan_data_stops_the_run_before_any_row(model, tmp_path, cache_dir):
    x = X.astype(np.float32)
    x[:12, 0] = np.nan
    np.save(tmp_path / "nan.npy", x)
    out = tmp_path / "out"
    p = subprocess.run([PY, "-m", "infer_compare.cli", "--model", model, "--data", str(tmp_path / "nan.npy"),
                        "--device", "cpu", "--backends", "onnxruntime", "-q", "-o", str(out),
                        "--cache-dir", str(cache_dir)], env=python_env(), capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "12 of 16 input samples hold NaN or Inf" in p.stderr
    assert not (out / "results.json").exists()  # no row measured, none blamed on a runtime


@pytest.mark.parametrize("kind", ["float64", "int8", "bool"])
def test_array_dtype_conversions_are_said(model, tmp_path, cache_dir, kind):
    arrays = {"float64": X, "int8": (X * 20).astype(np.int8), "bool": X > 0}
    np.save(tmp_path / f"{kind}.npy", arrays[kind])
    rep = _compare(model, tmp_path / f"{kind}.npy", cache_dir)
    note = _inputs_note(rep)
    assert "used as they are" not in note
    if kind == "float64":
        assert "float64 -> float32 (the largest rounding " in note and "relative " in note, note
    else:
        assert f"{kind} -> float32 (values kept exactly)" in note, note
    assert all(r.status == "ok" for r in rep.rows if r.batch_size), [(r.label, r.reason) for r in rep.rows]


def test_lossy_integer_conversions_say_what_changed():
    from infer_compare.data.user.checks import converted

    out, said = converted(np.array([[2**25 + 1, 3]], np.int64), np.float32)
    assert out.dtype == np.float32 and said == "int64 -> float32 (1 of 2 values changed, by up to 1)"
    assert converted(np.ones((2, 2), np.float32), np.float32)[1] == ""
    assert (converted(np.array([[1e300]]), np.float32)[1]
            == "float64 -> float32 (1 value beyond float32's range became Inf)")


def test_an_animated_gif_says_its_frames(tmp_path):
    from PIL import Image

    frames = [Image.new("RGB", (12, 12), c) for c in ((200, 10, 10), (10, 200, 10), (10, 10, 200))]
    folder = tmp_path / "gifs"
    folder.mkdir()
    frames[0].save(folder / "anim.gif", save_all=True, append_images=frames[1:], duration=100, loop=0)
    spec = PreprocessSpec(resize=None, crop=None)
    data = load_data(folder, preprocess=spec)
    assert "1 image: animated: the first of its 3 frames used" in data.description, data.description
    ref = tmp_path / "ref"
    ref.mkdir()
    frames[0].save(ref / "first.gif")
    still = load_data(ref, preprocess=spec)  # the same first frame, alone: the same sample, nothing said
    np.testing.assert_array_equal(data.images, still.images)
    assert "frames" not in still.description


def test_a_latin1_file_name_under_lc_all_c_is_a_name_problem(tmp_path, cache_dir):
    raw = os.path.join(os.fsencode(tmp_path), b"caf\xe9.onnx")
    tiny_onnx(raw)
    env = {**python_env(), "LC_ALL": "C"}
    env.pop("LANG", None)
    p = subprocess.run([PY, "-m", "infer_compare.cli", "--model", raw, "--device", "cpu", "-q", "-o",
                        str(tmp_path / "out"), "--cache-dir", str(cache_dir)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "not a valid ONNX file" not in p.stderr, p.stderr
    assert "file name" in p.stderr and "caf\\xe9.onnx" in p.stderr and "0xe9" in p.stderr, p.stderr
    bad = tmp_path / "garbage.onnx"  # a content problem is still said as one
    bad.write_bytes(b"\x00not a model")
    q = subprocess.run([PY, "-m", "infer_compare.cli", "--model", str(bad), "--device", "cpu", "-q"], env=env,
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert q.returncode == 2 and "not a valid ONNX file" in q.stderr, q.stderr
