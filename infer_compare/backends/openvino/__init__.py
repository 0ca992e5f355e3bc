"""OpenVINO: IR export from ONNX (fp32, fp16-compressed, NNCF int8) and the CPU runner,
which also runs the ONNX int8 (QDQ) file as a second int8 route."""

from infer_compare.catalog.runtimes import Library, RunnerInfo, Runtime

RUNTIME = Runtime(
    name="openvino",
    title="OpenVINO",
    order=30,
    extra="openvino",
    runners=(
        RunnerInfo("openvino", "OpenVINO", "infer_compare.backends.openvino.run:OpenVinoRunner", ("cpu",),
                   formats=("openvino", "onnx"),
                   options="infer_compare.backends.openvino.options:OpenVinoOptions"),
    ),
    libraries=(
        Library("openvino", ("openvino",), "pip install 'infer-compare[openvino]'"),
        Library("nncf", ("nncf",),
                "pip install 'infer-compare[openvino]'  (nncf brings OpenVINO int8 quantization)"),
    ),
)
