"""The user's data: ImageFolder trees, flat folders, .npy/.npz inputs, preprocessing, the split."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from infer_compare.base.errors import UsageError
from infer_compare.data import bundled as data
from infer_compare.data.user import (
    ONLY_OUTPUT,
    PreprocessSpec,
    UserData,
    imagenet_defaults,
    load_data,
    preprocess_spec,
    split_eval_calibration,
)

PIL = pytest.importorskip("PIL")
skdata = pytest.importorskip("skimage.data")
from PIL import Image  # noqa: E402

SMALL = PreprocessSpec(resize=40, crop=32, source="test")
# class folder -> bundled photos (camera, moon, coins, page, clock are grayscale; cat is chelsea);
# creation order is not sorted
CLASSES = {"zebra": ("astronaut", "camera", "colorwheel"), "apple": ("chelsea", "coffee", "moon"),
           "mango": ("rocket", "coins", "page", "clock")}


def _save(name: str, path: Path, width: int = 80) -> None:
    im = Image.fromarray(np.asarray(getattr(skdata, name)()))
    im.resize((width, max(1, round(im.height * width / im.width))), Image.BILINEAR).save(path)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("imagefolder")
    for cls, names in CLASSES.items():
        (root / cls).mkdir()
        for i, nm in enumerate(names):
            _save(nm, root / cls / (f"{i}_{nm}" + (".PNG" if i == 1 else ".jpg")))
    (root / "zebra" / "notes.txt").write_text("not an image")
    (root / ".cache").mkdir()  # hidden: no class
    _save("astronaut", root / ".cache" / "x.png")
    return root


def _one_line(e: pytest.ExceptionInfo, *parts: str) -> str:
    msg = str(e.value)
    assert "\n" not in msg, msg
    for p in parts:
        assert p in msg, msg
    return msg


def test_imagefolder_labels_follow_sorted_folder_names(tree):
    d = load_data(tree, preprocess=SMALL, input_shape=(3, 32, 32))
    assert d.class_names == ("apple", "mango", "zebra")
    assert d.images.shape == (10, 3, 32, 32) and d.images.dtype == np.float32
    assert d.labels.dtype == np.int64 and d.labels.tolist() == [0, 0, 0, 1, 1, 1, 1, 2, 2, 2]
    assert d.skipped == 0 and d.reference_outputs is None
    # files sorted within a class: "apple" holds chelsea, coffee, moon in that order
    first = load_data(tree / "apple", preprocess=SMALL)
    assert np.array_equal(first.images, d.images[:3]) and first.labels is None
    assert len({x.tobytes() for x in d.images}) == 10  # real distinct inputs
    assert "10 labelled images of 3 classes" in d.description and str(tree) in d.description
    assert "resize 40, centre crop 32" in d.description and "\n" not in d.description


def test_labels_file_remaps_classes(tree, tmp_path):
    js = tmp_path / "labels.json"
    js.write_text(json.dumps({"zebra": 340, "apple": 948, "mango": 504, "unused": 1}))
    d = load_data(tree, preprocess=SMALL, labels_file=str(js))
    assert d.labels.tolist() == [948] * 3 + [504] * 4 + [340] * 3
    assert len(d.class_names) == 949 and d.class_names[340] == "zebra" and d.class_names[948] == "apple"
    assert all(d.class_names[lab] == cls
               for lab, cls in zip(d.labels, ["apple"] * 3 + ["mango"] * 4 + ["zebra"] * 3, strict=True))
    txt = tmp_path / "labels.txt"
    txt.write_text("# folder index, or index folder\nzebra 2\n0 mango\n\napple,1\n")
    d2 = load_data(tree, preprocess=SMALL, labels_file=str(txt))
    assert d2.labels.tolist() == [1] * 3 + [0] * 4 + [2] * 3
    assert d2.class_names == ("mango", "apple", "zebra") and f"labels file {txt}" in d2.description


@pytest.mark.parametrize("content, parts", [
    ('{"zebra": 1, "apple": 2}', ["no index for folder 'mango'"]),
    ('{"zebra": 1, "apple": 2, "mango": 1}', ["index 1", "'mango'", "'zebra'"]),
    ('{"zebra": "one", "apple": 2, "mango": 3}', ["folder 'zebra' needs a class index"]),
    ("zebra 0\napple 1\nmango\n", ["line 3", "'mango'"]),
    ("zebra 0\napple 1\nmango 2\nzebra 5\n", ["line 4", "'zebra' already has index 0"]),
    ('{"zebra": 0,', ["not valid JSON"]),
    ('["zebra", "apple", "mango"]', ["must hold a JSON object", "got a list"]),
])
def test_labels_file_errors_name_the_culprit(tree, tmp_path, content, parts):
    f = tmp_path / "labels.txt"
    f.write_text(content)
    with pytest.raises(UsageError) as e:
        load_data(tree, preprocess=SMALL, labels_file=str(f))
    _one_line(e, str(f), *parts)


def test_labels_text_line_that_reads_both_ways(tmp_path):
    for cls, nm in (("class 5", "rocket"), ("class 7", "coffee")):
        (tmp_path / cls).mkdir()
        _save(nm, tmp_path / cls / "a.png")
    (tmp_path / "l.txt").write_text("1 class 5\nclass 7 0\n")
    d = load_data(tmp_path, preprocess=SMALL, labels_file=str(tmp_path / "l.txt"))
    assert d.labels.tolist() == [1, 0] and d.class_names == ("class 7", "class 5")


def test_labels_file_missing_or_without_class_folders(tree, tmp_path):
    with pytest.raises(UsageError) as e:
        load_data(tree, preprocess=SMALL, labels_file=str(tmp_path / "nope.json"))
    _one_line(e, "labels file not found", "nope.json")
    (tmp_path / "l.json").write_text("{}")
    with pytest.raises(UsageError) as e:
        load_data(tree / "zebra", preprocess=SMALL, labels_file=str(tmp_path / "l.json"))
    _one_line(e, "class sub-folders")


def test_flat_folder_gives_inputs_without_labels(tmp_path):
    for i, nm in enumerate(("rocket", "camera", "coffee")):
        _save(nm, tmp_path / f"{i}.{'JPEG' if i == 2 else 'bmp'}")
    (tmp_path / "readme.md").write_text("# photos")
    (tmp_path / ".hidden.png").write_bytes(b"junk")  # hidden: ignored, not counted as skipped
    seen = []
    d = load_data(tmp_path, preprocess=SMALL, progress=lambda done, total: seen.append((done, total)))
    assert d.labels is None and d.class_names == () and d.skipped == 0
    assert d.images.shape == (3, 3, 32, 32)
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert "3 images from the folder" in d.description and "no labels" in d.description


def test_undecodable_files_are_skipped_and_counted(tmp_path):
    _save("chelsea", tmp_path / "a_good.png")
    _save("coffee", tmp_path / "b_full.jpg")
    raw = (tmp_path / "b_full.jpg").read_bytes()
    (tmp_path / "c_truncated.jpg").write_bytes(raw[: len(raw) // 2])
    (tmp_path / "d_text.png").write_text("this is not a PNG")
    d = load_data(tmp_path, preprocess=SMALL)
    assert len(d) == 2 and d.skipped == 2
    assert [s.split(": ", 1)[0] for s in d.skipped_examples] == [str(tmp_path / "c_truncated.jpg"),
                                                                 str(tmp_path / "d_text.png")]
    assert "truncated" in d.skipped_examples[0] and "cannot identify" in d.skipped_examples[1]
    assert "2 files skipped" in d.description
    # only broken files: a one-line error naming the folder and one reason
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.png").write_text("nope")
    with pytest.raises(UsageError) as e:
        load_data(bad, preprocess=SMALL)
    _one_line(e, "no decodable image", str(bad), "x.png")


def test_max_images_is_balanced_and_deterministic(tree):
    full = load_data(tree, preprocess=SMALL)
    a = load_data(tree, preprocess=SMALL, max_images=6, seed=3)
    b = load_data(tree, preprocess=SMALL, max_images=6, seed=3)
    assert np.array_equal(a.images, b.images) and np.array_equal(a.labels, b.labels)
    assert np.bincount(a.labels).tolist() == [2, 2, 2]
    assert list(a.labels) == sorted(a.labels)  # kept in file order
    rows = {x.tobytes() for x in full.images}
    assert all(x.tobytes() in rows for x in a.images)  # a subset of the real images
    picks = {tuple(np.flatnonzero([x.tobytes() in {y.tobytes() for y in load_data(
        tree, preprocess=SMALL, max_images=4, seed=s).images} for x in full.images])) for s in range(4)}
    assert len(picks) > 1  # the seed chooses
    assert np.bincount(load_data(tree, preprocess=SMALL, max_images=4, seed=0).labels).max() == 2
    assert "class-balanced seeded subset of 10 files" in a.description


def test_max_images_replaces_a_broken_file(tmp_path):
    for i, nm in enumerate(("chelsea", "coffee", "rocket")):
        _save(nm, tmp_path / f"{i}.png")
    (tmp_path / "3.png").write_text("broken")
    seen = []
    for seed in range(6):  # whichever order: three good images, the broken one counted when tried
        d = load_data(tmp_path, preprocess=SMALL, max_images=3, seed=seed,
                      progress=lambda done, total: seen.append((done, total)))
        assert len(d) == 3 and d.skipped in (0, 1)
    assert seen[-1][0] == seen[-1][1]


def test_npy_inputs(tmp_path):
    x = np.arange(2 * 3 * 4 * 4, dtype=np.float64).reshape(2, 3, 4, 4)
    np.save(tmp_path / "x.npy", x)
    d = load_data(tmp_path / "x.npy", preprocess=SMALL, input_shape=(3, 4, 4))
    assert (d.images.dtype == np.float32 and np.array_equal(d.images, x.astype(np.float32))
            and d.labels is None)
    np.save(tmp_path / "one.npy", x[0])
    assert load_data(tmp_path / "one.npy", preprocess=SMALL,
                     input_shape=(3, 4, 4)).images.shape == (1, 3, 4, 4)
    np.save(tmp_path / "ids.npy", np.arange(10, dtype=np.int32).reshape(2, 5))
    ids = load_data(tmp_path / "ids.npy", preprocess=SMALL, input_shape=(-1,))
    assert ids.images.dtype == np.int32 and ids.images.shape == (2, 5)
    with pytest.raises(UsageError) as e:
        load_data(tmp_path / "x.npy", preprocess=SMALL, input_shape=(3, 8, 8))
    _one_line(e, "x.npy", "sample shape 3x4x4 does not match the model input 3x8x8")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(UsageError) as e:
        load_data(tmp_path / "obj.npy", preprocess=SMALL)
    _one_line(e, "obj.npy", "refused")
    (tmp_path / "junk.npy").write_bytes(b"\x93NUMPY junk")
    with pytest.raises(UsageError) as e:
        load_data(tmp_path / "junk.npy", preprocess=SMALL)
    _one_line(e, "junk.npy", "not a valid .npy")


def test_npz_named_inputs_labels_and_reference(tmp_path):
    rng = np.random.default_rng(0)
    img, mask = rng.normal(size=(6, 3, 8, 8)), rng.integers(0, 2, size=(6, 8), dtype=np.int64)
    logits, boxes = rng.normal(size=(6, 10)).astype(np.float32), rng.normal(size=(6, 4))
    labels = np.array([0, 1, 2, 0, 1, 2])
    np.savez(tmp_path / "d.npz", image=img, mask=mask, labels=labels, reference_logits=logits,
             reference_boxes=boxes)
    d = load_data(tmp_path / "d.npz", preprocess=SMALL, input_shape={"image": (3, 8, 8), "mask": (8,)})
    assert set(d.images) == {"image", "mask"} and d.images["mask"].dtype == np.int64
    assert d.images["image"].dtype == np.float32 and d.labels.tolist() == labels.tolist()
    assert (set(d.reference_outputs) == {"logits", "boxes"}
            and np.array_equal(d.reference_outputs["logits"], logits))
    assert "6 samples" in d.description and "with labels" in d.description
    sub = load_data(tmp_path / "d.npz", preprocess=SMALL, max_images=3, seed=1)
    assert np.bincount(sub.labels).tolist() == [1, 1, 1]
    i = [int(np.flatnonzero((img.astype(np.float32) == r).all(axis=(1, 2, 3)))[0])
         for r in sub.images["image"]]
    assert (np.array_equal(sub.reference_outputs["logits"], logits[i])
            and np.array_equal(sub.images["mask"], mask[i]))
    np.savez(tmp_path / "one.npz", x=img[0], reference=logits[0])  # one sample, one output
    one = load_data(tmp_path / "one.npz", preprocess=SMALL, input_shape=(3, 8, 8))
    assert one.images["x"].shape == (1, 3, 8, 8) and one.reference_outputs[ONLY_OUTPUT].shape == (1, 10)


@pytest.mark.parametrize("arrays, shape, parts", [
    (dict(a=np.zeros((2, 3)), b=np.zeros((3, 3))), None, ["different numbers of samples", "a 2", "b 3"]),
    (dict(a=np.zeros((2, 3))), {"a": (3,), "b": (3,)}, ["no array for model input 'b'"]),
    (dict(a=np.zeros((2, 3)), c=np.zeros((2, 3))), {"a": (3,)}, ["array 'c' is not a model input"]),
    (dict(a=np.zeros((2, 3)), b=np.zeros((2, 3))), (3,), ["holds 2 inputs"]),
    (dict(a=np.zeros((2, 3)), labels=np.zeros(3, int)), None,
     ["'labels' must hold one class index per sample"]),
    (dict(a=np.zeros((2, 3)), reference=np.zeros((3, 5))), None, ["3 reference samples for 2 inputs"]),
    (dict(labels=np.zeros(3, int)), None, ["holds no input array"]),
])
def test_npz_errors(tmp_path, arrays, shape, parts):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(UsageError) as e:
        load_data(tmp_path / "bad.npz", preprocess=SMALL, input_shape=shape)
    _one_line(e, "bad.npz", *parts)


def test_npz_with_python_objects_is_refused(tmp_path):
    np.savez(tmp_path / "obj.npz", x=np.zeros((2, 3)), labels=np.array([{"a": 1}, None], dtype=object))
    with pytest.raises(UsageError) as e:
        load_data(tmp_path / "obj.npz", preprocess=SMALL)
    _one_line(e, "obj.npz", "Python objects")


def test_bad_paths_are_one_line_errors(tmp_path, tree):
    cases = [(tmp_path / "missing", ["data path not found", "missing"]),
             (tmp_path / "empty", ["no images in", "empty"]),
             (tmp_path / "data.csv", ["--data takes a folder of images, a .npy or a .npz", "data.csv"])]
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no images here")
    (tmp_path / "data.csv").write_text("1,2,3")
    for path, parts in cases:
        with pytest.raises(UsageError) as e:
            load_data(path, preprocess=SMALL)
        _one_line(e, *parts)
    with pytest.raises(UsageError) as e:  # known before decoding: crop 32 cannot fill a 224x224 input
        load_data(tree, preprocess=SMALL, input_shape=(3, 224, 224))
    _one_line(e, str(tree), "makes 3x32x32 samples but the model input is 3x224x224")
    with pytest.raises(UsageError) as e:  # no crop: photos of different aspect ratios
        load_data(tree, preprocess=preprocess_spec(SMALL, crop="none"))
    _one_line(e, "differ in size after preprocessing", "--crop")
    for bad in (0, "ten", 2.5):
        with pytest.raises(UsageError) as e:
            load_data(tree, preprocess=SMALL, max_images=bad)
        _one_line(e, "--max-images takes a positive integer")


def test_defaults_match_data_py_photo_preprocessing(tmp_path):
    """ImageNet defaults through load_data == data._preprocess on the same bundled photo (PNG: lossless)."""
    photos = [data._photo("chelsea"), data._photo("coffee")[:, :455]]  # the second: an odd crop margin (67)
    for i, photo in enumerate(photos):
        Image.fromarray(photo).save(tmp_path / f"{i}.png")
    spec = imagenet_defaults((3, 224, 224))
    got = load_data(tmp_path, preprocess=spec, input_shape=(3, 224, 224)).images
    want = np.stack([data._preprocess(Image.fromarray(p), data.Preprocess()) for p in photos])
    assert got.shape == want.shape == (2, 3, 224, 224)
    assert np.abs(got - want).max() <= 1e-6
    assert spec.describe() == ("resize 256, centre crop 224, scale 1/255, mean (0.485, 0.456, 0.406), "
                               "std (0.229, 0.224, 0.225), RGB, NCHW, bilinear (ImageNet defaults)")


def test_imagenet_defaults_read_the_input_shape():
    s = imagenet_defaults((3, 224, 224))
    assert (s.resize, s.crop, s.layout, s.channels, s.scale) == (256, 224, "nchw", 3, 1 / 255)
    s = imagenet_defaults((1, 160, 160, 3))
    assert (s.resize, s.crop, s.layout, s.channels) == (183, 160, "nhwc", 3)
    g = imagenet_defaults((1, 28, 28))
    assert g.channels == 1 and g.mean == (0.449,) and g.crop == 28 and g.resize == 32
    assert imagenet_defaults((3, None, None)).crop == 224
    for bad in [(5, 5, 5), (3, 224)]:
        with pytest.raises(UsageError) as e:
            imagenet_defaults(bad)
        _one_line(e, "x".join(map(str, bad)))


def test_overrides_change_the_tensor(tmp_path):
    _save("astronaut", tmp_path / "a.png")
    base = load_data(tmp_path, preprocess=SMALL).images[0]  # 3,32,32
    plain = preprocess_spec(SMALL, mean="0", std="1", scale=1)
    raw = load_data(tmp_path, preprocess=plain).images[0]
    assert raw.max() > 100 and np.allclose((raw / 255 - np.array(SMALL.mean)[:, None, None])
                                           / np.array(SMALL.std)[:, None, None], base, atol=1e-5)
    bgr = load_data(tmp_path, preprocess=preprocess_spec(plain, bgr=True)).images[0]
    assert np.array_equal(bgr, raw[::-1])
    nhwc = load_data(tmp_path, preprocess=preprocess_spec(SMALL, layout="NHWC"),
                     input_shape=(32, 32, 3)).images[0]
    assert np.array_equal(nhwc, base.transpose(1, 2, 0))
    gray = load_data(tmp_path, preprocess=PreprocessSpec(resize=40, crop=32, mean=(0.5,), std=(0.5,),
                                                         channels=1))
    assert gray.images.shape == (1, 1, 32, 32)
    big = load_data(tmp_path, preprocess=preprocess_spec(SMALL, resize=64, crop="48")).images
    assert big.shape == (1, 3, 48, 48)


def test_preprocess_spec_overrides_and_validation():
    s = preprocess_spec(SMALL, resize="64", mean="0.5", std=[0.2, 0.3, 0.4], scale="1/127.5", layout="nhwc",
                        bgr=True)
    assert (s.resize, s.mean, s.std, s.layout, s.bgr) == (64, (0.5,) * 3, (0.2, 0.3, 0.4), "nhwc", True)
    assert s.scale == pytest.approx(1 / 127.5) and s.crop == SMALL.crop
    assert s.source == "test with user overrides: resize, mean, std, layout, bgr, scale"
    assert preprocess_spec(SMALL) is SMALL
    assert preprocess_spec(SMALL, resize=0).resize is None
    assert PreprocessSpec.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert "BGR, NHWC" in s.describe() and "scale 0.00784314" in s.describe()
    gray = PreprocessSpec(mean=(0.5,), std=(0.5,), channels=1)
    bad = [(dict(mean="0.485,0.456"), "--mean takes 1 or 3 numbers, got 2"),
           (dict(std="1,0,1"), "--std takes positive numbers"),
           (dict(mean="a,b,c"), "--mean takes comma-separated numbers"),
           (dict(layout="chw"), "--layout takes nchw or nhwc, got 'chw'"),
           (dict(scale="-1"), "--scale takes a positive number"),
           (dict(scale="1/0"), "--scale takes a positive number"),
           (dict(resize="2.5"), "--resize takes a positive integer"),
           (dict(crop=-3), "--crop takes a positive integer"),
           (dict(bgr="maybe"), "--bgr takes true or false")]
    for kw, msg in bad:
        with pytest.raises(UsageError) as e:
            preprocess_spec(SMALL, **kw)
        assert _one_line(e, msg)
    with pytest.raises(UsageError) as e:
        preprocess_spec(gray, mean="0.1,0.2,0.3")
    _one_line(e, "--mean takes 1 number, got 3")
    with pytest.raises(UsageError):
        PreprocessSpec.from_dict({**SMALL.to_dict(), "layout": "chw"})
    with pytest.raises(UsageError):
        PreprocessSpec.from_dict({**SMALL.to_dict(), "colour": "red"})


def test_split_is_disjoint_and_balanced(tree):
    d = load_data(tree, preprocess=SMALL)
    ev, ca = split_eval_calibration(d, n_calib=3, seed=0)
    assert len(ev) == 7 and len(ca) == 3 and np.bincount(ca.labels).tolist() == [1, 1, 1]
    ev_rows, ca_rows = {x.tobytes() for x in ev.images}, {x.tobytes() for x in ca.images}
    assert not ev_rows & ca_rows and len(ev_rows | ca_rows) == len(d)  # no evaluated image calibrates
    assert ev.class_names == ca.class_names == d.class_names and ev.skipped == d.skipped and ca.skipped == 0
    e2, c2 = split_eval_calibration(d, n_calib=3, seed=0)
    assert e2.digest() == ev.digest() and c2.digest() == ca.digest() and ev.digest() != ca.digest()
    e3, c3 = split_eval_calibration(d, n_calib=100)
    assert len(c3) == 5 and len(e3) == 5 and "at most half" in c3.description
    one = UserData(d.images[:1], d.labels[:1])
    with pytest.raises(UsageError) as e:
        split_eval_calibration(one, n_calib=1)
    _one_line(e, "cannot split 1 sample")
    with pytest.raises(UsageError):
        split_eval_calibration(d, n_calib=0)


def test_split_keeps_arrays_and_reference_aligned():
    x = np.arange(8, dtype=np.float32)[:, None] * np.ones((8, 4), np.float32)
    d = UserData({"x": x}, reference_outputs={ONLY_OUTPUT: x[:, :2] * 10})
    ev, ca = split_eval_calibration(d, n_calib=2, seed=5)
    for part in (ev, ca):
        assert np.array_equal(part.reference_outputs[ONLY_OUTPUT], part.images["x"][:, :2] * 10)
    assert sorted(ev.images["x"][:, 0].tolist() + ca.images["x"][:, 0].tolist()) == list(range(8))


def test_digest_covers_inputs_labels_and_reference():
    x = np.ones((2, 3), np.float32)
    a = UserData(x).digest()
    assert a == UserData(x.copy()).digest()
    assert a != UserData(x, labels=np.array([0, 1])).digest()
    assert a != UserData(x.reshape(3, 2)).digest()  # same bytes, another shape
    assert a != UserData({"images": x}, reference_outputs={"y": x}).digest()
