"""What a CPU's int8 kernels do: the instruction-set facts that change int8 results.

Read from the CPU's flags (``env.cpu_info``), following how the runtimes pick their int8
kernels (ONNX Runtime's MLAS dispatch in ``mlas/lib/platform.cpp``; oneDNN, under OpenVINO,
names its kernel in each layer's ``primitiveType``, which the OpenVINO runner reads instead):

* x86-64 without VNNI (AVX2, AVX-512 BW): the uint8 x int8 dot product is ``VPMADDUBSW``,
  which adds each pair of u8*s8 products into a *saturating* int16 (255 * 127 * 2 = 64770 >
  32767), so large activations times large weights are clamped. ONNX Runtime's quantization
  documentation names the remedies: ``reduce_range`` (7-bit weights: 255 * 64 * 2 = 32640 fits)
  or another format.
* x86-64 with AVX-512 VNNI or AVX-VNNI: ``VPDPBUSD`` accumulates into int32: no saturation.
* x86-64 with AMX-INT8: ``TDPBUSD`` tiles, int32 accumulation: no saturation (ONNX Runtime's
  U8S8 GEMM uses AMX where the OS enables it).
* AArch64: ``SDOT``/``UDOT`` (asimddp) or ``SMMLA`` (i8mm) accumulate into int32; plain NEON
  widens to 16 bits before accumulating (no saturating pair sums). The flags are the ``Features``
  of /proc/cpuinfo, or, where that file is not an Arm one (user-mode emulation shows the host's),
  what the CPU reports through the auxiliary vector (host/arm.py).
* 32-bit Arm (armv7l, e.g. Raspberry Pi OS armhf on a Pi 4): NEON (``neon``), widening multiplies.

On x86 ONNX Runtime runs an S8S8 file as U8S8 too (its QDQ transformer shifts int8 activations
to uint8 before fusing), so both schemes meet the saturating instruction there: measured on an
AVX2-only EPYC, LeNet-5's worst-sample cosine was 0.967 (U8S8) and 0.869 (S8S8) with 8-bit
weights, 0.9998 with 7-bit weights (docs/onnx-precision.md). The rows say which scheme executed
and what this CPU does with it.
"""

from __future__ import annotations

import platform
from dataclasses import asdict, dataclass

from infer_compare.catalog.device_kinds import read_text
from infer_compare.host import arm

# x86-64 int8 dot-product paths, best first: (flag, short name, instruction, saturates)
_X86 = (
    ("amx_int8", "AMX-INT8", "TDPBUSD tiles, int32 accumulation", False),
    ("avx512_vnni", "AVX-512 VNNI", "VPDPBUSD, int32 accumulation", False),
    ("avx_vnni", "AVX-VNNI", "VPDPBUSD (VEX), int32 accumulation", False),
    ("avx512bw", "AVX-512 (no VNNI)", "VPMADDUBSW: u8*s8 pairs summed in saturating int16", True),
    ("avx2", "AVX2 (no VNNI)", "VPMADDUBSW: u8*s8 pairs summed in saturating int16", True),
)
_ARM = (
    ("i8mm", "NEON I8MM", "SMMLA/UMMLA, int32 accumulation", False),
    ("asimddp", "NEON dot product", "SDOT/UDOT, int32 accumulation", False),
    ("asimd", "NEON", "widening multiplies, int32 accumulation", False),
)
_ARM32 = (
    ("asimddp", "NEON dot product (AArch32)", "VSDOT/VUDOT, int32 accumulation", False),
    ("neon", "NEON (AArch32)", "widening multiplies, int32 accumulation", False),
)


@dataclass(frozen=True)
class CpuInt8:
    """The int8 path of one CPU, as its flags say."""

    arch: str  # x86_64, aarch64, ...
    isa: str  # the short name of the int8 dot-product path ("AVX2 (no VNNI)", "AVX-512 VNNI", ...)
    instruction: str  # how it multiplies and accumulates
    u8s8_saturates: bool  # uint8 x int8 (full 8-bit weights) can saturate in int16
    flags: tuple[str, ...]  # the flags that decided it

    def ort_kernel(self, scheme: str, weight_bits: int) -> str:
        """What ONNX Runtime's integer kernels do with a file of ``scheme`` and ``weight_bits`` here."""
        if self.arch != "x86_64":
            return f"{self.isa}: {self.instruction}"
        if scheme == "S8S8":
            return f"{self.isa}: int8 activations kept (MLAS's S8S8 kernels, AVX-VNNI-INT8)"
        if self.u8s8_saturates:
            risk = ("7-bit weights keep the int16 pair sums from saturating" if weight_bits <= 7 else
                    "8-bit weights: pair sums can saturate (rebuild with --onnx-int8-reduce-range on)")
            return f"{self.isa}: {self.instruction}; {risk}"
        return f"{self.isa}: {self.instruction} (no saturation)"

    def to_dict(self) -> dict:
        return asdict(self)


def describe(machine: str | None = None, flags: tuple[str, ...] | set[str] | None = None) -> CpuInt8:
    """The int8 path of this CPU (or of ``machine`` with ``flags``, e.g. from another host's results)."""
    if flags is None:
        flags = _all_flags()
    machine = (machine or platform.machine()).lower()
    fl = set(flags)
    arch = _arch(machine)
    table = {"x86_64": _X86, "aarch64": _ARM, "arm": _ARM32}.get(arch, ())
    for flag, name, instr, sat in table:
        if flag in fl:
            decided = tuple(f for f, *_ in table if f in fl)
            return CpuInt8(arch, name, instr, sat, decided)
    return CpuInt8(arch, "unknown", "no SIMD int8 path known from the flags (reference kernels)", False, ())


def reduce_range_for(choice: str, scheme: str, cpu: CpuInt8) -> tuple[bool, str]:
    """Whether the int8 file gets 7-bit weights (``reduce_range``), and why, for ``choice`` auto/on/off."""
    if choice == "on":
        return True, "on (--onnx-int8-reduce-range on)"
    if choice == "off":
        return False, "off (--onnx-int8-reduce-range off)"
    if cpu.u8s8_saturates:
        how = ("whose U8S8 kernels" if scheme == "U8S8"
               else "where ONNX Runtime runs S8S8 as U8S8, whose kernels")
        return True, (f"auto: on, built for {cpu.isa}, {how} sum u8*s8 pairs in saturating int16 "
                      "(ONNX Runtime's quantization docs: reduce_range on CPUs without VNNI)")
    why = (f"{cpu.isa} accumulates in int32" if cpu.arch == "x86_64" and cpu.isa != "unknown"
           else f"{cpu.arch} int8 kernels do not saturate")
    return False, f"auto: off, built for {cpu.isa} ({why})"


def _arch(machine: str) -> str:
    if machine in ("x86_64", "amd64"):
        return "x86_64"
    if machine in ("aarch64", "arm64"):
        return "aarch64"
    return "arm" if machine.startswith("arm") else machine


def _all_flags() -> set[str]:
    """This CPU's flags: /proc/cpuinfo's; on Arm, where that file lists none of its own (under
    user-mode emulation it is the host's), what the CPU reports through the auxiliary vector."""
    text = read_text("/proc/cpuinfo") or ""
    if _arch(platform.machine().lower()) in ("aarch64", "arm"):
        cpu = arm.parse_cpuinfo(text)
        return set(cpu.features if cpu is not None and cpu.features else arm.hwcap_features())
    for line in text.splitlines():
        k, _, v = line.partition(":")
        if k.strip().lower() in ("flags", "features"):
            return set(v.split())
    return set()
