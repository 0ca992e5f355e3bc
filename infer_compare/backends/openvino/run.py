"""OpenVINO on the CPU, with the execution precision stated truthfully.

On CPUs with AMX or AVX-512 BF16, OpenVINO silently runs bf16 unless
INFERENCE_PRECISION_HINT is set. Every row here sets the hint for its precision and
records what the compiled model reports: fp32 (hint f32), bf16 (hint bf16, only where
the CPU lists BF16), fp16 (fp16-compressed IR, hint f16 where the CPU lists FP16),
int8 (NNCF IR; its non-quantized ops run at the CPU's default, recorded).

A second int8 route: the same runner executes the ONNX int8 (QDQ) file directly
(format ``onnx``, precision ``int8``; OpenVINO's ONNX frontend turns the Q/DQ pairs into
its FakeQuantize). The other ONNX precisions are not OpenVINO rows (its own IR rows
cover them). For both int8 routes the row says how many of the compiled model's layers
run in int8, read from the runtime model (each layer's ``runtimePrecision``).

Throughput scenario (run_throughput.py): as ``benchmark_app -hint throughput`` does, a
second compiled model with PERFORMANCE_HINT THROUGHPUT (same IR, shape, precision hint
and threads) and an AsyncInferQueue of its OPTIMAL_NUMBER_OF_INFER_REQUESTS requests.

Latency scenario against ``benchmark_app -hint latency`` (docs/openvino.md has the whole list):

* the timed call is ``InferRequest.infer(share_outputs=True)`` on one request whose input
  tensor was set once (shared memory), as benchmark_app's loop calls ``infer()`` on a request
  filled once. ``infer()``'s default copies every output into fresh arrays on each call; the
  tool no longer times that copy (to_numpy() reads the request's buffer after the clock);
* the row's p50 is the wall clock of each call seen from Python (pybind, the GIL and the loop
  in it: what a Python program gets); benchmark_app's Median is ``InferRequest.latency``,
  OpenVINO's own clock around the C++ call. The row also carries that own latency of the same
  calls (``openvino_ms_p50``..., warm-up calls in, the cold call out), the like-for-like figure;
* properties: both set PERFORMANCE_HINT and INFERENCE_PRECISION_HINT; the tool also sets
  INFERENCE_NUM_THREADS (the cell's thread budget, as for every runtime), benchmark_app leaves
  threads and streams to OpenVINO (and sets PERF_COUNT NO, the default). Neither sets
  CPU_DENORMALS_OPTIMIZATION: both run the same image, so the same denormals.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from infer_compare.backends.openvino.export import frontend_failure
from infer_compare.backends.openvino.options import OpenVinoOptions
from infer_compare.backends.openvino.run_multi import ports, reshape_inputs, set_all
from infer_compare.backends.openvino.run_throughput import async_queue_throughput
from infer_compare.backends.runner import Runner
from infer_compare.base.batches import Batch
from infer_compare.base.errors import RunnerError
from infer_compare.base.records import Availability
from infer_compare.catalog import deps
from infer_compare.host.gpu import summarize_ms

HINTS = {"fp32": "f32", "bf16": "bf16", "fp16": "f16"}
CAPS = {"bf16": "BF16", "fp16": "FP16", "int8": "INT8"}
NAMES = {"f32": "fp32", "bf16": "bf16", "f16": "fp16", "float32": "fp32", "bfloat16": "bf16",
         "float16": "fp16"}


def _cpu_caps() -> tuple[list[str], str]:
    import openvino as ov

    core = ov.Core()
    return (list(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")),
            str(core.get_property("CPU", "FULL_DEVICE_NAME")))


def _type_name(t: Any) -> str:
    s = str(t)
    s = s.split("'")[1] if "'" in s else s
    return NAMES.get(s.lower(), s.lower())


# oneDNN's ISA tokens in a layer's primitiveType ("brgconv_avx512_core_amx_I8", "jit_avx2_I8"), most specific
# first
_ISA_TOKENS = (("amx", "AMX"), ("avx512_core_vnni", "AVX-512 VNNI"), ("avx2_vnni", "AVX-VNNI"),
               ("avx512", "AVX-512 (no VNNI)"), ("avx2", "AVX2 (no VNNI)"), ("sse41", "SSE4.1"),
               ("ref", "reference"))


def int8_kernel_isa(primitives: Counter | dict) -> str:
    """The instruction set of the int8 kernels oneDNN chose, from their primitiveType names ("" when none
    says)."""
    found = [name for tok, name in _ISA_TOKENS if any(tok in p.lower() for p in primitives)]
    return found[0] if found else ""


def runtime_layers(compiled: Any, primitives: Counter | None = None) -> dict[str, Counter]:
    """Layers of the compiled model by the precision they run in ("int8" for i8/u8) and type,
    leaving out inputs, outputs and constant subgraphs (weights, scales). ``primitives``, when
    given, counts the kernels (``primitiveType``) of the int8 layers."""
    out: dict[str, Counter] = {}
    const: set[str] = set()
    for op in compiled.get_runtime_model().get_ordered_ops():
        rt = op.get_rt_info()
        kind = rt["layerType"].astype(str) if "layerType" in rt else op.get_type_name()
        srcs = [i.get_source_output().get_node().get_friendly_name() for i in op.inputs()]
        if kind == "Const" or (srcs and all(s in const for s in srcs)):
            const.add(op.get_friendly_name())
            continue
        if kind in ("Input", "Output", "Parameter", "Result"):
            continue
        p = rt["runtimePrecision"].astype(str).lower() if "runtimePrecision" in rt else "unknown"
        p = "int8" if p in ("i8", "u8") else NAMES.get(p, p)
        out.setdefault(p, Counter())[kind] += 1
        if p == "int8" and primitives is not None and "primitiveType" in rt:
            primitives[rt["primitiveType"].astype(str)] += 1
    return out


# the layers that do a model's arithmetic (runtime model layer types): what "runs in int8" means
COMPUTE_LAYERS = frozenset({"Convolution", "GroupConvolution", "Deconvolution", "FullyConnected", "MatMul",
                            "RNNSeq", "RNNCell"})


def _fmt(c: Counter | dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))) or "none"


class OpenVinoRunner(Runner):
    name = "openvino"

    @classmethod
    def probe(cls, device: str = "cpu") -> Availability:
        if not deps.has("openvino"):
            return Availability(False, "OpenVINO is not installed", deps.hint("openvino"))
        try:
            caps, name = _cpu_caps()
        except Exception as e:
            return Availability(False, f"OpenVINO cannot open the CPU device: {e}", deps.hint("openvino"),
                                version=deps.version("openvino"))
        return Availability(True, version=deps.version("openvino"), devices=("cpu",),
                            details={"cpu": name, "capabilities": caps})

    @classmethod
    def supports(cls, fmt: str, precision: str, device: str) -> Availability:
        if fmt == "onnx" and precision != "int8":
            return Availability(False, "OpenVINO runs only the int8 (QDQ) ONNX file, as a second int8 route; "
                                       "its float rows run its own IR (format openvino)")
        need = CAPS.get(precision)
        if need:
            try:
                caps, name = _cpu_caps()
            except Exception as e:
                return Availability(False, f"OpenVINO cannot open the CPU device: {e}")
            if need not in caps:
                return Availability(False, f"this CPU ({name}) has no {need} support in OpenVINO "
                                           f"(capabilities: {', '.join(caps)})")
        return Availability(True)

    def compile_config(self, hint: str) -> dict[str, Any]:
        """The properties this runner compiles with under ``hint`` (benchmarks/harness.py hands the same to
        benchmark_app's -load_config, to tell the configuration's effect from the rest)."""
        cfg: dict[str, Any] = {"PERFORMANCE_HINT": hint}
        if self.options.threads:
            cfg["INFERENCE_NUM_THREADS"] = int(self.options.threads)
        if self.options.precision in HINTS:
            cfg["INFERENCE_PRECISION_HINT"] = HINTS[self.options.precision]
        return cfg

    def _compile(self, hint: str) -> tuple[Any, Any, list[int] | None]:
        """(compiled model, input partial shape, static shape it was reshaped to) with ``hint``."""
        import openvino as ov

        core = ov.Core()
        cfg = self.compile_config(hint)
        try:
            model = core.read_model(self.artifact)
        except Exception as e:
            why = frontend_failure(e)
            if why is None:
                raise
            raise RunnerError(why) from None
        ps = model.inputs[0].partial_shape
        static: Any = None
        if len(model.inputs) > 1:  # several inputs: each dynamic batch set to the cell's (run_multi.py)
            static = reshape_inputs(model, int(self.options.batch_size))
        elif ps.rank.is_static and ps.is_dynamic and all(d.is_static for d in list(ps)[1:]):
            # Each cell runs one batch size: compile for that static shape, as a deployment would
            # (and as benchmark_app -shape does); OpenVINO's CPU plugin is faster on static shapes.
            static = [int(self.options.batch_size)] + [d.get_length() for d in list(ps)[1:]]
            model.reshape(static)
        return core.compile_model(model, "CPU", cfg), ps, static

    def load(self) -> None:
        import openvino as ov

        prec = self.options.precision
        self.compiled, ps, static = self._compile(self.options.runner_as(OpenVinoOptions).performance_hint)
        self.request = self.compiled.create_infer_request()
        self._multi = len(self.compiled.inputs) > 1 or len(self.compiled.outputs) > 1
        if self._multi:  # every input and output by name (run_multi.py)
            self._in_ports, self._out_names = ports(self.compiled)
        executed = _type_name(self.compiled.get_property("INFERENCE_PRECISION_HINT"))
        self.exec_precision = f"int8+{executed}" if prec == "int8" else executed
        self._extra: dict[str, Any] = {}
        self._own_ms: list[float] = []
        self.settings = {
            "device": "CPU",
            "PERFORMANCE_HINT": str(self.compiled.get_property("PERFORMANCE_HINT")),
            "NUM_STREAMS": int(self.compiled.get_property("NUM_STREAMS")),
            "INFERENCE_NUM_THREADS": int(self.compiled.get_property("INFERENCE_NUM_THREADS")),
            "INFERENCE_PRECISION_HINT": executed,
            "api": "sync InferRequest.infer(share_outputs=True), shared input tensor",
            "ENABLE_CPU_PINNING": bool(self.compiled.get_property("ENABLE_CPU_PINNING")),
            "input_shape": str(static) + " (reshaped from dynamic batch)" if static else str(ps),
        }
        if prec == "int8":
            self._describe_int8(executed)
        else:
            self._describe_float(executed)
        self._ov = ov
        self._version = ov.get_version()

    def _describe_float(self, executed: str) -> None:
        """A float row whose compiled model computes in int8 anyway (a file quantized before it came here,
        whose integer convolutions OpenVINO keeps): the row says what executed. Only compute layers count: u8
        is also the precision of boolean masks (NonZero in a detector's post-processing) and of the
        conversions that a dynamic-quantization op becomes when OpenVINO computes the convolutions in
        float."""
        try:
            layers = runtime_layers(self.compiled, Counter())
        except Exception:  # informative only; the int8 rows inspect (and say so) themselves
            return
        int8 = layers.get("int8", {})
        compute = {k: v for k, v in int8.items() if k in COMPUTE_LAYERS}
        total = sum(v for c in layers.values() for k, v in c.items() if k in COMPUTE_LAYERS)
        if compute:
            self.exec_precision = (f"int8+{executed}: {sum(compute.values())} of {total} compute layers int8 "
                                   "(quantized in the file itself)")
            self.notes.append(f"the {self.options.precision} row runs int8 layers: {_fmt(compute)} (the file "
                              "was quantized before it came here; OpenVINO keeps its integer ops)")
        elif int8.get("Convert"):
            done = {k: v for c in layers.values() for k, v in c.items() if k in COMPUTE_LAYERS}
            self.notes.append(f"the file's integer ops run as u8 conversions (Convert x{int8['Convert']}); "
                              f"OpenVINO computes {_fmt(done)} in {executed}")

    def _describe_int8(self, executed: str) -> None:
        qdq = self.options.format == "onnx"
        if qdq:
            self.notes.append("OpenVINO on the QDQ ONNX (second int8 route; NNCF is the openvino/int8 row)")
        prims: Counter = Counter()
        try:
            layers = runtime_layers(self.compiled, prims)
        except Exception as e:  # the runtime model is informative only
            self.notes.append(f"executed layers not inspected ({type(e).__name__}: {e})")
            return
        n8, total = sum(layers.get("int8", {}).values()), sum(sum(c.values()) for c in layers.values())
        isa = int8_kernel_isa(prims)
        self.exec_precision = f"int8+{executed}: {n8} of {total} layers int8" + (f" ({isa})" if isa else "")
        self._extra["executed_layers"] = {k: dict(v) for k, v in layers.items()}
        self._extra["int8_kernels"] = dict(prims)
        self.settings["int8"] = {"kernels_isa": isa or "not named by OpenVINO", "kernels": _fmt(prims),
                                 "unquantized_ops_precision": executed}
        self.notes.append("int8 kernels chosen by OpenVINO's CPU plugin "
                          f"(oneDNN primitiveType): {_fmt(prims)}"
                          + (f"; instruction set {isa}" if isa else ""))
        rest = "; ".join(f"{k}: {_fmt(v)}" for k, v in layers.items() if k != "int8") or "none"
        who = "the QDQ file left in float" if qdq else "NNCF left unquantized"
        self.notes.append(f"compiled model: int8 layers {_fmt(layers.get('int8', {}))}; other layers ({who}, "
                          f"and layout/precision conversions) {rest}")

    def extra_metrics(self) -> dict[str, Any]:
        """The int8 layer census, and OpenVINO's own latency of the calls since prepare() (the first, cold,
        one left out; warm-up calls included, as for the CUDA runners' device times)."""
        out = dict(getattr(self, "_extra", {}))
        own = list(getattr(self, "_own_ms", ()))[1:]
        if own:
            out.update({f"openvino_ms_{k}": round(v, 4) for k, v in summarize_ms(own).items()})
            out["openvino_calls"] = len(own)
            out["openvino_calls_note"] = ("InferRequest.latency (OpenVINO's own, what benchmark_app's Median "
                                          "is made of) of every call after the first, warm-up calls included")
        return out

    def prepare(self, batch: Batch) -> Any:
        self._own_ms = []  # InferRequest.latency of each run() from here on
        return self.set_inputs(self.request, batch)

    def set_inputs(self, request: Any, batch: Batch, copy: bool = False) -> Any:
        """``batch`` as ``request``'s input tensors (shared memory; a copy of it with ``copy``); the buffers,
        which the caller keeps alive while the request uses them."""
        if self._multi:
            return set_all(self._ov, self._in_ports, request, batch, copy)
        x = np.ascontiguousarray(batch, dtype=np.float32)
        x = x.copy() if copy else x
        request.set_input_tensor(self._ov.Tensor(x, shared_memory=True))
        return x

    def run(self, prepared: Any) -> Any:
        # Synchronous on the CPU: when infer() returns, the outputs are in the request's host buffer.
        # share_outputs=True: infer() hands back views of that buffer; by default it copies every output into
        # fresh arrays on each call (22 MB for a 21x520x520 output: 1.66 ms wall against OpenVINO's own 0.74
        # ms on the 2-core machine), a copy benchmark_app's latency leaves out and that a deployment reading
        # the request's outputs does not make. to_numpy() copies them outside the timed region. OpenVINO's own
        # latency of the call is kept, as benchmark_app's loop keeps it (one property read and append).
        r = self.request
        r.infer(share_outputs=True)
        self._own_ms.append(r.latency)
        return r

    def to_numpy(self, outputs: Any) -> Batch:
        """The outputs of ``outputs`` (an infer request): one array, or {name: array} for several."""
        if self._multi:
            return {n: np.array(outputs.get_output_tensor(i).data, dtype=np.float32, copy=True)
                    for i, n in enumerate(self._out_names)}
        return np.array(outputs.get_output_tensor(0).data, dtype=np.float32, copy=True)

    def library_versions(self) -> dict[str, str]:
        return {"openvino": self._version}

    def throughput(self, batch: np.ndarray, settings: Any) -> Any:
        return async_queue_throughput(self, batch, settings)
