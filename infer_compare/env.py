"""Environment fingerprint and hardware probes. Every probe is absent-tolerant and
imports no heavy library (no torch): GPUs come from NVML when nvidia-ml-py is
installed, else from the NVIDIA driver's /proc entries."""

from __future__ import annotations

import glob
import hashlib
import os
import platform
import socket
import sys
from typing import Any

from . import __version__, deps
from .records import Environment

CPU_FLAGS_OF_INTEREST = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx_vnni",
                         "amx_bf16", "amx_int8", "amx_fp16", "neon", "asimd", "fp16", "asimdhp", "sve")


def _read(path: str) -> str | None:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def cpu_info() -> tuple[str, tuple[str, ...]]:
    """(model name, flags of interest). /proc/cpuinfo first (fast); py-cpuinfo elsewhere."""
    text = _read("/proc/cpuinfo")
    name, flags = "", set()
    if text:
        for line in text.splitlines():
            k, _, v = line.partition(":")
            k = k.strip().lower()
            if not name and k in ("model name", "hardware", "cpu model", "processor") and not v.strip().isdigit():
                name = v.strip()
            elif k in ("flags", "features") and not flags:
                flags = set(v.split())
    if not name:
        if deps.has("cpuinfo"):
            try:
                import cpuinfo

                info = cpuinfo.get_cpu_info()
                name = info.get("brand_raw", "") or name
                flags = flags or set(info.get("flags", []))
            except Exception:
                pass
        name = name or platform.processor() or platform.machine()
    return name, tuple(f for f in CPU_FLAGS_OF_INTEREST if f in flags)


def gpus() -> tuple[dict[str, Any], ...]:
    """NVIDIA GPUs: name, memory, driver, compute capability when NVML gives them."""
    out: list[dict[str, Any]] = []
    if deps.has("pynvml"):
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                drv = pynvml.nvmlSystemGetDriverVersion()
                drv = drv.decode() if isinstance(drv, bytes) else drv
                try:
                    cv = pynvml.nvmlSystemGetCudaDriverVersion_v2()
                    cuda = f"{cv // 1000}.{(cv % 1000) // 10}"
                except Exception:
                    cuda = None
                for i in range(pynvml.nvmlDeviceGetCount()):
                    h = pynvml.nvmlDeviceGetHandleByIndex(i)
                    nm = pynvml.nvmlDeviceGetName(h)
                    nm = nm.decode() if isinstance(nm, bytes) else nm
                    mem = pynvml.nvmlDeviceGetMemoryInfo(h).total
                    g: dict[str, Any] = {"index": i, "name": nm, "memory_mib": int(mem // 2**20), "driver": drv,
                                         "cuda_driver": cuda, "source": "nvml"}
                    try:
                        g["compute_capability"] = "{}.{}".format(*pynvml.nvmlDeviceGetCudaComputeCapability(h))
                    except Exception:
                        pass
                    out.append(g)
            finally:
                pynvml.nvmlShutdown()
            return tuple(out)
        except Exception:
            out = []
    for i, info in enumerate(sorted(glob.glob("/proc/driver/nvidia/gpus/*/information"))):
        text = _read(info) or ""
        fields = dict((a.strip(), b.strip()) for a, _, b in (ln.partition(":") for ln in text.splitlines()))
        out.append({"index": i, "name": fields.get("Model", "NVIDIA GPU"), "source": "/proc/driver/nvidia"})
    ver = _read("/proc/driver/nvidia/version")
    if ver and out:
        import re

        m = re.search(r"Kernel Module\s+([\d.]+)", ver)
        for g in out:
            g["driver"] = m.group(1) if m else None
    return tuple(out)


def cuda_devices() -> list[str]:
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return []
    return [f"cuda:{g['index']}" for g in gpus()]


def edgetpu_devices() -> list[str]:
    """Coral accelerators: USB (ids 1a6e:089a before firmware load, 18d1:9302 after) or PCIe/M.2 (/dev/apex_*)."""
    found = []
    for dev in glob.glob("/sys/bus/usb/devices/*"):
        vid, pid = _read(os.path.join(dev, "idVendor")), _read(os.path.join(dev, "idProduct"))
        if vid and pid and (vid.strip(), pid.strip()) in (("1a6e", "089a"), ("18d1", "9302")):
            found.append(f"edgetpu:usb:{len([f for f in found if 'usb' in f])}")
    for i, _ in enumerate(sorted(glob.glob("/dev/apex_*"))):
        found.append(f"edgetpu:pci:{i}")
    return found


def devices() -> dict[str, list[str]]:
    """Device kind -> devices present. The CPU is always present."""
    return {"cpu": ["cpu"], "cuda": cuda_devices(), "edgetpu": edgetpu_devices()}


def collect(extra_facts: dict[str, Any] | None = None) -> Environment:
    import psutil

    name, flags = cpu_info()
    host = socket.gethostname()
    return Environment(
        hostname_hash=hashlib.sha256(host.encode()).hexdigest()[:12],
        os=f"{platform.system()} {_os_release()}".strip(),
        kernel=platform.release(),
        machine=platform.machine(),
        python=f"{platform.python_implementation()} {platform.python_version()}",
        cpu_model=name,
        cpu_flags=flags,
        cores_physical=psutil.cpu_count(logical=False),
        cores_logical=psutil.cpu_count(logical=True),
        ram_gb=round(psutil.virtual_memory().total / 2**30, 1),
        tool_version=__version__,
        libraries=deps.library_versions(),
        gpus=(found_gpus := gpus()),
        device_facts={**_device_facts(),
                      "executable": sys.executable, **_cuda_facts(found_gpus), **(extra_facts or {})},
    )


def _cuda_facts(found: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    """CUDA runtime / cuDNN versions (through torch, imported only when a GPU is present)."""
    if not found:
        return {}
    from .gpu import cuda_versions

    return cuda_versions()


def _device_facts() -> dict[str, Any]:
    """Jetson / Raspberry Pi / Coral / CPU governor facts (devices.py); absent-tolerant."""
    from . import devices

    try:
        return devices.collect()
    except Exception as e:  # a probe never takes the run down
        return {"governor": None, "device_probe_error": f"{type(e).__name__}: {e}"}


def _os_release() -> str:
    text = _read("/etc/os-release") or ""
    for line in text.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return platform.version()
