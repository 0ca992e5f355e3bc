"""The steps of ONNX Runtime's static QDQ quantization that export.py runs for the int8 file:
``quant_pre_process`` (again without symbolic shape inference where that fails), calibration one
batch per ``collect_data`` call, and ``quantize_static`` from the computed ranges, with the
quantizer's output and scratch files kept out of the tool's way."""

from __future__ import annotations

import contextlib
import io
import logging
import os
from pathlib import Path
from typing import Any

from infer_compare.backends.onnxruntime.options import OrtOptions
from infer_compare.base.batches import count, is_multi
from infer_compare.base.layout import Layout
from infer_compare.catalog.formats import ONNX_INPUT_NAME

CALIB_BATCH = 8  # calibration images per inference (and per collect_data call)
ENTROPY_BINS, ENTROPY_QUANTIZED_BINS, PERCENTILE = 2048, 128, 99.999


def calibration_extra(method: str) -> dict[str, Any]:
    if method == "Entropy":
        return {"num_bins": ENTROPY_BINS, "num_quantized_bins": ENTROPY_QUANTIZED_BINS}
    if method == "Percentile":
        return {"num_bins": ENTROPY_BINS, "percentile": PERCENTILE}
    return {}


def pre_process(q, src: str, pre: Path) -> str:
    """quant_pre_process; where its symbolic shape inference fails (a dynamic batch through Shape/Resize
    arithmetic, as in PaddleOCR's detector; If subgraphs, as in Silero VAD), again without it (ONNX shape
    inference and the graph optimisation still run). Says which."""
    try:
        q.quant_pre_process(src, str(pre))
        return "quant_pre_process"
    except Exception as e:
        first = e
    try:
        q.quant_pre_process(src, str(pre), skip_symbolic_shape=True)
    except Exception:
        raise first from None
    why = str(first).strip().splitlines()[0][:120] if str(first).strip() else type(first).__name__
    return ("quant_pre_process, skip_symbolic_shape "
            f"(its symbolic shape inference failed on this graph: {why})")


@contextlib.contextmanager
def quiet():
    """The quantizer prints progress to stdout and logs warnings; keep the tool's output clean."""
    log = logging.getLogger()
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        log.setLevel(level)


@contextlib.contextmanager
def scratch_cwd(path: str):
    """The quantizer writes scratch files (sym_shape_infer_temp.onnx) into the working directory: keep them in
    ``path`` (contextlib.chdir is Python 3.11+)."""
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


class _Batches:
    """A CalibrationDataReader over a list of input batches."""

    def __init__(self, batches: list):
        self._it = iter(batches)

    def get_next(self):
        return next(self._it, None)


def calibrate(q, pre: Path, calib, method: str, tmp: Path, layout: dict | None = None):
    """Tensor ranges of ``method`` over ``calib``, one batch per collect_data call (each input laid along its
    batch axis, ``layout``)."""
    import numpy as np
    from onnxruntime.quantization.calibrate import create_calibrator
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    ops = sorted(set(QLinearOpsRegistry) | set(QDQRegistry))  # what quantize_static calibrates by default
    cal = create_calibrator(pre, ops, augmented_model_path=str(tmp / "augmented.onnx"),
                            calibrate_method=getattr(q.CalibrationMethod, method),
                            extra_options=calibration_extra(method))
    name, fixed = _input_of(pre, ONNX_INPUT_NAME)
    step = fixed or CALIB_BATCH  # a static-batch file takes only its own batch size
    n = count(calib)
    for i in range(0, n - (n % step if fixed else 0), step):
        if is_multi(calib):  # several inputs: each by name, in its own dtype
            feed = Layout.from_dict(layout).to_model(
                {k: np.ascontiguousarray(v[i:i + step]) for k, v in calib.items()})
        else:
            feed = {name: np.ascontiguousarray(calib[i:i + step], dtype=np.float32)}
        cal.collect_data(_Batches([feed]))
    return cal.compute_data()


def _input_of(path: Path, default: str) -> tuple[str, int | None]:
    """The first graph input's name and its fixed batch size (None when dynamic)."""
    import onnx

    try:
        inp = onnx.load(str(path), load_external_data=False).graph.input[0]
    except Exception:
        return default, None
    dim = inp.type.tensor_type.shape.dim
    return inp.name, (int(dim[0].dim_value) if dim and dim[0].HasField("dim_value") else None)


def quantize(q, pre: Path, out: Path, ranges, o: OrtOptions, tmp: Path, reduce_range: bool,
             excluded: list[str] | None = None) -> None:
    from onnxruntime.quantization.calibrate import save_tensors_data

    cache = tmp / "ranges.json"
    save_tensors_data(ranges, cache)
    act = q.QuantType.QUInt8 if o.int8_scheme == "U8S8" else q.QuantType.QInt8
    q.quantize_static(str(pre), str(out), None, calibration_cache_path=str(cache),
                      calibrate_method=getattr(q.CalibrationMethod, o.int8_calibration),
                      quant_format=q.QuantFormat.QDQ, per_channel=True, reduce_range=reduce_range,
                      nodes_to_exclude=list(excluded or []),
                      activation_type=act,
                      weight_type=q.QuantType.QInt8,
                      extra_options={"ActivationSymmetric": o.int8_scheme == "S8S8", "WeightSymmetric": True})
