"""THE device-kind table: one record per kind of device (cpu, cuda, edgetpu), the way
catalog/formats.py holds the formats: its default batch sizes, how its devices are found, the
reason a row gets when none is present, and how a device name of that kind is spelled.

Discovery is absent-tolerant and imports no heavy library: GPUs come from NVML when
nvidia-ml-py is installed, else from the NVIDIA driver's /proc entries; Coral Edge TPUs
from USB ids in sysfs or /dev/apex_*. host/env.py and host/boards.py use this module; it uses
neither.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infer_compare.base.errors import UsageError
from infer_compare.catalog import deps


def read_text(path: str) -> str | None:
    """A file's text, or None when it cannot be read (absent-tolerant probes)."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def visible(found: list[dict[str, Any]], cvd: str | None = None) -> list[dict[str, Any]]:
    """The GPUs this process's CUDA sees, in CUDA's order: ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs,
    as Ray and users set it) filters and orders NVML's list; each gets ``cuda`` (its ``cuda:N`` here)
    beside ``index`` (NVML's, the physical GPU). Unset: every GPU, cuda = index."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES") if cvd is None else cvd
    if cvd is None:
        return [{**g, "cuda": g["index"]} for g in found]
    out: list[dict[str, Any]] = []
    for item in (v.strip() for v in cvd.split(",")):
        hit = [g for g in found if item.isdigit() and g["index"] == int(item)
               or item and not item.isdigit() and str(g.get("uuid", "")).startswith(item)]
        if not hit or hit[0] in out:
            break  # CUDA stops at the first entry it cannot use
        out.append(hit[0])
    return [{**g, "cuda": i} for i, g in enumerate(out)]


def gpus() -> tuple[dict[str, Any], ...]:
    """NVIDIA GPUs this process's CUDA sees (``visible``): name, UUID, memory, driver, compute
    capability when NVML gives them; ``index`` is NVML's (physical), ``cuda`` the ``cuda:N`` here."""
    return tuple(visible(all_gpus()))


def all_gpus() -> list[dict[str, Any]]:
    """Every NVIDIA GPU of the host (NVML, else the driver's /proc entries), whatever CUDA_VISIBLE_DEVICES
    says."""
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
                    g: dict[str, Any] = {"index": i, "name": nm, "memory_mib": int(mem // 2**20),
                                         "driver": drv, "cuda_driver": cuda, "source": "nvml"}
                    try:
                        uid = pynvml.nvmlDeviceGetUUID(h)
                        g["uuid"] = uid.decode() if isinstance(uid, bytes) else uid
                    except Exception:
                        pass
                    try:
                        g["compute_capability"] = "{}.{}".format(
                            *pynvml.nvmlDeviceGetCudaComputeCapability(h))
                    except Exception:
                        pass
                    out.append(g)
            finally:
                pynvml.nvmlShutdown()
            return out
        except Exception:
            out = []
    for i, info in enumerate(sorted(glob.glob("/proc/driver/nvidia/gpus/*/information"))):
        text = read_text(info) or ""
        fields = dict((a.strip(), b.strip()) for a, _, b in (ln.partition(":") for ln in text.splitlines()))
        g = {"index": i, "name": fields.get("Model", "NVIDIA GPU"), "source": "/proc/driver/nvidia"}
        if fields.get("GPU UUID"):
            g["uuid"] = fields["GPU UUID"]
        out.append(g)
    ver = read_text("/proc/driver/nvidia/version")
    if ver and out:
        m = re.search(r"Kernel Module\s+([\d.]+)", ver)
        for g in out:
            g["driver"] = m.group(1) if m else None
    return out


def cuda_devices() -> list[str]:
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return []
    return [f"cuda:{g['cuda']}" for g in gpus()]


def edgetpu_devices() -> list[str]:
    """Coral accelerators: USB (ids 1a6e:089a before firmware load, 18d1:9302 after) or PCIe/M.2
    (/dev/apex_*)."""
    found = []
    for dev in glob.glob("/sys/bus/usb/devices/*"):
        vid, pid = read_text(os.path.join(dev, "idVendor")), read_text(os.path.join(dev, "idProduct"))
        if vid and pid and (vid.strip(), pid.strip()) in (("1a6e", "089a"), ("18d1", "9302")):
            found.append(f"edgetpu:usb:{len([f for f in found if 'usb' in f])}")
    for i, _ in enumerate(sorted(glob.glob("/dev/apex_*"))):
        found.append(f"edgetpu:pci:{i}")
    return found


@dataclass(frozen=True)
class DeviceKind:
    name: str
    title: str
    default_batch_sizes: tuple[int, ...]
    discover: Callable[[], list[str]]
    absent_reason: str  # the reason of a row whose device kind has no device here
    spelled: str  # how a device of this kind is named on the command line
    pattern: str  # regular expression a device name of this kind must match


def _cpu() -> list[str]:
    return ["cpu"]


DEVICE_KINDS: dict[str, DeviceKind] = {
    k.name: k
    for k in (
        DeviceKind("cpu", "CPU", (1, 8), _cpu, "no CPU (impossible)", "cpu", r"cpu"),
        DeviceKind("cuda", "NVIDIA GPU (CUDA)", (1, 32, 256), cuda_devices,
                   "no CUDA device found (NVML / NVIDIA driver)", "cuda, cuda:N", r"cuda(:\d+)?"),
        DeviceKind("edgetpu", "Coral Edge TPU", (1,), edgetpu_devices,
                   "no Coral Edge TPU found (USB 1a6e:089a / 18d1:9302, or /dev/apex_*)", "edgetpu",
                   r"edgetpu(:\w+(:\d+)?)?"),
    )
}


def kind_of(device: str) -> str:
    """'cuda:1' -> 'cuda'."""
    return device.split(":", 1)[0]


def check_device(device: str) -> str:
    """A device name the user gave, checked against the table (UsageError otherwise)."""
    k = DEVICE_KINDS.get(kind_of(device))
    if k is None or not re.fullmatch(k.pattern, device):
        spelled = ", ".join(x.spelled for x in DEVICE_KINDS.values())
        raise UsageError(f"unknown device '{device}'; use {spelled}")
    return device


def present() -> dict[str, list[str]]:
    """Device kind -> the devices present, in table order. The CPU is always present."""
    return {name: k.discover() for name, k in DEVICE_KINDS.items()}
