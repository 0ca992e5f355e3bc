"""PyTorch eager (CPU and CUDA) and PyTorch with ``torch.compile`` (CUDA).

CPU: fp32 eager, the reference's own runtime, as a row of its own.

CUDA (``cuda:N``):
  fp32  float32 weights and inputs with TF32 math OFF (cuDNN and cuBLAS), so that the
        row is what its name says;
  tf32  float32 weights and inputs with TF32 math ON (``torch.backends.cudnn.allow_tf32``
        and ``torch.backends.cuda.matmul.allow_tf32``);
  fp16  / bf16  the model and the input cast to half / bfloat16 (``model.half()``).
  Every CUDA row uses channels_last memory format (option ``channels_last``, default
  True) and ``torch.backends.cudnn.benchmark`` (option ``cudnn_benchmark``, default
  True); both are recorded in the row's settings. Inputs and outputs follow the GPU
  timing policy (``--io device``, default: device-resident; ``--io host``: the copies
  inside each timed call); CUDA events go into a ring created at load and are read after
  the loop (run_cuda.py).
  ``cuda_graphs`` (option, default False): the eager model is captured once, in
  ``load()``, into a CUDA graph (``torch.cuda.graph``) and each timed call replays it.

``pytorch-compile`` (CUDA only): ``torch.compile`` in its default mode (option
``compile_mode``; ``max-autotune`` only on request, it autotunes every convolution and
takes many minutes). With ``cuda_graphs`` the mode becomes ``reduce-overhead`` (CUDA
graphs through Inductor's cudagraph trees). Compilation happens in ``load()`` on a
batch of the measured size, so it is part of the row's load time, not of its latency.

Throughput scenario: CPU rows run several threads with the intra-op threads split
among them; CUDA rows keep several streams busy (run_cuda.py).

GPU figures in ``extra``: device time per call from CUDA events (``device_ms_*``),
energy per image from NVML, peak memory of torch's allocator; see infer_compare/host/gpu.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from infer_compare import models
from infer_compare.backends.pytorch.run_cuda import CUDA_PRECISIONS, DEVICES_USED, CudaRows
from infer_compare.backends.pytorch.run_multi import host_tensors, outputs_numpy
from infer_compare.backends.runner import Runner
from infer_compare.backends.throughput import (
    ThroughputResult,
    ThroughputSettings,
    result,
    run_threads,
    split_threads,
)
from infer_compare.base.batches import Batch, count
from infer_compare.base.errors import BackendUnavailable
from infer_compare.base.records import Availability
from infer_compare.catalog import deps
from infer_compare.host.gpu import device_index


def _probe_cuda(device: str) -> Availability:
    """Whether torch sees ``device``. Imports torch (the parent process has it already)."""
    if not deps.has("torch"):
        return Availability(False, "PyTorch is not installed", deps.hint("torch"))
    v = deps.version("torch")
    try:
        import torch

        if not torch.cuda.is_available():
            build = torch.version.cuda
            why = ("this PyTorch is a CPU-only build" if not build
                   else f"PyTorch (CUDA {build}) sees no usable CUDA device (driver missing or too old?)")
            return Availability(False, why, "install a CUDA build of PyTorch (pytorch.org) "
                                            "and the NVIDIA driver",
                                version=v)
        n = torch.cuda.device_count()
        idx = device_index(device)
        if idx >= n:
            return Availability(False, f"{device} does not exist "
                                       f"(PyTorch sees {n} CUDA device(s))", version=v)
        return Availability(True, version=v, devices=tuple(f"cuda:{i}" for i in range(n)),
                            details={"cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()})
    except Exception as e:
        return Availability(False, f"PyTorch cannot query CUDA: {type(e).__name__}: {e}", version=v)


class PyTorchRunner(CudaRows, Runner):
    name = "pytorch"
    compiled = False  # True for the torch.compile runner

    @classmethod
    def probe(cls, device: str = "cpu") -> Availability:
        if not deps.has("torch"):
            return Availability(False, "PyTorch is not installed", deps.hint("torch"))
        if device.startswith("cuda"):
            return _probe_cuda(device)
        if cls.compiled:
            return Availability(False, "torch.compile rows are measured on CUDA devices only")
        return Availability(True, version=deps.version("torch"), devices=("cpu",))

    @classmethod
    def supports(cls, fmt: str, precision: str, device: str) -> Availability:
        if not device.startswith("cuda"):
            if precision != "fp32":
                return Availability(False, f"PyTorch {precision} is measured on CUDA devices only "
                                           "(CPU eager runs fp32)")
            return Availability(True)
        if precision not in CUDA_PRECISIONS:
            return Availability(False, f"PyTorch on CUDA runs {', '.join(CUDA_PRECISIONS)}, not {precision}")
        if precision in ("tf32", "bf16"):
            try:
                import torch

                major, minor = torch.cuda.get_device_capability(device_index(device))
            except Exception as e:
                return Availability(False, f"cannot read the GPU's compute capability: {e}")
            if major < 8:
                return Availability(False, f"{precision} needs compute capability >= 8.0 (Ampere); "
                                           f"{device} has {major}.{minor}")
        return Availability(True)

    @classmethod
    def reset_process_state(cls) -> dict[str, Any]:
        """In a resident process, between configurations: torch.compile forgets every compiled graph and its
        recompilation history (each configuration compiles as in a fresh process: static at its first batch
        size, then torch's automatic dynamic shapes), the CUDA caching allocator gives back what the last
        configuration held and the peak-memory counters start again. cuDNN's algorithm cache is kept."""
        import gc
        import sys

        torch = sys.modules.get("torch")
        if torch is None:
            return {}
        done: dict[str, Any] = {}
        dynamo = sys.modules.get("torch._dynamo")
        if dynamo is not None:
            dynamo.reset()
            done["torch_compile_reset"] = True
        gc.collect()  # the one collection between configurations (measure/resident.py runs none after it)
        done["gc_collected"] = True
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            for i in sorted(DEVICES_USED):  # only these: asking another would start a CUDA context on it
                torch.cuda.reset_peak_memory_stats(i)
            done["cuda_memory_released"] = True
        return done

    # ------------------------------------------------------------------ lifecycle
    def load(self) -> None:
        import torch

        self._torch = torch
        self._cuda = self.device.startswith("cuda")
        if self.options.threads:
            torch.set_num_threads(int(self.options.threads))
        torch.set_grad_enabled(False)
        # a built-in architecture or the user's model
        model = models.rebuild(self.options.model, self.artifact)
        self._multi = False  # set by prepare(): several inputs
        if not self._cuda:
            if self.compiled:
                raise BackendUnavailable("torch.compile rows are measured on CUDA devices only")
            self.model = model
            self.exec_precision = "fp32"
            self.settings = {"threads": torch.get_num_threads(), "mode": "eager, inference_mode",
                             "mkldnn": bool(torch.backends.mkldnn.is_available())}
            return
        self._load_cuda(model)

    def rebatch(self, batch_size: int) -> bool:
        """Eager CPU rows take any batch size as loaded; CUDA rows keep the model on the GPU (a new meter and
        event ring; torch.compile compiles the new shape), except CUDA-graph rows, which reload."""
        if self._cuda:
            return self._cuda_rebatch(batch_size)
        self.options.batch_size = int(batch_size)
        return True

    def close(self) -> None:
        meter = getattr(self, "meter", None)
        if meter is not None:
            meter.close()

    # ------------------------------------------------------------------ inference
    def prepare(self, batch: Batch) -> Any:
        """A CPU tensor (on CUDA rows: placed as the timed call takes it); several inputs: a tuple of them,
        in the model's order, each in its own dtype (run() then calls the model with them as arguments)."""
        x = host_tensors(self._torch, batch)
        self._multi = isinstance(x, tuple)
        return self._cuda_prepare(x) if self._cuda else x

    def run(self, prepared: Any) -> Any:
        if self._cuda:
            return self._cuda_run(prepared)
        with self._torch.inference_mode():
            return self.model(*prepared) if self._multi else self.model(prepared)

    def to_numpy(self, outputs: Any) -> Batch:
        """One output tensor as a float32 array; several (a tuple, list or dict of tensors): {name: array},
        named as the reference names them (models.user_torch.flatten_outputs)."""
        if isinstance(outputs, self._torch.Tensor):
            return outputs.float().cpu().numpy()
        return outputs_numpy(outputs)

    def extra_metrics(self) -> dict[str, Any]:
        return self._cuda_metrics() if getattr(self, "_cuda", False) else {}

    def throughput(self, batch: np.ndarray, settings: ThroughputSettings) -> ThroughputResult:
        """CUDA: several streams (run_cuda.py); CPU: threads calling the model, intra-op threads split."""
        if self._cuda:
            return self._cuda_throughput(batch, settings)
        torch = self._torch
        n = self.concurrency(settings)
        per = split_threads(self.options.threads, n)
        before = torch.get_num_threads()
        xs = [self.prepare(batch) for _ in range(n)]
        try:
            w = run_threads([lambda x=x: self.run(x) for x in xs], count(batch), settings,
                            init=lambda _i: torch.set_num_threads(per))
        finally:
            torch.set_num_threads(before)
        how = f"PyTorch eager: {n} threads calling the model, torch.set_num_threads({per}) in each"
        return result(w, n, "threads", how, {"intra_op_threads_per_thread": per},
                      outputs=self.to_numpy(w.last))

    def library_versions(self) -> dict[str, str]:
        v = {"torch": self._torch.__version__}
        if getattr(self, "_cuda", False):
            v["cuda"] = str(self._torch.version.cuda)
            v["cudnn"] = str(self._torch.backends.cudnn.version())
            if self.compiled and deps.has("triton"):
                v["triton"] = deps.version("triton") or "?"
        return v


class PyTorchCompileRunner(PyTorchRunner):
    name = "pytorch-compile"
    compiled = True
