"""The comparison's options for your data (the "your data" group of its --help, and --data among the
most used), and their reading: the flags as a DataOptions, --input-value as {name: value text}."""

from __future__ import annotations

import argparse

from infer_compare.base.errors import UsageError


def add_data_args(p: argparse.ArgumentParser, c) -> None:
    """The "your data" group; --data goes in ``c``, the group of the most used options."""
    d = p.add_argument_group("your data (default: the bundled photos; LeNet-5: the bundled digits)")
    c.add_argument("--data", metavar="PATH", help="a folder of images (one sub-folder per class gives labels "
                   "and an accuracy column; a flat folder gives inputs only), or a .npy/.npz file of inputs "
                   "(default: the bundled photos; LeNet-5: the bundled digits)")
    d.add_argument("--labels", metavar="FILE", help="folder name -> class index (JSON, or 'name index' "
                   "lines), when the sorted folder order is not the model's class order")
    d.add_argument("--calibration", metavar="PATH", help="int8 calibration data (default: a part of --data "
                   "kept out of the evaluation)")
    d.add_argument("--max-images", type=int, metavar="N",
                   help="use at most N images of --data (class-balanced)")
    d.add_argument("--resize", type=int, metavar="PX", help="resize the shorter side to PX before the crop")
    d.add_argument("--crop", type=int, metavar="PX", help="centre crop of PX x PX")
    d.add_argument("--mean", metavar="M[,M,M]", help="per-channel mean subtracted after --scale")
    d.add_argument("--std", metavar="S[,S,S]", help="per-channel std divided by after the mean")
    d.add_argument("--layout", choices=("nchw", "nhwc"), help="the model's input layout")
    d.add_argument("--bgr", action="store_true", default=None, help="the model takes BGR channel order")
    d.add_argument("--scale", metavar="F",
                   help="multiply the raw 0..255 pixels by F before the mean (default 1/255)")
    d.add_argument("--letterbox", action="store_true", default=None,
                   help="fit each image inside the input's H x W, aspect kept, padded with gray 114 (as "
                        "detectors expect; default: resize to cover, centre crop)")
    d.add_argument("--output-kind", action="append", default=None, metavar="NAME=KIND", dest="output_kind",
                   help="what output NAME means, and so how parity judges it (repeatable; default: inferred "
                        "from its shape and values): scores ([N, classes]: cosine, top-1), map "
                        "(probabilities or a dense map: mask IoU, errors relative to its scale), sequence or "
                        "ctc ([N, steps, classes]: the text a recognizer reads, greedy CTC decoding), "
                        "detections[:FORMAT] (a detector's head, decoded), regression (values, boxes), other")


def data_options(args):
    """The data flags as a DataOptions (prepare/inputs.py)."""
    # deferred: the CLI's start (--help, env, report) stays light without it (+5 modules)
    from infer_compare.prepare.inputs import DataOptions

    keys = ("resize", "crop", "mean", "std", "layout", "bgr", "scale", "letterbox")
    overrides = {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}
    return DataOptions(data=args.data, labels=args.labels, calibration=args.calibration,
                       max_images=args.max_images, overrides=overrides,
                       values=input_values(getattr(args, "input_value", None) or []))


def input_values(items: list[str]) -> dict[str, str]:
    """--input-value NAME=VALUE (repeatable) as {name: value text}; malformed: UsageError."""
    out: dict[str, str] = {}
    for item in items:
        name, eq, value = str(item).partition("=")
        if not eq or not name.strip() or not value.strip():
            raise UsageError(f"--input-value {item!r}: give NAME=VALUE, e.g. --input-value sr=16000")
        if name.strip() in out:
            raise UsageError(f"--input-value: input '{name.strip()}' is given twice")
        out[name.strip()] = value.strip()
    return out
