"""THE format table: one record per format, keyed by name, never by position.

The CLI's choices, artifact building, test parametrisation and the report's rows
all read this table. Adding a format is one exporter file, one runner file and one
row here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import UsageError


@dataclass(frozen=True)
class Tolerance:
    """Parity limits against the PyTorch FP32 reference for one precision.

    ``min_cosine``: mean cosine similarity of the logits; ``max_rel_err``: max abs
    error divided by max |reference logit|; ``min_top1``: top-1 agreement, judged
    only when the weights make top-1 meaningful (pretrained or trained).
    FP16/BF16/INT8 fail Polygraphy's 1e-5 defaults for good reasons, hence the
    per-precision values.
    """

    min_cosine: float
    max_rel_err: float | None
    min_top1: float | None

    def as_dict(self) -> dict:
        return {"min_cosine": self.min_cosine, "max_rel_err": self.max_rel_err, "min_top1": self.min_top1}


TOLERANCES: dict[str, Tolerance] = {
    "fp32": Tolerance(min_cosine=0.9999, max_rel_err=1e-3, min_top1=0.99),
    # TF32 matmuls/convolutions (CUDA defaults) keep ~10 mantissa bits.
    "tf32": Tolerance(min_cosine=0.999, max_rel_err=2e-2, min_top1=0.97),
    "fp16": Tolerance(min_cosine=0.999, max_rel_err=5e-2, min_top1=0.95),
    "bf16": Tolerance(min_cosine=0.99, max_rel_err=0.2, min_top1=0.90),
    "int8": Tolerance(min_cosine=0.95, max_rel_err=None, min_top1=0.90),
}

PRECISIONS = tuple(TOLERANCES)


@dataclass(frozen=True)
class Format:
    name: str
    title: str
    suffix: str  # file suffix of the main artifact file
    built_from: str | None  # the format it is exported from
    precisions: tuple[str, ...]
    exporter: str  # "module:Class"
    runners: tuple[str, ...]  # runner names (see RUNNERS)
    # precision -> precision of the artifact it runs (OpenVINO bf16 runs the fp32 IR with a bf16 hint)
    artifact_precision: dict[str, str] = field(default_factory=dict)
    # precision -> precision of the source artifact to build from (default: fp32)
    source_precision: dict[str, str] = field(default_factory=dict)
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    description: str = ""

    def tolerance(self, precision: str) -> Tolerance:
        return self.tolerances.get(precision, TOLERANCES[precision])

    def artifact_for(self, precision: str) -> str:
        return self.artifact_precision.get(precision, precision)

    def source_for(self, precision: str) -> str:
        return self.source_precision.get(precision, "fp32")


@dataclass(frozen=True)
class RunnerInfo:
    name: str
    title: str
    impl: str  # "module:Class"
    device_kinds: tuple[str, ...]  # "cpu", "cuda", "edgetpu"
    description: str = ""


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            name="pytorch",
            title="PyTorch",
            suffix=".pt",
            built_from=None,
            precisions=("fp32", "tf32", "fp16", "bf16"),
            exporter="infer_compare.exporters.pytorch:PyTorchExporter",
            runners=("pytorch", "pytorch-compile"),
            artifact_precision={"tf32": "fp32", "fp16": "fp32", "bf16": "fp32"},
            description="eager PyTorch on the state dict; fp32 on the CPU is the reference",
        ),
        Format(
            name="onnx",
            title="ONNX",
            suffix=".onnx",
            built_from="pytorch",
            precisions=("fp32", "tf32", "fp16"),
            exporter="infer_compare.exporters.onnx:OnnxExporter",
            runners=("onnxruntime", "onnxruntime-trt"),
            artifact_precision={"tf32": "fp32"},  # tf32: the fp32 file run with TF32 math (CUDA)
            description="torch.onnx.export, dynamic batch axis, checked with onnx.checker",
        ),
        Format(
            name="openvino",
            title="OpenVINO IR",
            suffix=".xml",
            built_from="onnx",
            precisions=("fp32", "bf16", "fp16", "int8"),
            exporter="infer_compare.exporters.openvino:OpenVinoExporter",
            runners=("openvino",),
            artifact_precision={"bf16": "fp32"},
            description="ov.convert_model(ONNX) + ov.save_model; int8 by NNCF post-training quantization",
        ),
        Format(
            name="tensorrt",
            title="TensorRT engine",
            suffix=".engine",
            built_from="onnx",
            precisions=("fp32", "fp16", "int8"),
            exporter="infer_compare.exporters.tensorrt:TensorRTExporter",
            runners=("tensorrt",),
            description="tensorrt.Builder + OnnxParser; engines are tied to the GPU and TensorRT version",
        ),
        Format(
            name="tflite",
            title="TFLite",
            suffix=".tflite",
            built_from="pytorch",
            precisions=("fp32", "fp16", "int8"),
            exporter="infer_compare.exporters.tflite:TFLiteExporter",
            runners=("tflite",),
            description="litert-torch, NHWC, batch-1 file resized at load where its graph allows; int8 is full-integer",
        ),
        Format(
            name="edgetpu",
            title="Edge TPU TFLite",
            suffix="_edgetpu.tflite",
            built_from="tflite",
            precisions=("int8",),
            exporter="infer_compare.exporters.edgetpu:EdgeTpuExporter",
            runners=("edgetpu",),
            source_precision={"int8": "int8"},
            description="edgetpu_compiler on the full-integer TFLite file",
        ),
    )
}

RUNNERS: dict[str, RunnerInfo] = {
    r.name: r
    for r in (
        RunnerInfo("pytorch", "PyTorch eager", "infer_compare.runners.pytorch:PyTorchRunner", ("cpu", "cuda")),
        RunnerInfo("pytorch-compile", "PyTorch torch.compile", "infer_compare.runners.pytorch:PyTorchCompileRunner",
                   ("cuda",)),
        RunnerInfo("onnxruntime", "ONNX Runtime", "infer_compare.runners.onnxruntime:OnnxRuntimeRunner", ("cpu", "cuda")),
        RunnerInfo(
            "onnxruntime-trt",
            "ONNX Runtime TensorRT EP",
            "infer_compare.runners.onnxruntime:OnnxRuntimeTensorRTRunner",
            ("cuda",),
        ),
        RunnerInfo("openvino", "OpenVINO", "infer_compare.runners.openvino:OpenVinoRunner", ("cpu",)),
        RunnerInfo("tensorrt", "TensorRT", "infer_compare.runners.tensorrt:TensorRTRunner", ("cuda",)),
        RunnerInfo("tflite", "LiteRT / TFLite", "infer_compare.runners.tflite:TFLiteRunner", ("cpu",)),
        RunnerInfo("edgetpu", "Coral Edge TPU", "infer_compare.runners.edgetpu:EdgeTpuRunner", ("edgetpu",)),
        RunnerInfo("null", "null (harness overhead)", "infer_compare.runners.null:NullRunner", ("cpu",)),
    )
}


def get_format(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise UsageError(f"unknown format '{name}' (known: {', '.join(FORMATS)})") from None


def runner_format(runner: str) -> list[str]:
    """The formats a runner executes, in table order."""
    return [f.name for f in FORMATS.values() if runner in f.runners]


def build_chain(fmt: str, precision: str) -> list[tuple[str, str]]:
    """[(format, artifact precision), ...] from the root (pytorch) to ``fmt``."""
    chain: list[tuple[str, str]] = []
    f = get_format(fmt)
    p = f.artifact_for(precision)
    while True:
        chain.append((f.name, p))
        if f.built_from is None:
            break
        p = f.source_for(p)
        f = get_format(f.built_from)
        p = f.artifact_for(p)
    return list(reversed(chain))


def load_impl(path: str):
    """Import "module:Class" lazily."""
    import importlib

    mod, _, attr = path.partition(":")
    return getattr(importlib.import_module(mod), attr)
