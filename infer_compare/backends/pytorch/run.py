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
  True); both are recorded in the row's settings. The input is copied to the GPU
  before timing; each timed call runs the model and synchronises (device-resident
  input and output, no host copies in the loop). The output is copied to the host
  only for parity, outside the timed loop.
  ``cuda_graphs`` (option, default False): the eager model is captured once into a
  CUDA graph (``torch.cuda.graph``) and each timed call replays it.

``pytorch-compile`` (CUDA only): ``torch.compile`` in its default mode (option
``compile_mode``; ``max-autotune`` only on request, it autotunes every convolution and
takes many minutes). With ``cuda_graphs`` the mode becomes ``reduce-overhead`` (CUDA
graphs through Inductor's cudagraph trees). Compilation happens in ``load()`` on a
batch of the measured size, so it is part of the row's load time, not of its latency.

GPU figures in ``extra``: device time per call from CUDA events (``device_ms_*``),
energy per image from NVML, peak memory of torch's allocator; see infer_compare/gpu.py.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ... import deps
from ...errors import BackendUnavailable, RunnerError
from ...records import Availability
from ..runner import Runner
from .options import COMPILE_MODES, EagerOptions

CUDA_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


def _probe_cuda(device: str) -> Availability:
    """Whether torch sees ``device``. Imports torch (the parent process has it already)."""
    from ...gpu import device_index

    if not deps.has("torch"):
        return Availability(False, "PyTorch is not installed", deps.hint("torch"))
    v = deps.version("torch")
    try:
        import torch

        if not torch.cuda.is_available():
            build = torch.version.cuda
            why = ("this PyTorch is a CPU-only build" if not build
                   else f"PyTorch (CUDA {build}) sees no usable CUDA device (driver missing or too old?)")
            return Availability(False, why, "install a CUDA build of PyTorch (pytorch.org) and the NVIDIA driver",
                                version=v)
        n = torch.cuda.device_count()
        idx = device_index(device)
        if idx >= n:
            return Availability(False, f"{device} does not exist (PyTorch sees {n} CUDA device(s))", version=v)
        return Availability(True, version=v, devices=tuple(f"cuda:{i}" for i in range(n)),
                            details={"cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()})
    except Exception as e:
        return Availability(False, f"PyTorch cannot query CUDA: {type(e).__name__}: {e}", version=v)


class PyTorchRunner(Runner):
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

                from ...gpu import device_index

                major, minor = torch.cuda.get_device_capability(device_index(device))
            except Exception as e:
                return Availability(False, f"cannot read the GPU's compute capability: {e}")
            if major < 8:
                return Availability(False, f"{precision} needs compute capability >= 8.0 (Ampere); "
                                           f"{device} has {major}.{minor}")
        return Availability(True)

    # ------------------------------------------------------------------ lifecycle
    def load(self) -> None:
        import torch

        from ...models import rebuild

        self._torch = torch
        self._cuda = self.device.startswith("cuda")
        if self.options.threads:
            torch.set_num_threads(int(self.options.threads))
        torch.set_grad_enabled(False)
        model = rebuild(self.options.model, self.artifact)  # a built-in architecture or the user's model
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
        """Eager CPU rows take any batch size as loaded; CUDA rows (meter, graphs, compiled shapes) reload."""
        if self._cuda:
            return False
        self.options.batch_size = int(batch_size)
        return True

    def _cuda_setup(self, opts: EagerOptions):
        """Device, per-call meter and math settings of a CUDA row; the torch device."""
        import torch

        from ...gpu import CallMeter

        if not torch.cuda.is_available():
            raise BackendUnavailable("PyTorch sees no CUDA device", "install a CUDA build of PyTorch")
        prec = self.options.precision
        if prec not in CUDA_PRECISIONS:
            raise RunnerError(f"PyTorch on CUDA runs {', '.join(CUDA_PRECISIONS)}, not {prec}")
        dev = torch.device(self.device if ":" in self.device else "cuda:0")
        torch.cuda.set_device(dev)
        self._dev = dev
        self.meter = CallMeter(self.device, self.options.batch_size)
        self.meter.start()
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = prec == "tf32"
        torch.backends.cudnn.benchmark = bool(opts.cudnn_benchmark)
        self._dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(prec, torch.float32)
        self._mf = torch.channels_last if opts.channels_last else torch.contiguous_format
        return dev

    def _compile(self, model, opts: EagerOptions):
        """torch.compile in the chosen mode, its caches under the tool's cache directory; (model, mode)."""
        import os

        import torch

        graphs = bool(opts.cuda_graphs)
        mode = str(getattr(opts, "compile_mode", "") or ("reduce-overhead" if graphs else "default"))
        if mode not in COMPILE_MODES:
            raise RunnerError(f"unknown torch.compile mode {mode!r} (known: {', '.join(COMPILE_MODES)})")
        if not hasattr(torch, "compile"):
            raise BackendUnavailable(f"torch.compile needs PyTorch >= 2.0 (this is {torch.__version__})",
                                     deps.hint("torch"))
        if self.options.cache_dir:  # Inductor's and Triton's on-disk caches: reused across cells and runs
            os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(self.options.cache_dir, "torchinductor"))
            os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(self.options.cache_dir, "triton"))
        model = torch.compile(model, mode=None if mode == "default" else mode)
        if mode in ("reduce-overhead", "max-autotune"):
            self._mark_step = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
        return model, mode

    def _warm_compile(self, shape: tuple[int, ...]) -> float:
        """Compile (and, for reduce-overhead, record the CUDA graph) now, on the measured shape; seconds."""
        import time

        import torch

        t0 = time.perf_counter()
        dummy = torch.zeros(shape, device=self._dev, dtype=self._dtype).contiguous(memory_format=self._mf)
        with torch.inference_mode():
            for _ in range(3):
                if self._mark_step is not None:
                    self._mark_step()
                self.model(dummy)
        torch.cuda.synchronize(self._dev)
        return round(time.perf_counter() - t0, 2)

    def _load_cuda(self, model) -> None:
        import torch

        from ...gpu import cuda_facts_torch

        opts = self.options.runner_as(EagerOptions)
        dev = self._cuda_setup(opts)
        model = model.to(dev, dtype=self._dtype)
        if opts.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self._graph = None
        self._graphs = bool(opts.cuda_graphs) and not self.compiled
        self._mark_step = None
        mode = None
        if self.compiled:
            model, mode = self._compile(model, opts)
        self.model = model
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        shape = (int(self.options.batch_size), *[int(v) for v in self.options.model.get("input_shape", ())])
        compile_s = self._warm_compile(shape) if self.compiled and len(shape) == 4 else None
        self.exec_precision = self.options.precision
        self.settings = {
            "mode": (f"torch.compile mode={mode}" if self.compiled else "eager") + ", inference_mode",
            "device": str(dev), "channels_last": bool(opts.channels_last), "cudnn_benchmark": bool(opts.cudnn_benchmark),
            "tf32_cudnn": torch.backends.cudnn.allow_tf32, "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "dtype": str(self._dtype).replace("torch.", ""), "cuda_graphs": bool(opts.cuda_graphs),
            "io": "device-resident input and output (copied to the GPU before timing; no host copies in the "
                  "timed call)",
            **cuda_facts_torch(self.device),
        }
        if compile_s is not None:
            self.settings["compile_s"] = compile_s
            self.settings["compile_cache"] = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "torch's default")
            self.notes.append(f"torch.compile ({mode}) took {compile_s} s on the measured batch shape (Inductor "
                              "cache reused where it had this graph); it is part of load time")

    def close(self) -> None:
        meter = getattr(self, "meter", None)
        if meter is not None:
            meter.close()

    # ------------------------------------------------------------------ inference
    def prepare(self, batch: np.ndarray) -> Any:
        torch = self._torch
        x = torch.from_numpy(np.ascontiguousarray(batch))
        if not self._cuda:
            return x
        x = x.to(self._dev, dtype=self._dtype).contiguous(memory_format=self._mf)
        if self._graphs:
            return self._graph_input(x)
        torch.cuda.synchronize(self._dev)
        return x

    def _graph_input(self, x):
        """Copy ``x`` into the captured graph's static input (capturing on first use)."""
        torch = self._torch
        if self._graph is not None:
            if tuple(x.shape) != tuple(self._static_in.shape):
                raise RunnerError(f"CUDA graph captured for shape {tuple(self._static_in.shape)}, got {tuple(x.shape)}")
            self._static_in.copy_(x)
            torch.cuda.synchronize(self._dev)
            return self._static_in
        self._static_in = x.clone()
        s = torch.cuda.Stream(self._dev)
        s.wait_stream(torch.cuda.current_stream(self._dev))
        with torch.cuda.stream(s), torch.inference_mode():
            for _ in range(3):  # warm up (cuDNN autotuning) outside the capture
                self.model(self._static_in)
        torch.cuda.current_stream(self._dev).wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g), torch.inference_mode():
            self._static_out = self.model(self._static_in)
        torch.cuda.synchronize(self._dev)
        self._graph = g
        self.notes.append("eager model captured once into a CUDA graph; each timed call is one graph replay")
        return self._static_in

    def run(self, prepared: Any) -> Any:
        if not self._cuda:
            with self._torch.inference_mode():
                return self.model(prepared)
        self._start.record()
        if self._graph is not None:
            self._graph.replay()
            out = self._static_out
        else:
            if self._mark_step is not None:
                self._mark_step()
            with self._torch.inference_mode():
                out = self.model(prepared)
        self._end.record()
        self._end.synchronize()
        self.meter.after_call(device=self._start.elapsed_time(self._end))
        return out

    def to_numpy(self, outputs: Any) -> np.ndarray:
        return outputs.float().cpu().numpy()

    def extra_metrics(self) -> dict[str, Any]:
        if not getattr(self, "_cuda", False):
            return {}
        torch = self._torch
        m = self.meter.metrics(peak_allocated_mib=torch.cuda.max_memory_allocated(self._dev) / 2**20)
        note = self.meter.note(m)
        if note:
            self.notes.append(note)
        return m

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
