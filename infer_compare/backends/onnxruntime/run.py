"""ONNX Runtime: the CPU execution provider, the CUDA EP and the TensorRT EP.

CPU: threads set through SessionOptions; numpy in, numpy out.
  fp32  the fp32 ONNX file.
  int8  the QDQ file (docs/onnx-precision.md). What executes is read from the session
        itself: the optimized graph is saved (SessionOptions.optimized_model_filepath)
        and its nodes are classified (graph.py): integer kernels (QLinearConv, QGemm,
        QLinearAdd, MatMulInteger...), Q/DQ boundaries, and nodes left in float. The row
        says "int8 (N of M nodes integer)"; the counts per op type are in its extra.
  fp16  the converted fp16 file (fp32 input/output). The CPU provider has fp16 kernels
        for few ops on x86: it inserts Casts and runs the rest in fp32. The row states
        what the optimized graph computes in ("fp32" when no node is left in fp16).

CUDA (``onnxruntime-gpu``; runner ``onnxruntime`` on ``cuda:N``):
  fp32  the fp32 ONNX with the CUDA EP option ``use_tf32=0`` (strict float32);
  tf32  the fp32 ONNX with ``use_tf32=1`` (the CUDA EP's own default);
  fp16  the fp16 ONNX (converted from the fp32 file, float32 in and out; a file with
        float16 input is fed float16).
  The GPU timing policy (``--io``, every CUDA runner alike): ``device`` (default) binds
  the input, copied to a GPU OrtValue before timing, and the output, a GPU OrtValue
  allocated before timing *without running the session*, so the timed call is
  ``run_with_iobinding`` alone and the first timed call is the session's first run
  (cold). ``host``: each timed call takes a numpy array and returns one, so it includes
  the host->device and device->host copies. The row's settings say which (``io``).
  ``cudnn_conv_algo_search`` (option, default EXHAUSTIVE) is recorded.

Throughput scenario (run_throughput.py): on the CPU, one session with concurrent
``run()`` calls (ONNX Runtime documents Run as thread-safe; onnxruntime_perf_test's
``-c``), the cell's threads split among them; on CUDA, several sessions, each with its
own CUDA EP instance (and so its own compute stream), one host thread each.

TensorRT EP (runner ``onnxruntime-trt``): the TensorRT EP with the CUDA EP as
fallback, fp32 (TF32 off) or fp16 (``trt_fp16_enable``) on the fp32 ONNX; engines
are cached under the artifact cache. It needs TensorRT's libraries (libnvinfer);
where they do not load, the row is skipped with the reason.

A session whose first provider is not the requested one (ONNX Runtime silently falls
back to the CPU when the CUDA libraries fail to load) is an error, never a CPU row
labelled CUDA.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from infer_compare.backends.onnxruntime.common import CUDA_PRECISIONS, GPU_HINT
from infer_compare.backends.onnxruntime.common import providers as ort_providers
from infer_compare.backends.onnxruntime.executed import ExecutedGraph
from infer_compare.backends.onnxruntime.options import OrtSessionOptions
from infer_compare.backends.onnxruntime.run_multi import bind_all, feed_of, io_dtype
from infer_compare.backends.onnxruntime.run_throughput import cpu_throughput, cuda_throughput
from infer_compare.backends.runner import Runner
from infer_compare.base.batches import Batch
from infer_compare.base.errors import BackendUnavailable, RunnerError
from infer_compare.base.records import Availability
from infer_compare.catalog import deps
from infer_compare.host.gpu import CallMeter, device_index

# precisions whose executed graph is inspected on the CPU provider
INSPECTED = ("fp16", "int8")


class OnnxRuntimeRunner(ExecutedGraph, Runner):
    name = "onnxruntime"
    provider = "CPUExecutionProvider"

    @classmethod
    def probe(cls, device: str = "cpu") -> Availability:
        if not deps.has("onnxruntime"):
            return Availability(False, "ONNX Runtime is not installed", deps.hint("onnxruntime"))
        v = deps.version("onnxruntime")
        try:
            providers = ort_providers()
        except Exception as e:
            return Availability(False, f"onnxruntime fails to import: {e}",
                                deps.hint("onnxruntime"), version=v)
        if device.startswith("cuda"):
            if "CUDAExecutionProvider" not in providers:
                return Availability(False, f"this onnxruntime build has no CUDA execution provider "
                                           f"(providers: {', '.join(providers)})", GPU_HINT, version=v)
            return Availability(True, version=v, devices=(device,), details={"providers": list(providers)})
        return Availability(True, version=v, devices=("cpu",), details={"providers": list(providers)})

    @classmethod
    def supports(cls, fmt: str, precision: str, device: str) -> Availability:
        if not device.startswith("cuda"):
            if precision == "tf32":
                return Availability(False, "TF32 is a CUDA math mode; "
                                           "ONNX Runtime's CPU provider runs the fp32 row")
            return Availability(True)
        if precision == "int8":
            return Availability(False, "the CUDA EP has no int8 convolution kernels (a QDQ file would run "
                                       "dequantized in float); int8 on NVIDIA GPUs: the TensorRT rows")
        if precision not in CUDA_PRECISIONS:
            return Availability(False, f"ONNX Runtime CUDA runs {', '.join(CUDA_PRECISIONS)}, "
                                       f"not {precision}")
        return Availability(True)

    # ------------------------------------------------------------------ lifecycle
    def load(self) -> None:
        import onnxruntime as ort

        self._ort = ort
        self._ort_version = ort.__version__
        self._extra: dict[str, Any] = {}
        self._cuda = self.device.startswith("cuda")
        so = ort.SessionOptions()
        if self.options.threads:
            so.intra_op_num_threads = int(self.options.threads)
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if not self._cuda:
            self._load_cpu(so)
            return

        self.meter = CallMeter(self.device, self.options.batch_size)
        self.meter.start()
        self._dev_id = device_index(self.device)
        providers = self._gpu_providers()
        self._libs = self._load_cuda_libs()
        self.session = self._create(so, providers)
        self._after_session()
        self._so, self._io, self._dev_type = so, self.options.io != "host", "cuda"
        self.settings = {"providers": self.session.get_providers(),
                         "provider_options": self._provider_options(),
                         "graph_optimization": "ORT_ENABLE_ALL", "cuda_libraries": self._libs,
                         "io": "device" if self._io else "host",
                         "io_detail": ("IO binding: input copied to the GPU and output allocated there "
                                       "before timing (no host copies in the timed call)") if self._io else
                                      "numpy in, numpy out: host->device and device->host copies "
                                      "inside each timed call",
                         "before_first_call": "nothing: the session has not run before the first timed call"}

    def _load_cpu(self, so) -> None:
        import shutil
        import tempfile

        inspect = self.options.precision in INSPECTED
        tmp = tempfile.mkdtemp(prefix="ort-optimized-") if inspect else ""
        if inspect:
            so.optimized_model_filepath = os.path.join(tmp, "optimized.onnx")
        try:
            self.session = self._ort.InferenceSession(self.artifact, so, providers=[self.provider])
            self._io = False
            self._after_session()
            self.settings = {"provider": self.session.get_providers()[0],
                             "intra_op_threads": so.intra_op_num_threads,
                             "inter_op_threads": 1, "graph_optimization": "ORT_ENABLE_ALL"}
            if inspect:
                self._describe(self._read_graph(so.optimized_model_filepath), "the session's optimized graph")
                self.settings["executed_graph"] = ("inspected: SessionOptions.optimized_model_filepath "
                                                   "(written during session creation, inside the load time)")
            else:
                self._quantized_in_file()
        finally:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)

    def _gpu_providers(self) -> list:
        prec = self.options.precision
        cuda_opts: dict[str, Any] = {
            "device_id": self._dev_id,
            "cudnn_conv_algo_search": self.options.runner_as(OrtSessionOptions).cudnn_conv_algo_search,
            "use_tf32": 1 if prec == "tf32" else 0,
            "do_copy_in_default_stream": 1,
        }
        self._cuda_opts = cuda_opts
        return [("CUDAExecutionProvider", cuda_opts)]

    def _provider_options(self) -> dict[str, Any]:
        try:
            got = self.session.get_provider_options()
        except Exception:
            return {}
        keep = ("use_tf32", "cudnn_conv_algo_search", "device_id", "trt_fp16_enable", "trt_int8_enable",
                "trt_engine_cache_enable", "trt_max_workspace_size", "trt_builder_optimization_level")
        return {p: {k: v for k, v in o.items() if k in keep} for p, o in got.items()}

    def _load_cuda_libs(self) -> str:
        """Make the CUDA/cuDNN libraries findable. ONNX Runtime documents two ways:
        ``onnxruntime.preload_dlls()`` (from the nvidia-* pip packages) or importing a
        torch built for the same CUDA major first."""
        ort = self._ort
        how = []
        if hasattr(ort, "preload_dlls"):
            try:
                ort.preload_dlls()
                how.append("onnxruntime.preload_dlls()")
            except Exception as e:
                how.append(f"preload_dlls failed ({type(e).__name__})")
        return "; ".join(how) or "default library search path"

    def _create(self, so, providers):
        ort = self._ort
        want = providers[0][0] if isinstance(providers[0], tuple) else providers[0]
        try:
            sess = ort.InferenceSession(self.artifact, so, providers=providers)
        except Exception as e:
            raise RunnerError(f"{want} session failed: {str(e).strip().splitlines()[0][:300]}") from e
        if sess.get_providers()[0] != want and deps.has("torch") and "torch" not in __import__("sys").modules:
            # the documented fallback: torch loads the CUDA/cuDNN libraries it was built with
            import torch  # noqa: F401

            self._libs = (self._libs + "; " if getattr(self, "_libs", "") else "") + "import torch first"
            sess = ort.InferenceSession(self.artifact, so, providers=providers)
        if sess.get_providers()[0] != want:
            raise BackendUnavailable(
                f"{want} did not load (ONNX Runtime fell back to {', '.join(sess.get_providers())}; "
                "its CUDA/cuDNN or TensorRT libraries are missing or of another CUDA major)", GPU_HINT)
        return sess

    def _after_session(self) -> None:
        inp = self.session.get_inputs()[0]
        self.input_name = inp.name
        self.output_names = [self.session.get_outputs()[0].name]
        self._dtype = np.float16 if "float16" in inp.type else np.float32
        self._multi = len(self.session.get_inputs()) > 1 or len(self.session.get_outputs()) > 1
        if self._multi:  # several inputs or outputs: every one by name (run_multi.py)
            self.output_names = [o.name for o in self.session.get_outputs()]
            self._inputs = [(i.name, io_dtype(i.type)) for i in self.session.get_inputs()]
        prec = self.options.precision
        if self._cuda and prec == "tf32":
            self.exec_precision = "tf32"
        elif prec in INSPECTED:
            self.exec_precision = prec  # refined from the graph (CPU: _load_cpu; CUDA: below)
        else:
            self.exec_precision = "fp16" if self._dtype == np.float16 else "fp32"
        if self._cuda and prec == "fp16" and self.session.get_providers()[0] == "CUDAExecutionProvider":
            # the CUDA EP has fp16 kernels for the usual vision ops: the converted file's own graph is what
            # runs
            self._describe(self._read_graph(self.artifact), "the fp16 file's graph (CUDA EP node placement "
                                                            "not inspected)")

    def close(self) -> None:
        meter = getattr(self, "meter", None)
        if meter is not None:
            meter.close()

    # ------------------------------------------------------------------ inference
    def prepare(self, batch: Batch) -> Any:
        if self._multi:
            feed = feed_of(self._inputs, batch)
            return self.bind(self.session, feed) if self._io else feed
        x = np.ascontiguousarray(batch, dtype=self._dtype)
        if not self._io:
            return x
        return self.bind(self.session, x)

    def bind(self, session: Any, x: np.ndarray | dict[str, np.ndarray]) -> tuple[Any, ...]:
        """An IO binding of ``session`` with ``x`` copied to the device and the output allocated there,
        without running the session (the first timed call stays cold). (binding, input, output)."""
        if isinstance(x, dict):
            return bind_all(self, session, x)
        ort, dev, idx = self._ort, self._dev_type, self._dev_id
        xv = ort.OrtValue.ortvalue_from_numpy(x, dev, idx)
        b = session.io_binding()
        b.bind_ortvalue_input(self.input_name, xv)
        shape = self._output_shape(session, len(x))
        ov = None
        if shape is not None:
            ov = ort.OrtValue.ortvalue_from_shape_and_type(shape, self._out_dtype(session), dev, idx)
            b.bind_ortvalue_output(self.output_names[0], ov)
        else:  # a symbolic dimension other than the batch: ONNX Runtime allocates it in the first (cold) call
            b.bind_output(self.output_names[0], dev, idx)
        return b, xv, ov

    @staticmethod
    def _output_shape(session: Any, batch: int) -> list[int] | None:
        dims = list(session.get_outputs()[0].shape)
        if not dims or not all(isinstance(d, int) and d > 0 for d in dims[1:]):
            return None
        return [batch, *dims[1:]]

    @staticmethod
    def _out_dtype(session: Any) -> Any:
        return np.float16 if "float16" in session.get_outputs()[0].type else np.float32

    def run(self, prepared: Any) -> Any:
        if self._io:
            b = prepared[0]
            self.session.run_with_iobinding(b)
            b.synchronize_outputs()
            if self._cuda:
                self.meter.after_call()
            return b
        if self._multi:  # prepared is the feed dict; every output, as a list
            out = self.session.run(self.output_names, prepared)
        else:
            out = self.session.run(self.output_names, {self.input_name: prepared})[0]
        if self._cuda:
            self.meter.after_call()
        return out

    def to_numpy(self, outputs: Any) -> Batch:
        if self._multi:
            got = outputs.copy_outputs_to_cpu() if self._io else outputs
            return {n: np.asarray(v, dtype=np.float32) for n, v in zip(self.output_names, got, strict=True)}
        if self._io:
            return np.asarray(outputs.copy_outputs_to_cpu()[0], dtype=np.float32)
        return np.asarray(outputs, dtype=np.float32)

    def extra_metrics(self) -> dict[str, Any]:
        if not getattr(self, "_cuda", False):
            return dict(getattr(self, "_extra", {}))
        m = {**self._extra, **self.meter.metrics()}
        m["device_time"] = ("not measured for ONNX Runtime: its CUDA stream is internal; latency is the host "
                            "clock around run_with_iobinding + synchronize" if self._io else
                            "not measured for ONNX Runtime; latency is the host clock around session.run "
                            "(host copies included)")
        note = None
        if "energy_mj_per_image" in m:
            note = f"energy {m['energy_mj_per_image']:.2f} mJ/image (NVML, {m.get('gpu_avg_power_w', '?')} W)"
        if note:
            self.notes.append(note)
        return m

    def library_versions(self) -> dict[str, str]:
        return {"onnxruntime": self._ort_version}

    def throughput(self, batch: np.ndarray, settings: Any) -> Any:
        return cuda_throughput(self, batch, settings) if self._cuda else cpu_throughput(self, batch, settings)
