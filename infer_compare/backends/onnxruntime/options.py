"""Options of the ONNX Runtime runners.

The int8 options describe the ONNX int8 (QDQ) artifact: the ``onnx`` format reads the
``onnxruntime`` runner's options (``Format.options_from``), so they are part of that
artifact's cache key, and every runtime that consumes the QDQ file (ONNX Runtime,
OpenVINO, TensorRT) gets the file they describe.
"""

from __future__ import annotations

from dataclasses import dataclass

from infer_compare.catalog.options import Options, option

CONV_SEARCH = ("EXHAUSTIVE", "HEURISTIC", "DEFAULT")
CALIBRATION = ("MinMax", "Entropy", "Percentile")
# U8S8: uint8 activations (asymmetric), int8 weights: ONNX Runtime's choice for x86-64 CPUs, where its QDQ
#       fusions cover Conv, Add, Gemm... S8S8: int8 activations with zero point 0 (symmetric): what TensorRT
#       accepts (it takes only signed, zero-point-0 Q/DQ).
INT8_SCHEMES = ("U8S8", "S8S8")
# reduce_range: 7-bit weights, so that x86 CPUs without VNNI cannot saturate their int16 pair sums
# (host/cpu_int8.py);   auto = on for U8S8 files built on such a CPU, off elsewhere.
REDUCE_RANGE = ("auto", "on", "off")


@dataclass(frozen=True)
class OrtSessionOptions(Options):
    """What every ONNX Runtime session here shares (the TensorRT EP falls back to the CUDA EP)."""

    io_binding: bool = option(True, "alias of --io host (kept for old command lines): host copies inside "
                                    "each timed call, for every GPU row", flag="--ort-no-io-binding")
    cudnn_conv_algo_search: str = option("EXHAUSTIVE", "cuDNN convolution algorithm search of the CUDA EP",
                                         choices=CONV_SEARCH)


@dataclass(frozen=True)
class OrtOptions(OrtSessionOptions):
    int8_calibration: str = option("MinMax", "calibration of the ONNX int8 (QDQ) file on "
                                             "the calibration images",
                                   flag="--onnx-int8-calibration", choices=CALIBRATION, builds=True)
    int8_scheme: str = option("U8S8", "ONNX int8 (QDQ) types: U8S8 = uint8 activations, "
                                      "int8 per-channel weights (x86 CPUs); "
                                      "S8S8 = int8 activations with zero point 0 (TensorRT)",
                              flag="--onnx-int8-scheme", choices=INT8_SCHEMES, builds=True)
    int8_reduce_range: str = option("auto", "7-bit weights in the ONNX int8 file (ONNX Runtime's "
                                            "reduce_range): auto = on for U8S8 on x86 CPUs without VNNI "
                                            "(whose kernels can saturate), off elsewhere",
                                    flag="--onnx-int8-reduce-range", choices=REDUCE_RANGE, builds=True)
    int8_exclude: str = option("", "nodes left unquantized (in float) in the ONNX int8 file, comma-separated "
                                   "node names or op types (e.g. p2o.Clip.0 or Clip: "
                                   "onnxruntime.quantization's nodes_to_exclude); "
                                   "a failed int8 row names the node to leave out",
                               flag="--onnx-int8-exclude", builds=True)
    fp16_keep_fp32: str = option("", "op types kept in fp32 in the ONNX fp16 file, comma-separated "
                                     "(e.g. Exp,ReduceSum: the float16 converter's op_block_list, added to "
                                     "its defaults); a failed fp16 row names the op to keep",
                                 flag="--onnx-fp16-keep-fp32", builds=True)


@dataclass(frozen=True)
class OrtTensorRTOptions(OrtSessionOptions):
    workspace_mib: int = option(4096, "TensorRT builder workspace in MiB "
                                      "(TensorRT engines and the ORT TensorRT EP)",
                                flag="--tensorrt-workspace", minimum=1)
