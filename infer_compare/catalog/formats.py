"""THE format table: one record per format, keyed by name, never by position.

The CLI's choices, artifact building, test parametrisation and the report's rows
all read this table. Adding a format is one exporter file, one runner file and one
row here; the runners that execute a format are declared by their runtime packages
(infer_compare/backends/<runtime>/__init__.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infer_compare.base.errors import UsageError
from infer_compare.catalog import runtimes as _backends
from infer_compare.catalog.runtimes import RunnerInfo, load_impl  # noqa: F401  (re-exported)


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
    # the worst single sample's cosine; None: parity/checks.min_cosine_worst() derives it from min_cosine
    min_cosine_worst: float | None = None

    def as_dict(self) -> dict:
        return {"min_cosine": self.min_cosine, "max_rel_err": self.max_rel_err, "min_top1": self.min_top1,
                "min_cosine_worst": self.min_cosine_worst}


TOLERANCES: dict[str, Tolerance] = {
    "fp32": Tolerance(min_cosine=0.9999, max_rel_err=1e-3, min_top1=0.99),
    # TF32 matmuls/convolutions (CUDA defaults) keep ~10 mantissa bits.
    "tf32": Tolerance(min_cosine=0.999, max_rel_err=2e-2, min_top1=0.97),
    "fp16": Tolerance(min_cosine=0.999, max_rel_err=5e-2, min_top1=0.95),
    "bf16": Tolerance(min_cosine=0.99, max_rel_err=0.2, min_top1=0.90),
    "int8": Tolerance(min_cosine=0.95, max_rel_err=None, min_top1=0.90),
}

PRECISIONS = tuple(TOLERANCES)


# Names of the ONNX graph's input and output, as the ONNX exporter writes them (read by
# every runtime that consumes the ONNX file).
ONNX_INPUT_NAME, ONNX_OUTPUT_NAME = "input", "logits"

# The artifact precision of the int8 ONNX file that TensorRT builds from: symmetric int8 Q/DQ (S8S8) with full
# 8-bit weights, whatever the CPU rows' int8 file is (backends/onnxruntime/export.py).
TRT_INT8 = "int8-s8s8"

_B = "infer_compare.backends"


@dataclass(frozen=True)
class Format:
    name: str
    title: str
    suffix: str  # file suffix of the main artifact file
    built_from: str | None  # the format it is exported from
    precisions: tuple[str, ...]
    exporter: str  # "module:Class"
    # precision -> precision of the artifact it runs (OpenVINO bf16 runs the fp32 IR with a bf16 hint)
    artifact_precision: dict[str, str] = field(default_factory=dict)
    # precision -> precision of the source artifact to build from (default: fp32)
    source_precision: dict[str, str] = field(default_factory=dict)
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    description: str = ""
    # (runner, precision) -> the artifact precision that runner executes, when it differs (ONNX Runtime's
    # TensorRT EP takes the symmetric int8 file, as TensorRT does)
    runner_artifacts: dict[tuple[str, str], str] = field(default_factory=dict)
    # artifact precision -> exporter "module:Class" when it differs from ``exporter``
    exporters: dict[str, str] = field(default_factory=dict)
    # artifact precision -> (format, artifact precision) it is built from, when that is not
    # ``built_from`` (e.g. the fp16 and int8 ONNX files are built from the fp32 ONNX file)
    sources: dict[str, tuple[str, str]] = field(default_factory=dict)
    # the runner whose declared options the exporter reads (its builder options)
    options_from: str | None = None
    # why the artifact never travels in a bundle (built on the device), or ""
    device_built: str = ""
    # (format, artifact precision) to build from when ``built_from`` cannot be had but the run carries this
    # one as its root (an ONNX model: TFLite is converted from the ONNX file instead of the PyTorch model)
    root_source: tuple[str, str] | None = None

    def tolerance(self, precision: str) -> Tolerance:
        return self.tolerances.get(precision, TOLERANCES[precision])

    def artifact_for(self, precision: str, runner: str | None = None) -> str:
        """The artifact precision a row of ``precision`` runs (``runner``'s own where it has one)."""
        if runner is not None and (runner, precision) in self.runner_artifacts:
            return self.runner_artifacts[(runner, precision)]
        return self.artifact_precision.get(precision, precision)

    def source_for(self, precision: str) -> str:
        return self.source_precision.get(precision, "fp32")

    def source_of(self, artifact_precision: str) -> tuple[str, str] | None:
        """(format, artifact precision) the artifact of ``artifact_precision`` is built from; None for a
        root."""
        if artifact_precision in self.sources:
            return self.sources[artifact_precision]
        if self.built_from is None:
            return None
        src = get_format(self.built_from)
        return src.name, src.artifact_for(self.source_for(artifact_precision))

    @property
    def artifact_precisions(self) -> frozenset[str]:
        """Every artifact precision this format has: those its rows run, and its own (TRT_INT8)."""
        return frozenset({self.artifact_for(p) for p in self.precisions} | set(self.exporters)
                         | set(self.sources) | set(self.runner_artifacts.values()))

    def exporter_for(self, artifact_precision: str) -> str:
        return self.exporters.get(artifact_precision, self.exporter)

    @property
    def runners(self) -> tuple[str, ...]:
        """The runners that execute this format (declared by the runtime packages), in table order."""
        return tuple(r.name for r in RUNNERS.values() if self.name in r.formats)


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            name="pytorch",
            title="PyTorch",
            suffix=".pt",
            built_from=None,
            precisions=("fp32", "tf32", "fp16", "bf16"),
            exporter=f"{_B}.pytorch.export:PyTorchExporter",
            artifact_precision={"tf32": "fp32", "fp16": "fp32", "bf16": "fp32"},
            description="eager PyTorch on the state dict; fp32 on the CPU is the reference",
        ),
        Format(
            name="onnx",
            title="ONNX",
            suffix=".onnx",
            built_from="pytorch",
            precisions=("fp32", "tf32", "fp16", "int8"),
            exporter=f"{_B}.pytorch.export_onnx:OnnxExporter",
            artifact_precision={"tf32": "fp32"},  # tf32: the fp32 file run with TF32 math (CUDA)
            # fp16 and int8 are converted from the fp32 ONNX file with ONNX Runtime's tools
            # (docs/onnx-precision.md) int8-s8s8: the TensorRT form of the int8 file (symmetric int8
            # activations, full 8-bit weights), built whatever the CPU rows' --onnx-int8-scheme /
            # --onnx-int8-reduce-range say
            exporters={"fp16": f"{_B}.onnxruntime.export:OnnxFp16Exporter",
                       "int8": f"{_B}.onnxruntime.export:OnnxInt8Exporter",
                       TRT_INT8: f"{_B}.onnxruntime.export:OnnxInt8Exporter"},
            sources={"fp16": ("onnx", "fp32"), "int8": ("onnx", "fp32"), TRT_INT8: ("onnx", "fp32")},
            runner_artifacts={("onnxruntime-trt", "int8"): TRT_INT8},
            description="torch.onnx.export, dynamic batch axis, checked with onnx.checker; fp16 converted "
                        "(onnxruntime.transformers.float16, fp32 I/O); int8 static QDQ "
                        "(onnxruntime.quantization)",
            options_from="onnxruntime",  # the int8 calibration and scheme (backends/onnxruntime/options.py)
        ),
        Format(
            name="openvino",
            title="OpenVINO IR",
            suffix=".xml",
            built_from="onnx",
            precisions=("fp32", "bf16", "fp16", "int8"),
            exporter=f"{_B}.openvino.export:OpenVinoExporter",
            artifact_precision={"bf16": "fp32"},
            description="ov.convert_model(ONNX) + ov.save_model; int8 by NNCF post-training quantization",
        ),
        Format(
            name="tensorrt",
            title="TensorRT engine",
            suffix=".engine",
            built_from="onnx",
            precisions=("fp32", "tf32", "fp16", "int8"),
            exporter=f"{_B}.tensorrt.export:TensorRTExporter",
            # strongly typed: fp16 engines from the fp16 ONNX, int8 from the symmetric (S8S8) QDQ ONNX; fp32
            # and tf32 (TF32 builder flag cleared / set) from the fp32 ONNX, each its own engine
            source_precision={"fp16": "fp16", "int8": TRT_INT8},
            description="tensorrt.Builder + OnnxParser, strongly typed network from the precision's ONNX; "
                        "engines are tied to the GPU and TensorRT version",
            options_from="tensorrt",
            device_built="TensorRT engines are tied to the GPU and the TensorRT version: the engine is built "
                         "on the device from the bundle's ONNX",
        ),
        Format(
            name="tflite",
            title="TFLite",
            suffix=".tflite",
            built_from="pytorch",
            precisions=("fp32", "fp16", "int8"),
            exporter=f"{_B}.tflite.export:TFLiteExporter",
            root_source=("onnx", "fp32"),  # an ONNX root: onnx2torch, then the same litert-torch route
            description="litert-torch (an ONNX root through onnx2torch first), NHWC, "
                        "batch-1 file resized at load where its graph allows; int8 is full-integer",
            options_from="tflite",
        ),
        Format(
            name="edgetpu",
            title="Edge TPU TFLite",
            suffix="_edgetpu.tflite",
            built_from="tflite",
            precisions=("int8",),
            exporter=f"{_B}.tflite.edgetpu_export:EdgeTpuExporter",
            source_precision={"int8": "int8"},
            description="edgetpu_compiler on the full-integer TFLite file",
            options_from="edgetpu",
        ),
    )
}

# The runners, from the runtime packages' declarations (infer_compare/backends/*/__init__.py).
RUNNERS: dict[str, RunnerInfo] = _backends.runners()


def runner_info(name: str) -> RunnerInfo:
    try:
        return RUNNERS[name]
    except KeyError:
        raise UsageError(f"unknown runner '{name}' (known: {', '.join(RUNNERS)})") from None


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
    f = get_format(fmt)
    step: tuple[str, str] | None = (f.name, f.artifact_for(precision))
    chain: list[tuple[str, str]] = []
    while step is not None:
        if step in chain:
            raise ValueError(f"format table: a cycle through {step}")
        chain.append(step)
        step = get_format(step[0]).source_of(step[1])
    return list(reversed(chain))
