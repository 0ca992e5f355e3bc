"""PyTorch -> TFLite conversion worker: ``python -m infer_compare.backends.tflite.convert SPEC``.

Route: litert-torch (``litert_torch.convert``) on the PyTorch module wrapped with
``to_channel_last_io`` so that the file takes NHWC input, batch 1, static shape; the module's weights made
contiguous first, and a float file run once on the sample beside its module, how far off it is recorded
(convert_check.py: litert-torch's constant cache gave a layer another's weight).

- fp32: the float file as converted.
- fp16: the fp32 file with its weights cast to float16 by ai-edge-quantizer
  (FLOAT_CASTING weight-only: weights stored as fp16 and dequantized to fp32 once
  at load, i.e. the classic TFLite "float16 quantization"); compute stays fp32.
- int8: PT2E static post-training quantization on the caller's real calibration
  images, symmetric per-channel int8 weights and int8 activations. litert-torch's
  ``PT2EQuantizer`` annotates ``add``/``mul`` by source partition, which
  ``torch.export`` (torch >= 2.5) no longer records for in-place ops such as
  torchvision's ``out += identity``, so residual adds, ``mul`` and ``hardswish``
  were left in float between DEQUANTIZE/QUANTIZE. :class:`FullIntegerQuantizer`
  annotates every remaining elementwise op (add, mul, sub, relu, relu6/hardtanh,
  hardswish, hardsigmoid, sigmoid, in-place or not) with int8 input and output
  specs, which makes the converter emit a full-integer file (int8 in/out). The
  exporter checks the result and refuses a file that is not full-integer.

It runs in its own process: litert-torch imports TensorFlow and JAX, whose memory is
only returned when the process ends, and the measured peak RSS is the converter's.
Nothing here touches the network: socket connections are refused for the whole
process.

The spec (JSON): module (a ``torch.save``d nn.Module), out, precision, calibration
(.npy, N,C,H,W float32 normalised), threads (optional). The result goes to
``out + ".json"``: options applied, stage times, peak RSS.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any


def _no_network() -> None:
    def refuse(*_a: Any, **_k: Any):
        raise OSError("infer-compare: network access is disabled during TFLite conversion")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign]
    socket.create_connection = refuse  # type: ignore[assignment]


def _elementwise_targets(torch: Any) -> set:
    a = torch.ops.aten
    names = ("add.Tensor", "add_.Tensor", "mul.Tensor", "mul_.Tensor", "sub.Tensor", "sub_.Tensor",
             "relu.default", "relu_.default", "hardtanh.default", "hardtanh_.default",
             "hardswish.default", "hardswish_.default", "hardsigmoid.default", "hardsigmoid_.default",
             "sigmoid.default", "sigmoid_.default", "relu6.default")
    out = set()
    for n in names:
        op, _, overload = n.partition(".")
        packet = getattr(a, op, None)
        if packet is not None and hasattr(packet, overload):
            out.add(getattr(packet, overload))
    return out


def full_integer_quantizer(per_channel: bool = True, observer: str = "minmax"):
    """litert-torch's PT2EQuantizer plus int8 annotations for the ops it misses."""
    import torch
    from litert_torch.quantize import pt2e_quantizer_utils as qutils
    from litert_torch.quantize.pt2e_quantizer import PT2EQuantizer, get_symmetric_quantization_config

    try:
        from torchao.quantization.pt2e.quantizer import QuantizationAnnotation
    except ImportError:  # older stacks
        from torch.ao.quantization.quantizer import QuantizationAnnotation  # type: ignore[no-redef]

    targets = _elementwise_targets(torch)

    class FullIntegerQuantizer(PT2EQuantizer):
        annotated_extra = 0

        def annotate(self, model):
            model = super().annotate(model)
            cfg = self.global_config
            for node in model.graph.nodes:
                if node.op != "call_function" or node.target not in targets:
                    continue
                if "quantization_annotation" in node.meta:
                    continue
                ins = {a: qutils.get_input_act_qspec(cfg) for a in node.args if isinstance(a, torch.fx.Node)}
                node.meta["quantization_annotation"] = QuantizationAnnotation(
                    input_qspec_map=ins, output_qspec=qutils.get_output_act_qspec(cfg), _annotated=True)
                FullIntegerQuantizer.annotated_extra += 1
            return model

    cfg = get_symmetric_quantization_config(is_per_channel=per_channel)
    if observer == "minmax":
        # HistogramObserver (litert-torch's default) dominated ResNet-50's conversion time
        # (658 of 949 s); the running min/max over all calibration inputs is far cheaper.
        import dataclasses

        try:
            from torchao.quantization.pt2e.observer import MinMaxObserver
        except ImportError:
            from torch.ao.quantization.observer import MinMaxObserver  # type: ignore[no-redef]

        def minmax(spec):
            return None if spec is None else dataclasses.replace(
                spec, observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=2**-12))

        cfg = dataclasses.replace(cfg, input_activation=minmax(cfg.input_activation),
                                  output_activation=minmax(cfg.output_activation))
    return FullIntegerQuantizer().set_global(cfg)


def _load_module(spec: dict[str, Any], shapes: dict[str, tuple[int, ...]] | None = None):
    import torch

    if spec.get("onnx"):  # an ONNX root: onnx2torch's torch.fx module of the file, batch 1 (convert_onnx.py)
        # deferred: the conversion child's start stays light without it (+1 module)
        from infer_compare.backends.tflite.convert_onnx import onnx_module

        return onnx_module(spec["onnx"], shapes)
    if spec.get("rebuild"):  # models.rebuild: the model spec and its root artifact (built-in or the user's)
        # deferred: the conversion child's start stays light without it (+12 modules)
        from infer_compare.models import rebuild

        return rebuild(spec["rebuild"]["spec"], spec["rebuild"]["path"])
    if spec.get("architecture"):
        # deferred: the conversion child's start stays light without it (+12 modules)
        from infer_compare.models import build_architecture

        model = build_architecture(spec["architecture"])
        model.load_state_dict(torch.load(spec["module"], map_location="cpu"))
    else:  # the parent's own module, pickled into its private work folder
        model = torch.load(spec["module"], weights_only=False)
    return model.eval()


def layout_io(model: Any, calib: list[Any]) -> tuple[Any, tuple, list[Any], list[bool]]:
    """(the module to convert, its batch-1 sample, the calibration feeds, which inputs are NHWC): image inputs
    (4-D float, 1 or 3 channels) NHWC in the file, as TFLite and the Edge TPU expect."""
    import litert_torch
    import numpy as np
    import torch

    cl = [c.ndim == 4 and c.dtype.kind == "f" and c.shape[1] in (1, 3) for c in calib]
    feeds = [torch.from_numpy(np.ascontiguousarray(c.transpose(0, 2, 3, 1) if x else c))
             for c, x in zip(calib, cl, strict=True)]
    # static batch 1: dynamic batch fails in litert-torch 0.10 (JAX shapes)
    sample = tuple(f[:1] for f in feeds)
    idx = [i for i, x in enumerate(cl) if x]
    wrapped = litert_torch.to_channel_last_io(model, args=idx) if idx else model
    try:
        wrapped = wrapped.eval()
    except NotImplementedError:  # an ExportedProgram's module has no train/eval modes: it is inference-only
        pass
    return wrapped, sample, feeds, cl


def _float_file(edge: Any, precision: str, tmp: str, out: str, times: dict[str, float]) -> dict[str, Any]:
    """fp32, or fp16 weights (ai-edge-quantizer FLOAT_CASTING) on the fp32 file; what was applied."""
    if precision == "fp32":
        edge.export(tmp)
        return {"weights": "float32", "io": "float32"}
    t = time.perf_counter()
    f32 = out + ".fp32.tflite"
    edge.export(f32)
    from ai_edge_quantizer import algorithm_manager, quantizer

    qt = quantizer.Quantizer(f32)
    qt.add_weight_only_config(regex=".*", operation_name="*", num_bits=16,
                              algorithm_key=algorithm_manager.AlgorithmName.FLOAT_CASTING)
    res = qt.quantize(enable_progress_report=False)
    with open(tmp, "wb") as f:
        f.write(bytes(res.quantized_model))
    os.remove(f32)
    times["fp16_weights"] = time.perf_counter() - t
    return {"weights": "float16 (ai-edge-quantizer FLOAT_CASTING, dequantized at load)", "io": "float32"}


def _int8_file(wrapped, sample, feeds, observer: str, tmp: str, times: dict[str, float]) -> dict[str, Any]:
    """Full-integer int8 by PT2E static quantization, calibrated on every calibration input."""
    import litert_torch
    import torch

    try:
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    except ImportError:
        from torch.ao.quantization.quantize_pt2e import convert_pt2e, prepare_pt2e  # type: ignore[no-redef]
    from litert_torch.quantize.quant_config import QuantConfig

    t = time.perf_counter()
    quantizer_ = full_integer_quantizer(observer=observer)
    prepared = prepare_pt2e(torch.export.export(wrapped, sample).module(), quantizer_)
    times["prepare"] = time.perf_counter() - t
    t = time.perf_counter()
    with torch.no_grad():
        for i in range(len(feeds[0])):
            prepared(*(x[i:i + 1] for x in feeds))
    times["calibrate"] = time.perf_counter() - t
    t = time.perf_counter()
    converted = convert_pt2e(prepared, fold_quantize=False)
    litert_torch.convert(converted, sample, quant_config=QuantConfig(pt2e_quantizer=quantizer_)).export(tmp)
    times["convert"] = time.perf_counter() - t
    return {"weights": "int8 symmetric per-channel", "activations": "int8 per-tensor", "io": "int8",
            "quantizer": "PT2E (litert-torch PT2EQuantizer + full-integer elementwise annotations)",
            "extra_annotated_ops": type(quantizer_).annotated_extra, "activation_observer": observer,
            "calibration_inputs": int(len(feeds[0]))}


def _name_the_node(error: Exception, model: Any, spec: dict[str, Any]) -> None:
    """Raise UnsupportedModel naming the ONNX node (and op) the trace stopped at, where the error names one;
    return otherwise (the caller re-raises the error as it is)."""
    if not spec.get("onnx"):
        return
    # deferred: the conversion child's start stays light without it (+2 modules)
    from infer_compare.backends.tflite.convert_constants import stopped_at
    from infer_compare.backends.tflite.convert_onnx import UnsupportedModel

    node = stopped_at(error, model)
    if node:
        first = (str(error).strip().splitlines() or [""])[0][:160]
        raise UnsupportedModel(f"torch.export stopped at ONNX node {node}: "
                               f"{type(error).__name__}: {first}") from None


def convert(spec: dict[str, Any]) -> dict[str, Any]:
    # deferred: the conversion child's start stays light without it (+1 module)
    from infer_compare.backends.tflite.convert_onnx import io_map, load_inputs

    times: dict[str, float] = {}
    t = time.perf_counter()
    import litert_torch
    import torch

    times["imports"] = time.perf_counter() - t
    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    precision, out = spec["precision"], spec["out"]
    names, calib = load_inputs(spec)
    model = _load_module(spec, {n: (1, *c.shape[1:]) for n, c in zip(names, calib, strict=True)})
    # litert-torch needs torch.export: convert TorchScript first
    if isinstance(model, torch.jit.ScriptModule):
        from torch._export.converter import TS2EPConverter

        model = TS2EPConverter(model, tuple(torch.from_numpy(c[:1]) for c in calib)).convert().module()
    # deferred: the conversion child's start stays light without it (+1 module)
    from infer_compare.backends.tflite.convert_check import checked, contiguous_constants

    made_contiguous = contiguous_constants(model)  # litert-torch's constant cache (convert_check.py)
    wrapped, sample, feeds, channel_last = layout_io(model, calib)
    applied: dict[str, Any] = {"route": "onnx2torch + litert-torch" if spec.get("onnx") else "litert-torch",
                               "batch": 1,
                               "litert_torch": getattr(litert_torch, "__version__", None),
                               "torch": torch.__version__}
    if getattr(model, "folded_constant_inputs", None):
        applied["constant_inputs_folded"] = model.folded_constant_inputs
    if made_contiguous:
        applied["constants_made_contiguous"] = made_contiguous
    tmp = out + ".part"
    try:
        if precision in ("fp32", "fp16"):
            t = time.perf_counter()
            with torch.inference_mode():
                edge = litert_torch.convert(wrapped, sample)
            times["convert"] = time.perf_counter() - t
            applied.update(checked(edge, wrapped, sample))  # the file beside its module (convert_check.py)
            applied.update(_float_file(edge, precision, tmp, out, times))
        elif precision == "int8":
            applied.update(_int8_file(wrapped, sample, feeds, spec.get("observer") or "minmax", tmp, times))
        else:
            raise ValueError(f"TFLite precisions are fp32, fp16 and int8, not {precision}")
    except Exception as e:
        _name_the_node(e, model, spec)
        raise
    applied["layout"] = "NHWC" if any(channel_last) else "as given"
    applied["io_map"] = io_map(wrapped, sample, tmp, names, spec.get("output_names") or [], channel_last)
    os.replace(tmp, out)
    return {"ok": True, "options": applied, "times_s": {k: round(v, 2) for k, v in times.items()}}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as f:
        spec = json.load(f)
    _no_network()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    t0 = time.perf_counter()
    try:
        res = convert(spec)
    except Exception as e:  # the parent reads the one line: which op or feature stopped the converter
        # deferred: the conversion child's start stays light without it (+1 module)
        from infer_compare.backends.tflite.convert_onnx import UnsupportedModel

        line = (str(e).strip().splitlines() or [""])[0][:300]
        err = line if isinstance(e, UnsupportedModel) else f"{type(e).__name__}: {line}"
        with open(spec["out"] + ".json", "w") as f:
            json.dump({"ok": False, "error": err}, f)
        sys.stdout.flush()
        os._exit(3)
    res["wall_s"] = round(time.perf_counter() - t0, 2)
    import resource

    res["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    with open(spec["out"] + ".json", "w") as f:
        json.dump(res, f)
    sys.stdout.flush()
    os._exit(0)  # TensorFlow/JAX teardown is slow and sometimes noisy


if __name__ == "__main__":
    main()
