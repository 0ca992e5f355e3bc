"""Pre-built artifacts the user already has (``--artifact PATH``, repeatable): an ONNX
file, an OpenVINO IR (.xml + .bin), a TensorRT engine (.engine/.plan), a TFLite file or
an Edge TPU file (``*_edgetpu.tflite``). Each adds rows that measure exactly that file
with every runner of its format, checked against the same reference; the rows carry
the variant ``user:<file name>`` in their identity, so they stand beside the rows of
the artifacts the tool built.

The format comes from the suffix and is checked against the content (an .xml must be an
IR, a .tflite must carry the TFLite identifier, an .onnx must parse); the precision
from the content where it says (QDQ nodes or fp16 weights in ONNX, FakeQuantize or f16
constants in an IR, int8 tensors in TFLite), else fp32.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from infer_compare.backends.tflite.tflite_file import read_model
from infer_compare.base.errors import UsageError

SUFFIXES = {".onnx": "onnx", ".xml": "openvino", ".engine": "tensorrt", ".plan": "tensorrt",
            ".tflite": "tflite"}


@dataclass(frozen=True)
class UserArtifact:
    path: str
    format: str
    precision: str
    sha256: str
    how: str  # how format and precision were told
    static_batch: int | None = None  # the batch size the file requires, where it says so

    @property
    def variant(self) -> str:
        return f"user:{Path(self.path).name}"


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _onnx_precision(path: str) -> str:
    try:
        import onnx

        m = onnx.load(path, load_external_data=False)
    except ImportError:
        return "fp32"
    except Exception as e:
        raise UsageError(f"--artifact {path} is not a valid ONNX file: "
                         f"{str(e).strip().splitlines()[0][:200]}") from None
    ops = {n.op_type for n in m.graph.node}
    if ops & {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger",
              "MatMulInteger"}:
        return "int8"
    if any(t.data_type == onnx.TensorProto.FLOAT16 for t in m.graph.initializer):
        return "fp16"
    return "fp32"


def _ir_precision(path: str) -> str:
    text = Path(path).read_text(errors="replace")
    if "<net" not in text[:4096]:
        raise UsageError(f"--artifact {path} is not an OpenVINO IR (no <net> element)")
    if not Path(path).with_suffix(".bin").exists():
        raise UsageError(f"--artifact {path}: its weights file "
                         f"{Path(path).with_suffix('.bin').name} is missing")
    if "FakeQuantize" in text:
        return "int8"
    return "fp16" if 'element_type="f16"' in text else "fp32"


def _tflite_precision(path: str) -> str:
    with open(path, "rb") as f:
        head = f.read(8)
    if head[4:8] != b"TFL3":
        raise UsageError(f"--artifact {path} is not a TFLite file (no TFL3 identifier)")
    try:
        model = read_model(path)
        types = {str(t.type).lower() for t in model.tensors}
    except Exception:
        return "fp32"
    return "int8" if any("int8" in t for t in types) else ("fp16" if any("float16" in t for t in types)
                                                           else "fp32")


def detect(path: str) -> UserArtifact:
    """Format and precision of a pre-built artifact; UsageError (one line) when it is none we run."""
    p = os.path.expanduser(path)
    if not os.path.isfile(p):
        raise UsageError(f"--artifact {path}: file not found")
    name = Path(p).name.lower()
    fmt = "edgetpu" if name.endswith("_edgetpu.tflite") else SUFFIXES.get(Path(p).suffix.lower())
    if fmt is None:
        raise UsageError(f"--artifact {path}: unsupported suffix (known: .onnx, .xml, .engine, .plan, "
                         ".tflite, *_edgetpu.tflite)")
    if fmt == "onnx":
        prec = _onnx_precision(p)
    elif fmt == "openvino":
        prec = _ir_precision(p)
    elif fmt in ("tflite", "edgetpu"):
        prec = "int8" if fmt == "edgetpu" else _tflite_precision(p)
    else:
        prec = "fp32"  # an engine's precision is what it was built with: the row's exec precision tells
    return UserArtifact(os.path.abspath(p), fmt, prec, _sha256(p),
                        f"suffix {Path(p).suffix}, content: {prec}", _static_batch(p, fmt))


def _static_batch(path: str, fmt: str) -> int | None:
    """The first input's fixed batch size in an ONNX file or an IR; None when dynamic or not said."""
    import re

    try:
        if fmt == "onnx":
            import onnx

            dim = onnx.load(path, load_external_data=False).graph.input[0].type.tensor_type.shape.dim
            return int(dim[0].dim_value) if dim and dim[0].HasField("dim_value") else None
        if fmt == "openvino":
            m = re.search(r'type="Parameter"[^>]*>\s*<data[^>]*shape="([^"]*)"',
                          Path(path).read_text(errors="replace"))
            first = m.group(1).split(",")[0].strip() if m else ""
            return int(first) if first.isdigit() else None
    except Exception:
        return None
    return None
