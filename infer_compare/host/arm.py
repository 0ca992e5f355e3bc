"""Arm CPU facts: the cores and SIMD features of an Arm /proc/cpuinfo, the same features from the
auxiliary vector where /proc/cpuinfo has none, and whether this "Arm" machine is an emulator.

An arm64 /proc/cpuinfo names no model: each processor has ``Features`` (the kernel's hwcap names:
``asimd`` is NEON, ``asimddp`` the SDOT/UDOT dot product, ``i8mm`` the SMMLA/UMMLA int8 matrix
multiply, ``sve``/``sve2``...) and its MIDR fields (``CPU implementer``, ``CPU part``), which name
the core (0x41/0xd42 is an Arm Cortex-A78AE, a Jetson Orin's). A 32-bit kernel (Raspberry Pi OS
armhf on a Pi 4) prints ``model name: ARMv7 Processor`` and ``neon`` instead of ``asimd``.

Under user-mode emulation (qemu-aarch64, binfmt_misc or proot) the kernel is the host's: its
/proc/cpuinfo describes an x86 CPU, while the auxiliary vector (``getauxval(AT_HWCAP)``) carries
what the emulated CPU reports. ``emulation()`` says so, and the rows measured there say "emulated
aarch64": their timings are the emulator's, never a board's.
"""

from __future__ import annotations

import os
import platform
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

# MIDR implementer -> vendor, (implementer, part) -> core, as the Linux kernel and util-linux's
# lscpu name them
IMPLEMENTERS = {0x41: "ARM", 0x42: "Broadcom", 0x43: "Cavium", 0x46: "Fujitsu", 0x48: "HiSilicon",
                0x4E: "NVIDIA", 0x51: "Qualcomm", 0x61: "Apple", 0x6D: "Microsoft", 0x70: "Phytium",
                0xC0: "Ampere"}
PARTS = {
    (0x41, 0xC07): "Cortex-A7", (0x41, 0xC09): "Cortex-A9", (0x41, 0xC0F): "Cortex-A15",
    (0x41, 0xD03): "Cortex-A53", (0x41, 0xD04): "Cortex-A35", (0x41, 0xD05): "Cortex-A55",
    (0x41, 0xD07): "Cortex-A57", (0x41, 0xD08): "Cortex-A72", (0x41, 0xD09): "Cortex-A73",
    (0x41, 0xD0A): "Cortex-A75", (0x41, 0xD0B): "Cortex-A76", (0x41, 0xD0C): "Neoverse-N1",
    (0x41, 0xD0D): "Cortex-A77", (0x41, 0xD40): "Neoverse-V1", (0x41, 0xD41): "Cortex-A78",
    (0x41, 0xD42): "Cortex-A78AE", (0x41, 0xD44): "Cortex-X1", (0x41, 0xD46): "Cortex-A510",
    (0x41, 0xD47): "Cortex-A710", (0x41, 0xD48): "Cortex-X2", (0x41, 0xD49): "Neoverse-N2",
    (0x41, 0xD4B): "Cortex-A78C", (0x41, 0xD4D): "Cortex-A715", (0x41, 0xD4E): "Cortex-X3",
    (0x41, 0xD4F): "Neoverse-V2", (0x41, 0xD80): "Cortex-A520", (0x41, 0xD81): "Cortex-A720",
    (0x41, 0xD82): "Cortex-X4", (0x41, 0xD84): "Neoverse-V3", (0x41, 0xD87): "Cortex-A725",
    (0x41, 0xD8E): "Neoverse-N3",
    (0x4E, 0x003): "Denver 2", (0x4E, 0x004): "Carmel",
    (0xC0, 0xAC3): "Ampere-1", (0xC0, 0xAC4): "Ampere-1a",
}

# AT_HWCAP / AT_HWCAP2 bit -> the name /proc/cpuinfo prints (Linux arch/arm64/include/uapi/asm/hwcap.h)
HWCAP = ("fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc "
         "dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg").split()
HWCAP2 = ("dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm svef32mm svef64mm "
          "svebf16 i8mm bf16 dgh rng bti mte ecv afp rpres mte3 sme smei16i64 smef64f64 smei8i32 smef16f32 "
          "smeb16f32 smef32f32 smefa64 wfxt ebf16 sveebf16").split()
AT_HWCAP, AT_HWCAP2 = 16, 26

ARM_MACHINES = ("aarch64", "arm64", "armv7l", "armv8l", "armv6l")
# set by whoever runs the tool under an emulator (scripts/arm64-check)
EMULATION_ENV = "INFER_COMPARE_EMULATED"


@dataclass(frozen=True)
class ArmCpu:
    """The processors of an Arm /proc/cpuinfo."""

    cores: tuple[str, ...]  # one name per processor, e.g. "Cortex-A78AE" ("" when the MIDR is not known)
    vendors: tuple[str, ...]
    features: tuple[str, ...]  # the features every processor lists, in the kernel's order
    aarch32: bool  # a 32-bit kernel (ARMv7 "model name", "neon" rather than "asimd")
    board: str = ""  # the "Model" line a Raspberry Pi kernel adds

    @property
    def name(self) -> str:
        """"ARM Cortex-A78AE" or, on a big.LITTLE SoC, "ARM Cortex-A76 x4 + Cortex-A55 x4"."""
        counts = Counter(c or "unknown core" for c in self.cores)
        if not counts:
            return ""
        vendor = " / ".join(dict.fromkeys(v for v in self.vendors if v))
        body = (next(iter(counts)) if len(counts) == 1 else
                " + ".join(f"{c} x{n}"
                           for c, n in sorted(counts.items(), key=lambda kv: (-_rank(kv[0]), kv[0]))))
        return f"{vendor} {body}".strip() + (" (AArch32)" if self.aarch32 else "")


def _rank(core: str) -> int:
    """Big cores first in a name: the higher the Cortex-A number, the bigger (X and Neoverse above)."""
    digits = "".join(ch for ch in core if ch.isdigit())
    return 10_000 if core.startswith(("Cortex-X", "Neoverse")) else int(digits or 0)


def _blocks(text: str) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for block in (text or "").split("\n\n"):
        fields = {}
        for line in block.splitlines():
            k, sep, v = line.partition(":")
            if sep:
                fields.setdefault(k.strip().lower(), v.strip())
        if fields:
            out.append(fields)
    return out


def cpu_name(cpu: ArmCpu | None, text: str) -> str:
    """The cores by name ("ARM Cortex-A78AE"); else the file's own "model name"/"Hardware" line; else ""."""
    if cpu is not None and any(cpu.cores):
        return cpu.name
    for b in _blocks(text):
        for key in ("model name", "hardware"):
            if b.get(key):
                return b[key]
    return ""


def _hex(v: str | None) -> int | None:
    try:
        return int(v, 16) if v else None
    except ValueError:
        return None


def parse_cpuinfo(text: str) -> ArmCpu | None:
    """The Arm processors of a /proc/cpuinfo text; None when it is not an Arm one (an x86 text)."""
    blocks = _blocks(text)
    procs = [b for b in blocks if "processor" in b and ("features" in b or "cpu implementer" in b)]
    if not procs or any("vendor_id" in b or "flags" in b for b in blocks):
        return None
    cores, vendors, feats = [], [], None
    for b in procs:
        impl, part = _hex(b.get("cpu implementer")), _hex(b.get("cpu part"))
        cores.append(PARTS.get((impl, part), "") if impl is not None else "")
        vendors.append(IMPLEMENTERS.get(impl, f"implementer {b['cpu implementer']}")
                       if impl is not None else "")
        mine = b.get("features", "").split()
        feats = mine if feats is None else [f for f in feats if f in set(mine)]
    extra = {k: v for b in blocks if "processor" not in b for k, v in b.items()}
    aarch32 = any(b.get("cpu architecture") == "7" or "(v7l)" in b.get("model name", "") for b in procs)
    return ArmCpu(tuple(cores), tuple(vendors), tuple(feats or ()), aarch32, extra.get("model", ""))


def hwcap_features() -> tuple[str, ...]:
    """The features the (possibly emulated) CPU reports through the auxiliary vector, named as in
    /proc/cpuinfo; () where there is none (not Linux on aarch64, no getauxval)."""
    if platform.machine().lower() not in ("aarch64", "arm64") or not hasattr(os, "uname"):
        return ()
    try:
        import ctypes

        getauxval = ctypes.CDLL(None).getauxval
        getauxval.restype, getauxval.argtypes = ctypes.c_ulong, [ctypes.c_ulong]
        words = (getauxval(AT_HWCAP), getauxval(AT_HWCAP2))
    except (OSError, AttributeError):
        return ()
    return names_of(*words)


def names_of(hwcap: int, hwcap2: int) -> tuple[str, ...]:
    """The /proc/cpuinfo names of the bits set in AT_HWCAP and AT_HWCAP2."""
    return tuple(n for i, n in enumerate(HWCAP) if hwcap >> i & 1) + \
        tuple(n for i, n in enumerate(HWCAP2) if hwcap2 >> i & 1)


def cpuinfo_text(features: tuple[str, ...], n: int, midr: int | None = None) -> str:
    """An arm64 /proc/cpuinfo of ``n`` processors with ``features`` and, when given, the MIDR fields
    the kernel prints: what scripts/arm64-check shows the guest, where the kernel's own file is the host's."""
    ids = "CPU architecture: 8\n"
    if midr is not None:
        ids = (f"CPU implementer\t: 0x{midr >> 24 & 0xFF:02x}\nCPU architecture: 8\n"
               f"CPU variant\t: 0x{midr >> 20 & 0xF:x}\n"
               f"CPU part\t: 0x{midr >> 4 & 0xFFF:03x}\nCPU revision\t: {midr & 0xF}\n")
    feats = " ".join(features)
    return "".join(f"processor\t: {i}\nFeatures\t: {feats}\n{ids}\n" for i in range(n))


def midr_el1() -> int | None:
    """MIDR_EL1 as this CPU reports it to a user program (``mrs x0, midr_el1``, which Linux, and qemu-user
    after it, emulate where the ``cpuid`` feature is listed); None elsewhere. For the guest of
    scripts/arm64-check: on a board, /proc/cpuinfo has the MIDR fields already."""
    if "cpuid" not in hwcap_features():
        return None
    try:
        import ctypes
        import mmap

        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, AttributeError, ValueError):  # W+X refused (a hardened kernel), not Linux
        return None
    page.write(bytes.fromhex("000038d5" "c0035fd6"))  # mrs x0, midr_el1; ret
    cell = ctypes.c_char.from_buffer(page)
    start = ctypes.addressof(cell)
    try:  # the instruction cache sees the two words only after this (libgcc's __clear_cache)
        ctypes.CDLL("libgcc_s.so.1").__clear_cache(ctypes.c_void_p(start), ctypes.c_void_p(start + 8))
        return int(ctypes.CFUNCTYPE(ctypes.c_uint64)(start)())
    except (OSError, AttributeError):
        return None
    finally:
        del cell
        page.close()


def emulation(machine: str | None = None, cpuinfo: str | None = None, environ: dict | None = None,
              root: Path = Path("/")) -> str | None:
    """Why this Arm machine is an emulator (qemu-user and the like), or None: the variable
    INFER_COMPARE_EMULATED (the launcher says so), a kernel /proc/cpuinfo that describes an x86 CPU,
    or a qemu-aarch64 handler registered with binfmt_misc. None on a machine that is not Arm."""
    machine = (machine or platform.machine()).lower()
    if machine not in ARM_MACHINES:
        return None
    said = (os.environ if environ is None else environ).get(EMULATION_ENV, "").strip()
    if said:
        return said
    if cpuinfo is None:
        cpuinfo = _read(root / "proc/cpuinfo")
    for b in _blocks(cpuinfo):
        if "vendor_id" in b or "flags" in b:
            host = b.get("model name") or b.get("vendor_id", "an x86 CPU")
            return f"user-mode emulation: the kernel's /proc/cpuinfo describes an x86 CPU ({host})"
    for name in ("qemu-aarch64", "qemu-arm"):
        if _read(root / "proc/sys/fs/binfmt_misc" / name).startswith("enabled"):
            return f"user-mode emulation, most likely: binfmt_misc runs Arm programs through {name} here"
    return None


def row_note() -> str | None:
    """The note every row measured on an emulator carries ("emulated aarch64: ..."); None elsewhere."""
    why = emulation()
    return (f"emulated {platform.machine()}: {why}; the timing is the emulator's, not a board's"
            if why else None)


def _read(p: Path) -> str:
    try:
        return p.read_text(errors="replace")
    except OSError:
        return ""
