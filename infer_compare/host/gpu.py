"""GPU helpers for the CUDA runners: NVML (GPU memory, energy) and per-call accounting.

Nothing here imports a heavy library at import time. NVML comes from nvidia-ml-py
(the ``gpu`` extra, module ``pynvml``); without it, energy and NVML memory are simply
absent from the row, and the row says why.

Timing conventions (the report says which a figure is):

* ``latency`` / ``throughput`` of a row: the harness's host clock around each blocking
  call (end to end, including Python and launch overhead and, where the row says so,
  host<->device copies).
* ``extra["device_ms_*"]``: CUDA events recorded on the runner's stream around the GPU
  work of each call (``"timing": "cuda events"``), over every call after the first
  (the first call is cold: cuDNN autotuning, compilation, lazy allocation).
* ``extra["energy_mj_per_image"]``: NVML's total energy counter
  (``nvmlDeviceGetTotalEnergyConsumption``, millijoules since the driver loaded) read
  after the first call and again when the measured loop has ended, divided by the
  images processed in between. It is the whole board's energy, idle gaps between
  calls included, so it is the energy per image of this way of running the model.
"""

from __future__ import annotations

import os
import time
from typing import Any

from infer_compare.catalog import deps


def device_index(device: str) -> int:
    """'cuda:1' -> 1; 'cuda' -> 0."""
    _, _, idx = device.partition(":")
    return int(idx) if idx.isdigit() else 0


def _nvml_index(cuda_index: int) -> int | str:
    """CUDA's device index -> NVML's index (or UUID) when CUDA_VISIBLE_DEVICES reorders them."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not vis:
        return cuda_index
    items = [v.strip() for v in vis.split(",") if v.strip()]
    if cuda_index >= len(items):
        return cuda_index
    it = items[cuda_index]
    return int(it) if it.isdigit() else it


def _s(v: Any) -> Any:
    return v.decode() if isinstance(v, bytes) else v


class Nvml:
    """One GPU through NVML. Never raises: ``ok`` False and ``reason`` say why not."""

    def __init__(self, cuda_index: int = 0):
        self.ok = False
        self.reason = ""
        self._nv: Any = None
        self._h: Any = None
        try:
            import pynvml
        except Exception as e:  # not installed, or a broken install
            self.reason = f"nvidia-ml-py (pynvml) is not importable: {type(e).__name__}"
            return
        try:
            pynvml.nvmlInit()
            which = _nvml_index(cuda_index)
            if isinstance(which, int):
                self._h = pynvml.nvmlDeviceGetHandleByIndex(which)
            else:
                self._h = pynvml.nvmlDeviceGetHandleByUUID(which)
            self._nv = pynvml
            self.ok = True
        except Exception as e:
            self.reason = f"NVML: {type(e).__name__}: {e}"

    def _call(self, fn: str, *args: Any) -> Any:
        if not self.ok:
            return None
        try:
            return getattr(self._nv, fn)(self._h, *args)
        except Exception:
            return None

    def energy_mj(self) -> int | None:
        """Total energy since the driver loaded, mJ (Volta and newer; None where not exposed)."""
        v = self._call("nvmlDeviceGetTotalEnergyConsumption")
        return int(v) if v is not None else None

    def memory_used_mib(self) -> float | None:
        m = self._call("nvmlDeviceGetMemoryInfo")
        return m.used / 2**20 if m is not None else None

    def facts(self) -> dict[str, Any]:
        """Name, memory, clocks and power limit: recorded with each GPU row."""
        if not self.ok:
            return {"nvml": self.reason}
        out: dict[str, Any] = {}
        name = self._call("nvmlDeviceGetName")
        if name is not None:
            out["gpu_name"] = _s(name)
        mem = self._call("nvmlDeviceGetMemoryInfo")
        if mem is not None:
            out["gpu_memory_total_mib"] = int(mem.total // 2**20)
        pl = self._call("nvmlDeviceGetEnforcedPowerLimit")
        if pl is not None:
            out["power_limit_w"] = round(pl / 1000, 1)
        try:
            sm = self._nv.nvmlDeviceGetMaxClockInfo(self._h, self._nv.NVML_CLOCK_SM)
            out["sm_clock_max_mhz"] = int(sm)
        except Exception:
            pass
        try:
            drv = self._nv.nvmlSystemGetDriverVersion()
            out["driver"] = _s(drv)
        except Exception:
            pass
        return out

    def close(self) -> None:
        if self.ok:
            try:
                self._nv.nvmlShutdown()
            except Exception:
                pass
            self.ok = False


def summarize_ms(values: list[float]) -> dict[str, float]:
    import numpy as np

    a = np.asarray(values, dtype=np.float64)
    p = np.percentile(a, [50, 90, 99])
    return {"mean": float(a.mean()), "min": float(a.min()), "p50": float(p[0]), "p90": float(p[1]),
            "p99": float(p[2]), "max": float(a.max())}


class CallMeter:
    """Per-call GPU accounting for a runner: device times, energy window, memory.

    The runner calls :meth:`start` at the beginning of ``load()`` (memory baseline),
    :meth:`after_call` at the end of each blocking ``run()`` with the times it measured
    with CUDA events, and :meth:`metrics` from ``extra_metrics()``. The first call is
    treated as cold and left out of every figure.
    """

    def __init__(self, device: str, images_per_call: int):
        self.device = device
        self.images_per_call = int(images_per_call)
        self.nvml = Nvml(device_index(device))
        self.calls = 0
        self.images = 0
        self.stages: dict[str, list[float]] = {}
        self._e0: int | None = None
        self._t0: float | None = None
        self._mem0: float | None = None

    def start(self) -> None:
        self._mem0 = self.nvml.memory_used_mib()

    def after_call(self, **stage_ms: float | None) -> None:
        """``stage_ms``: e.g. device=1.2, or h2d=0.1, compute=1.0, d2h=0.05 (ms, CUDA events)."""
        self.calls += 1
        if self.calls == 1:  # cold call: open the windows after it
            self._e0 = self.nvml.energy_mj()
            self._t0 = time.perf_counter()
            return
        self.images += self.images_per_call
        for k, v in stage_ms.items():
            if v is not None:
                self.stages.setdefault(k, []).append(float(v))

    def metrics(self, peak_allocated_mib: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.stages:
            out["timing"] = "cuda events"
            out["device_calls"] = len(next(iter(self.stages.values())))
            out["device_calls_note"] = "every call after the first (warm-up calls included)"
            for stage, vals in self.stages.items():
                for stat, v in summarize_ms(vals).items():
                    out[f"{stage}_ms_{stat}"] = round(v, 4)
        e1 = self.nvml.energy_mj()
        if self._e0 is not None and e1 is not None and self.images > 0 and self._t0 is not None:
            dt = time.perf_counter() - self._t0
            de = e1 - self._e0
            out["energy_mj_per_image"] = round(de / self.images, 4)
            out["energy_window_s"] = round(dt, 3)
            out["energy_images"] = self.images
            if dt > 0:
                out["gpu_avg_power_w"] = round(de / 1000 / dt, 1)
            out["energy_source"] = "NVML nvmlDeviceGetTotalEnergyConsumption (whole board)"
        elif not self.nvml.ok:
            out["energy"] = f"not measured: {self.nvml.reason}"
        elif e1 is None:
            out["energy"] = "not measured: this GPU does not expose NVML's total energy counter"
        mem = self.nvml.memory_used_mib()
        if mem is not None and self._mem0 is not None:
            out["gpu_mem_used_delta_mib"] = round(mem - self._mem0, 1)
            out["gpu_mem_source"] = ("NVML device memory in use, after the loop minus before load "
                                     "(device-wide)")
        if peak_allocated_mib is not None:
            out["gpu_peak_allocated_mib"] = round(peak_allocated_mib, 1)
        out.update({k: v for k, v in self.nvml.facts().items() if k not in out})
        return out

    def note(self, m: dict[str, Any]) -> str | None:
        """One line for the row's notes from :meth:`metrics`' result (the markdown report
        shows notes, not ``extra``)."""
        parts = []
        for stage in self.stages:
            if f"{stage}_ms_p50" in m:
                parts.append(f"{stage} p50 {m[f'{stage}_ms_p50']:.3f} ms")
        if not parts:
            return None
        txt = "GPU time (CUDA events): " + ", ".join(parts)
        if "energy_mj_per_image" in m:
            txt += (f"; energy {m['energy_mj_per_image']:.2f} mJ/image "
                    f"(NVML, {m.get('gpu_avg_power_w', '?')} W)")
        return txt

    def close(self) -> None:
        self.nvml.close()


def cuda_facts_torch(device: str) -> dict[str, Any]:
    """Name, compute capability, CUDA and cuDNN versions as torch sees them (torch already imported)."""
    import torch

    idx = device_index(device)
    p = torch.cuda.get_device_properties(idx)
    return {"gpu": p.name, "compute_capability": f"{p.major}.{p.minor}", "sm_count": p.multi_processor_count,
            "cuda_runtime": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}


def cuda_versions() -> dict[str, Any]:
    """CUDA runtime and cuDNN versions for the report header; empty without torch.

    Imports torch (only called when a GPU is present); never raises."""
    out: dict[str, Any] = {}
    if not deps.has("torch"):
        return out
    try:
        import torch

        out["torch_cuda_runtime"] = torch.version.cuda
        if torch.backends.cudnn.is_available():
            v = torch.backends.cudnn.version()
            out["cudnn"] = f"{v // 10000}.{(v % 10000) // 100}.{v % 100}" if v and v >= 10000 else v
        if torch.cuda.is_available():
            out["cuda_devices_torch"] = [torch.cuda.get_device_name(i)
                                         for i in range(torch.cuda.device_count())]
    except Exception as e:
        out["cuda_facts_error"] = f"{type(e).__name__}: {e}"
    return out
