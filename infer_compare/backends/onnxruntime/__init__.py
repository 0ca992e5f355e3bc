"""ONNX Runtime: the CPU and CUDA execution providers, and the TensorRT EP."""

from infer_compare.catalog.runtimes import Library, RunnerInfo, Runtime

RUNTIME = Runtime(
    name="onnxruntime",
    title="ONNX Runtime",
    order=20,
    extra="onnxruntime",
    runners=(
        RunnerInfo("onnxruntime", "ONNX Runtime", "infer_compare.backends.onnxruntime.run:OnnxRuntimeRunner",
                   ("cpu", "cuda"), formats=("onnx",),
                   options="infer_compare.backends.onnxruntime.options:OrtOptions"),
        RunnerInfo("onnxruntime-trt", "ONNX Runtime TensorRT EP",
                   "infer_compare.backends.onnxruntime.run_trt:OnnxRuntimeTensorRTRunner",
                   ("cuda",), formats=("onnx",),
                   options="infer_compare.backends.onnxruntime.options:OrtTensorRTOptions"),
    ),
    libraries=(
        Library("onnxruntime", ("onnxruntime", "onnxruntime-gpu",
                                "onnxruntime-openvino", "onnxruntime-directml"),
                "pip install 'infer-compare[onnxruntime]'  (GPU: pip install onnxruntime-gpu)"),
    ),
)
