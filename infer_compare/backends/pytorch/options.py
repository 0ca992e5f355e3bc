"""Options of the PyTorch runners (CUDA rows; the CPU reference row has none that matter)."""

from __future__ import annotations

from dataclasses import dataclass

from infer_compare.catalog.options import Options, option

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class EagerOptions(Options):
    cuda_graphs: bool = option(False, "PyTorch rows replay a captured CUDA graph; pytorch-compile uses mode "
                                      "reduce-overhead", flag="--cuda-graphs")
    channels_last: bool = option(True, "PyTorch CUDA rows keep NCHW (default: channels_last)",
                                 flag="--no-channels-last")
    cudnn_benchmark: bool = option(True, "PyTorch CUDA rows leave torch.backends.cudnn.benchmark off",
                                   flag="--no-cudnn-benchmark")


@dataclass(frozen=True)
class CompileOptions(EagerOptions):
    compile_mode: str = option("", "torch.compile mode for the pytorch-compile rows (default: default, or "
                                   "reduce-overhead with --cuda-graphs; max-autotune takes "
                                   "many minutes per shape)",
                               flag="--compile-mode", choices=("",) + COMPILE_MODES)
