"""A recognizer's per-step class scores judged on the text a user reads from them (parity/sequences.py), and a
folder of non-square images for such a model (--data with a 48 x 320 input). The end-to-end test runs
RapidOCR's PP-OCRv4 text recognizer (a file made by another project, rapidocr-onnxruntime from the dev setup)
on words rendered with Pillow's own font."""

from __future__ import annotations

import numpy as np
import pytest

from infer_compare.catalog.formats import TOLERANCES
from infer_compare.parity.kinds import MAP, REGRESSION, SEQUENCE, infer_kind, parse_output_kinds
from infer_compare.parity.outputs import compare_kind
from infer_compare.parity.sequences import decode

from .conftest import FAST
from .test_field_models import ocr_model, rows_of

WORDS = ["infer", "compare", "runtime", "latency", "TensorRT", "Jetson", "precision", "throughput", "parity",
         "2026", "Coral", "model", "ResNet", "batch", "engine", "kernel"]


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _recognizer_output(n: int = 8, steps: int = 40, classes: int = 100, seed: int = 0) -> np.ndarray:
    """[n, steps, classes] probabilities: mostly blank (class 0), a firm character every few steps."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, steps, classes))
    z[:, :, 0] += 6.0
    for i in range(n):
        for t in range(2, steps, 5):
            z[i, t, 1 + (i * 7 + t) % (classes - 1)] += 12.0
    return _softmax(z)


def test_ctc_greedy_decoding_merges_repeats_and_drops_the_blank():
    assert decode(np.array([0, 3, 3, 0, 3, 5, 5, 0, 0])) == (3, 3, 5)
    assert decode(np.array([0, 0, 0])) == ()


def test_a_softmax_per_step_is_a_sequence_and_logits_or_maps_are_not():
    p = _recognizer_output()
    assert infer_kind(p) == SEQUENCE
    assert infer_kind(np.log(p)) == REGRESSION  # logits: only when given (--output-kind NAME=ctc)
    rng = np.random.default_rng(1)
    assert infer_kind(rng.uniform(size=(2, 16, 16))) == MAP  # a probability map: its rows do not sum to 1
    assert parse_output_kinds(["387=ctc", "out=recognizer"]) == {"387": SEQUENCE, "out": SEQUENCE}


def test_the_same_text_passes_and_a_changed_character_fails_on_texts():
    p = _recognizer_output()
    assert compare_kind(p, p, TOLERANCES["fp32"]).passed
    q = p.copy()
    q[3, 12] = 0.0
    q[3, 12, 42] = 1.0  # sample 3 reads another character at a firm step
    r = compare_kind(p, q, TOLERANCES["fp16"])
    assert r.kind == SEQUENCE and not r.passed
    assert r.sequences["changed"] == 1 and r.sequences["first_changed"] == 3
    assert "texts equal 0.875 < 0.95" in r.reason
    assert "texts: 7 of 8 read the same (1 changed, first #3)" in r.sequences["text"]


def test_a_flip_at_a_near_tie_step_is_not_judged():
    p = _recognizer_output()
    p[2, 20] = 0.0
    p[2, 20, 0], p[2, 20, 9] = 0.51, 0.49  # the reference hesitates between blank and a character
    q = p.copy()
    q[2, 20, 0], q[2, 20, 9] = 0.48, 0.52  # fp16 tips it: the text gains a character
    r = compare_kind(p, q, TOLERANCES["fp16"])
    assert r.passed, r.reason
    assert r.sequences["tie_only"] == 1 and r.sequences["changed"] == 0
    assert "1 changed only at near-tie steps not judged" in r.sequences["text"]
    assert not compare_kind(p, q, TOLERANCES["fp32"]).passed  # fp32 may err 1e-3: no tie at a 0.02 margin


def test_an_int8_softmax_that_sums_under_1_is_read_as_probabilities():
    """A quantized softmax sums to 0.988-0.996 (RapidOCR's recognizer under ONNX Runtime int8): taken as it
    is, not put through a second softmax (which would flatten it and make every confidence about
    1/classes)."""
    p = _recognizer_output()
    q = p * 0.99
    r = compare_kind(p, q, TOLERANCES["int8"])
    assert r.passed, r.reason
    assert r.sequences["confidence_error"] < 0.02


def test_logits_given_as_a_sequence_are_judged_by_their_softmax():
    z = np.log(_recognizer_output())
    r = compare_kind(z, z + 1e-4, TOLERANCES["fp16"], kind=SEQUENCE)
    assert r.kind == SEQUENCE and r.passed and r.sequences["same"] == 8


def word_crops(folder, words=WORDS, size=(320, 48)) -> None:
    """The words rendered dark on white with Pillow's own font, one image each (the recognizer
    runs of benchmarks/results/field-models.md)."""
    from PIL import Image, ImageDraw, ImageFont

    folder.mkdir()
    font = ImageFont.load_default(size=30)
    for i, w in enumerate(words):
        img = Image.new("RGB", size, "white")
        ImageDraw.Draw(img).text((8, 6), w, fill=(20, 20, 20), font=font)
        img.save(folder / f"{i:02d}.png")


def test_a_folder_of_images_for_a_non_square_input(tmp_path):
    """A 48 x 320 model takes a folder of images (the shape check before decoding used to expect 48 x 48)."""
    from infer_compare.data.user import imagenet_defaults, load_data

    word_crops(tmp_path / "crops", WORDS[:3])
    data = load_data(tmp_path / "crops", preprocess=imagenet_defaults((3, 48, 320)), input_shape=(3, 48, 320))
    assert data.images.shape == (3, 3, 48, 320)


def _charset(path) -> list[str]:
    import onnx

    meta = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    return ["", *meta["character"].splitlines(), " "]  # PaddleOCR's: blank first, a space last


@pytest.mark.slow
def test_a_text_recognizer_is_judged_on_the_words_it_reads(cache_dir, tmp_path):
    from infer_compare import DataOptions, compare

    model = ocr_model("ch_PP-OCRv4_rec_infer.onnx")
    word_crops(tmp_path / "words")
    data = DataOptions(data=str(tmp_path / "words"), overrides={"mean": "0.5", "std": "0.5"})
    rep = compare(str(model), input_shape="x:1x3x48x320", data=data, backends=["onnxruntime"],
                  devices=["cpu"], precisions=["fp32", "int8"], batch_sizes=[1], cache_dir=cache_dir, **FAST,
                  max_time_s=0.3)
    rows = rows_of(rep)
    fp32, int8 = rows[("onnxruntime", "onnx", "fp32", 1)], rows[("onnxruntime", "onnx", "int8", 1)]
    assert fp32.status == "ok" and fp32.parity.kind == SEQUENCE, fp32.reason
    seq = fp32.parity.sequences
    assert seq["same"] == seq["samples"] and seq["texts_read"] == seq["samples"] >= 4
    assert int8.parity is not None and int8.parity.kind == SEQUENCE
    t = int8.parity.sequences
    # the verdict is the texts' (and confidences'): it fails exactly where fewer than 90 % of the texts agree
    if t["same"] / (t["samples"] - t["tie_only"]) < 0.9:
        assert int8.status == "parity_failed" and "texts equal" in int8.reason
    # the reference reads the words: decoded with the model's own characters, most come back as written
    charset = _charset(model)
    ref = rep_reference_texts(model, tmp_path / "words", charset)
    assert sum(a == b for a, b in zip(ref, WORDS, strict=True)) >= 12, ref


def rep_reference_texts(model, folder, charset: list[str]) -> list[str]:
    """ONNX Runtime fp32 on the crops, preprocessed as the comparison did (mean and std 0.5), decoded
    greedily."""
    import onnxruntime as ort
    from PIL import Image

    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    out = []
    for f in sorted(folder.iterdir()):
        x = (np.asarray(Image.open(f).convert("RGB"), np.float32) / 255 - 0.5) / 0.5
        probs = sess.run(None, {"x": x.transpose(2, 0, 1)[None]})[0][0]
        out.append("".join(charset[i] for i in decode(probs.argmax(-1))))
    return out


@pytest.mark.slow
def test_the_recognizer_s_tflite_file_keeps_each_layer_s_own_weights(cache_dir, tmp_path):
    """onnx2torch keeps 9 of this recognizer's Linear weights as transposed views; litert-torch's constant
    cache keyed by storage address then gave some layers another's weight of the same shape, in most converter
    processes (off by 0.17-0.95, texts changed; backends/tflite/convert_check.py). Made contiguous first, the
    conversion is right and reads every text as ONNX Runtime does."""
    from infer_compare import DataOptions, compare
    from infer_compare.backends.tflite.export import TFLiteExporter

    if not TFLiteExporter.probe().available:
        pytest.skip(TFLiteExporter.probe().reason)
    word_crops(tmp_path / "words", WORDS[:8])
    data = DataOptions(data=str(tmp_path / "words"), overrides={"mean": "0.5", "std": "0.5"})
    rep = compare(str(ocr_model("ch_PP-OCRv4_rec_infer.onnx")), input_shape="x:1x3x48x320", data=data,
                  backends=["tflite"], devices=["cpu"], precisions=["fp32"], batch_sizes=[1],
                  cache_dir=cache_dir, **FAST, max_time_s=0.3)
    row = rows_of(rep)[("tflite", "tflite", "fp32", 1)]
    opts = row.export.options
    assert opts["constants_made_contiguous"] == 9
    assert opts["off_its_module"] <= 1e-3, opts["off_its_module"]
    assert row.status == "ok" and row.parity.sequences["same"] == row.parity.sequences["samples"], row.reason
