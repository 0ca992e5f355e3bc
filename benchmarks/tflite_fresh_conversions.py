"""How often litert-torch converts an ONNX model right, each time in a fresh process, with and without its
weights made contiguous first (backends/tflite/convert_check.py). Each conversion: onnx2torch's module of the
file (as the converter child makes it), NHWC input, batch 1, ``litert_torch.convert`` under inference mode,
then the file run once beside the module on one sample: its largest output error over the module's largest
|output|.

    python benchmarks/tflite_fresh_conversions.py MODEL.onnx --input-shape x:1x3x48x320 -n 5

A sample of seeded random values in [-1, 1] (the error is the conversion's: any input shows it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = """
import contextlib, io, json, sys
import numpy as np, torch
import litert_torch
from infer_compare.backends.tflite.convert_onnx import onnx_module
from infer_compare.backends.tflite.convert import layout_io
from infer_compare.backends.tflite.convert_check import contiguous_constants, off_by
path, name, shape, fix = sys.argv[1], sys.argv[2], tuple(json.loads(sys.argv[3])), sys.argv[4] == "1"
x = np.random.default_rng(0).uniform(-1, 1, size=shape).astype(np.float32)
gm = onnx_module(path, {name: shape})
made = contiguous_constants(gm) if fix else 0
w, sample, _, _ = layout_io(gm, [x])
with contextlib.redirect_stderr(io.StringIO()), torch.inference_mode():
    edge = litert_torch.convert(w, sample)
print(json.dumps({"made_contiguous": made, "off": off_by(edge, w, sample)}))
"""


def one(path: str, name: str, shape: tuple[int, ...], fix: bool) -> dict:
    """One conversion in a fresh process, in a temporary folder (onnx2torch's static copy of the file goes
    there)."""
    with tempfile.TemporaryDirectory() as work:
        out = subprocess.run([sys.executable, "-c", CHILD, os.path.abspath(path), name, json.dumps(shape),
                              "1" if fix else "0"], capture_output=True, text=True, check=True, cwd=work,
                             env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--input-shape", required=True, help="NAME:1xCxHxW")
    ap.add_argument("-n", type=int, default=5, help="fresh conversions of each kind")
    a = ap.parse_args()
    name, _, dims = a.input_shape.partition(":")
    shape = tuple(int(d) for d in dims.split("x"))
    for fix in (False, True):
        offs = [one(a.model, name, shape, fix)["off"] for _ in range(a.n)]
        right = sum(o is not None and o <= 1e-3 for o in offs)
        print(f"{'contiguous' if fix else 'as onnx2torch keeps them'}: {right} of {a.n} right; off by "
              + ", ".join(f"{o:.3g}" for o in offs), flush=True)


if __name__ == "__main__":
    main()
