"""TensorRT: engines built from ONNX with tensorrt.Builder, run with the tensor API."""

from .. import Library, RunnerInfo, Runtime

RUNTIME = Runtime(
    name="tensorrt",
    title="TensorRT",
    order=40,
    extra="tensorrt",
    runners=(
        RunnerInfo("tensorrt", "TensorRT", "infer_compare.backends.tensorrt.run:TensorRTRunner", ("cuda",),
                   formats=("tensorrt",), options="infer_compare.backends.tensorrt.options:TensorRTOptions"),
    ),
    libraries=(
        Library("tensorrt", ("tensorrt", "tensorrt-cu13", "tensorrt-cu12", "tensorrt_libs"),
                "pip install tensorrt (x86-64 with CUDA), or on a Jetson use JetPack's python3-libnvinfer"),
    ),
)
