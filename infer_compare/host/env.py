"""Environment fingerprint: the machine, its libraries and device facts. Every probe is absent-tolerant and
imports no heavy library (no torch): GPUs come from NVML when nvidia-ml-py is
installed, else from the NVIDIA driver's /proc entries."""

from __future__ import annotations

import hashlib
import platform
import socket
import sys
from pathlib import Path
from typing import Any

from infer_compare.base.records import Environment
from infer_compare.base.version import __version__
from infer_compare.catalog import deps
from infer_compare.catalog.device_kinds import gpus
from infer_compare.catalog.device_kinds import read_text as _read
from infer_compare.host import arm
from infer_compare.host import boards as devices
from infer_compare.host.gpu import cuda_versions

CPU_FLAGS_OF_INTEREST = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_bf16", "avx512_fp16",
                         "avx512_vnni", "avx_vnni", "amx_bf16", "amx_int8", "amx_fp16", "neon", "asimd",
                         "asimddp", "i8mm", "fp16", "fphp", "asimdhp", "asimdfhm", "bf16", "sve", "sve2",
                         "svei8mm", "sme")


def cpu_info() -> tuple[str, tuple[str, ...]]:
    """(model name, flags of interest). /proc/cpuinfo first (fast); py-cpuinfo elsewhere. On Arm the
    cores named from their MIDR (host/arm.py), the features from the auxiliary vector where the
    file has none of its own (user-mode emulation), and "emulated <machine>" where it is an emulator."""
    text = _read("/proc/cpuinfo")
    if platform.machine().lower() in arm.ARM_MACHINES:
        return _arm_cpu_info(text or "")
    name, flags = "", set()
    if text:
        for line in text.splitlines():
            k, _, v = line.partition(":")
            k = k.strip().lower()
            if (not name and k in ("model name", "hardware", "cpu model", "processor")
                    and not v.strip().isdigit()):
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


def _arm_cpu_info(text: str, machine: str | None = None, environ: dict | None = None,
                  root: Path = Path("/")) -> tuple[str, tuple[str, ...]]:
    """(name, flags of interest) of an Arm machine from its /proc/cpuinfo ``text``."""
    machine = machine or platform.machine()
    cpu = arm.parse_cpuinfo(text)
    feats = set(cpu.features if cpu is not None and cpu.features else arm.hwcap_features())
    name = arm.cpu_name(cpu, text)
    emulated = arm.emulation(machine, text, environ, root)
    if emulated:
        name = f"emulated {machine} ({emulated})"
    return name or machine, tuple(f for f in CPU_FLAGS_OF_INTEREST if f in feats)


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
        device_facts={**_device_facts(), **_emulation_facts(),
                      "executable": sys.executable, **_cuda_facts(found_gpus), **(extra_facts or {})},
    )


def _emulation_facts() -> dict[str, Any]:
    """{"emulated": why} on an Arm machine that is an emulator (host/arm.py); {} elsewhere."""
    why = arm.emulation()
    return {"emulated": f"emulated {platform.machine()}: {why}"} if why else {}


def _cuda_facts(found: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    """CUDA runtime / cuDNN versions (through torch, imported only when a GPU is present)."""
    if not found:
        return {}

    return cuda_versions()


def _device_facts() -> dict[str, Any]:
    """Jetson / Raspberry Pi / Coral / CPU governor facts (host/boards.py); absent-tolerant."""
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
