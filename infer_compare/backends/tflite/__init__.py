"""LiteRT / TFLite: export from PyTorch with litert-torch, the LiteRT interpreter, and
the Coral Edge TPU (a LiteRT delegate plus edgetpu_compiler), which shares the
interpreter and the file inspection with the TFLite runner."""

from infer_compare.catalog.runtimes import Library, RunnerInfo, Runtime

_OPTS = "infer_compare.backends.tflite.options"

RUNTIME = Runtime(
    name="tflite",
    title="LiteRT / TFLite and Edge TPU",
    order=50,
    extra="tflite",
    runners=(
        RunnerInfo("tflite", "LiteRT / TFLite", "infer_compare.backends.tflite.run:TFLiteRunner", ("cpu",),
                   formats=("tflite",), options=f"{_OPTS}:TFLiteOptions"),
        RunnerInfo("edgetpu", "Coral Edge TPU", "infer_compare.backends.tflite.edgetpu_run:EdgeTpuRunner",
                   ("edgetpu",), formats=("edgetpu",), options=f"{_OPTS}:EdgeTpuOptions"),
    ),
    libraries=(
        Library("ai_edge_litert", ("ai-edge-litert",),
                "pip install 'infer-compare[tflite]'  (ai-edge-litert)"),
        Library("tflite_runtime", ("tflite-runtime",), "pip install tflite-runtime  (needs numpy<2)"),
        Library("litert_torch", ("litert-torch",),
                "pip install 'infer-compare[tflite-export]'  (litert-torch)", record_version=False),
        Library("pycoral", ("pycoral",), "install pycoral and libedgetpu from Coral's package repository "
                                         "(coral.ai/software)"),
    ),
)
