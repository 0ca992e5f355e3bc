"""issue 23 point 5: class folders without --labels are the model's classes only when there are as many
folders as classes; otherwise a one-line usage error says why and how to pass --labels. The data's
description says how many images were used and how they were split (evaluation vs calibration)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from infer_compare.base.errors import UsageError
from infer_compare.data.user import check_folder_classes, load_data, preprocess_spec, split_eval_calibration
from infer_compare.data.user.spec import PreprocessSpec

Image = pytest.importorskip("PIL.Image")


def _folders(root: Path, names=("cat", "dog", "fox"), per=4) -> Path:
    rng = np.random.default_rng(0)
    for n in names:
        (root / n).mkdir(parents=True)
        for i in range(per):
            Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)).save(root / n / f"{i}.png")
    return root


def _spec() -> PreprocessSpec:
    return preprocess_spec(PreprocessSpec(resize=32, crop=28, channels=3, source="test"))


def test_fewer_folders_than_classes_without_labels_is_a_usage_error(tmp_path):
    d = load_data(_folders(tmp_path / "photos"), preprocess=_spec(), seed=0)
    with pytest.raises(UsageError) as e:
        check_folder_classes(d, 1000, "photos")
    msg = str(e.value)
    assert "\n" not in msg
    assert "3 class folders but the model has 1000 classes" in msg and "--labels FILE" in msg
    assert '{"cat": 281' in msg and "flat folder" in msg
    check_folder_classes(d, 3, "photos")  # as many folders as classes: the ImageFolder convention
    check_folder_classes(d, None, "photos")  # class count unknown: nothing to check


def test_labels_file_or_flat_folder_pass(tmp_path):
    photos = _folders(tmp_path / "photos")
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"cat": 281, "dog": 207, "fox": 277}))
    d = load_data(photos, preprocess=_spec(), labels_file=str(labels), seed=0)
    check_folder_classes(d, 1000, "photos")
    assert sorted(set(d.labels.tolist())) == [207, 277, 281]
    flat = tmp_path / "flat"
    flat.mkdir()
    for p in (photos / "cat").iterdir():
        (flat / p.name).write_bytes(p.read_bytes())
    check_folder_classes(load_data(flat, preprocess=_spec(), seed=0), 1000, "flat")


def test_the_split_is_said_in_numbers(tmp_path):
    d = load_data(_folders(tmp_path / "photos"), preprocess=_spec(), seed=0)
    ev, ca = split_eval_calibration(d, n_calib=4, seed=0)
    assert (len(ev), len(ca)) == (8, 4)
    assert ev.description.startswith("12 labelled images of 3 classes")
    assert ("split (seeded, disjoint): 8 for evaluation (parity and accuracy), 4 held out for int8 "
            "calibration") in ev.description


def test_cli_refuses_before_any_work_and_leaves_no_folder(tmp_path, cache_dir, capsys):
    """lenet5 has 10 classes; 3 folders and no --labels: exit 2, one line, no result folder."""
    from infer_compare.cli import main

    photos = _folders(tmp_path / "photos")
    out = tmp_path / "results"
    code = main(["--model", "lenet5", "--data", str(photos), "--backends", "onnxruntime", "--device", "cpu",
                 "-b", "1", "-o", str(out), "--cache-dir", str(cache_dir)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert any("3 class folders but the model has 10 classes" in line for line in err), err
    assert not out.exists()
