"""Options of the TFLite and Edge TPU runners and of their exporters (litert-torch
conversion, edgetpu_compiler)."""

from __future__ import annotations

from dataclasses import dataclass

from infer_compare.catalog.options import Options, option


@dataclass(frozen=True)
class TFLiteOptions(Options):
    interpreter: str = option("", "TFLite interpreter package (default: ai_edge_litert, else tflite_runtime)",
                              choices=("", "ai_edge_litert", "tflite_runtime"))
    int8_observer: str = option("minmax", "activation observer of the full-integer int8 conversion",
                                choices=("minmax", "histogram"), builds=True)
    int8: bool = option(False, "build full-integer int8 TFLite also for models over 10 M parameters (slow)",
                        flag="--tflite-int8", builds=True)
    convert_timeout_s: float = option(1800.0, "time limit of one litert-torch conversion (seconds)",
                                      minimum=1, builds=True)


@dataclass(frozen=True)
class EdgeTpuOptions(Options):
    use_pycoral: bool = option(True, "Edge TPU rows load the delegate with LiteRT, not pycoral",
                               flag="--edgetpu-no-pycoral")
    compiler_timeout_s: float = option(600.0, "time limit of edgetpu_compiler (seconds)", minimum=1)
