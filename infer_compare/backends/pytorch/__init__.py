"""PyTorch: the reference model, eager and torch.compile runners, the state-dict
"export" and the ONNX export (torch.onnx is PyTorch's own exporter)."""

from infer_compare.catalog.runtimes import Library, RunnerInfo, Runtime

_OPTS = "infer_compare.backends.pytorch.options"
# imported once by a fork server, not by each configuration's process (4-10 s each on the H100 machine);
# nothing here may initialise CUDA (the server checks: a forked child could not use it). Inductor's import
# asks torch.cuda.is_available(), which the server answers from NVML (measured on the H100 machine, torch
# 2.11: CUDA driver and torch both uninitialised after it); it saves 1-3 s per torch.compile configuration
_PRELOAD = ("torch", "?torchvision", "infer_compare.backends.pytorch.run", "infer_compare.measure.child",
            "infer_compare.measure.bench")

RUNTIME = Runtime(
    name="pytorch",
    title="PyTorch",
    order=10,
    extra="torch",
    runners=(
        RunnerInfo("pytorch", "PyTorch eager", "infer_compare.backends.pytorch.run:PyTorchRunner",
                   ("cpu", "cuda"), formats=("pytorch",), options=f"{_OPTS}:EagerOptions", preload=_PRELOAD),
        RunnerInfo("pytorch-compile", "PyTorch torch.compile",
                   "infer_compare.backends.pytorch.run:PyTorchCompileRunner",
                   ("cuda",), formats=("pytorch",), options=f"{_OPTS}:CompileOptions",
                   preload=(*_PRELOAD, "?torch._inductor.compile_fx"), traced_loads=2),
    ),
    libraries=(
        Library("torch", ("torch",),
                "pip install 'infer-compare[torch]'  (PyTorch: see pytorch.org for the build for your CUDA; "
                "on a Jetson, NVIDIA's PyTorch wheel for its JetPack)"),
        Library("torchvision", ("torchvision",), "pip install 'infer-compare[torch]'"),
        Library("onnx", ("onnx",), "pip install 'infer-compare[torch]'  (or: pip install onnx)"),
        Library("onnxscript", ("onnxscript",), "pip install onnxscript"),
    ),
)
