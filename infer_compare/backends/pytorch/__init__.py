"""PyTorch: the reference model, eager and torch.compile runners, the state-dict
"export" and the ONNX export (torch.onnx is PyTorch's own exporter)."""

from .. import Library, RunnerInfo, Runtime

_OPTS = "infer_compare.backends.pytorch.options"

RUNTIME = Runtime(
    name="pytorch",
    title="PyTorch",
    order=10,
    extra="torch",
    runners=(
        RunnerInfo("pytorch", "PyTorch eager", "infer_compare.backends.pytorch.run:PyTorchRunner", ("cpu", "cuda"),
                   formats=("pytorch",), options=f"{_OPTS}:EagerOptions"),
        RunnerInfo("pytorch-compile", "PyTorch torch.compile", "infer_compare.backends.pytorch.run:PyTorchCompileRunner",
                   ("cuda",), formats=("pytorch",), options=f"{_OPTS}:CompileOptions"),
    ),
    libraries=(
        Library("torch", ("torch",), "pip install 'infer-compare[torch]'  (PyTorch: see pytorch.org for the build "
                                     "for your CUDA)"),
        Library("torchvision", ("torchvision",), "pip install 'infer-compare[torch]'"),
        Library("onnx", ("onnx",), "pip install 'infer-compare[torch]'  (or: pip install onnx)"),
        Library("onnxscript", ("onnxscript",), "pip install onnxscript"),
    ),
)
