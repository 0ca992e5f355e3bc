"""TensorRT (10.x and 11.x): strongly typed engines built from the precision's ONNX file
with tensorrt.Builder, run with the tensor API on memory and a stream from cuda-python.

TensorRT itself has never run on the machines this code was written on (docs/gpu.md)."""

from infer_compare.catalog.runtimes import Library, RunnerInfo, Runtime

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
                "pip install tensorrt (>= 10; x86-64 with CUDA), or on a Jetson use JetPack 6's "
                "python3-libnvinfer (a venv with --system-site-packages); the runner also needs cuda-python: "
                "pip install 'cuda-python>=12,<13' on JetPack 6"),
        Library("cuda.bindings", ("cuda-bindings", "cuda-python"),
                "pip install cuda-python  (cuda.bindings; the CUDA major of the driver: 12.x for CUDA 12 / "
                "JetPack 6, 13.x for CUDA 13)"),
    ),
)
