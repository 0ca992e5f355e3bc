"""Arm CPU facts (host/arm.py, host/cpu_int8.py, host/env.py) read from Arm /proc/cpuinfo texts of real
boards (tests/data/devices/cpuinfo/, sources in its README): the cores named from their MIDR, the int8
path from the features, the row labels that follow, and an emulator told from a board."""

from __future__ import annotations

from pathlib import Path

import pytest

from infer_compare.host import arm
from infer_compare.host.cpu_int8 import describe, reduce_range_for
from infer_compare.host.env import _arm_cpu_info

DATA = Path(__file__).parent / "data" / "devices" / "cpuinfo"
NOWHERE = DATA / "no-root"  # a root without /proc/sys/fs/binfmt_misc

BOARDS = [  # (file, name, int8 path, flags of interest)
    ("jetson-nano-a57.txt", "ARM Cortex-A57", "NEON", ("asimd",)),
    ("jetson-agx-xavier-carmel.txt", "NVIDIA Carmel", "NEON", ("asimd", "fphp", "asimdhp")),
    ("jetson-agx-orin-a78ae.txt", "ARM Cortex-A78AE", "NEON dot product",
     ("asimd", "asimddp", "fphp", "asimdhp")),
    ("imx8mq-a53.txt", "ARM Cortex-A53", "NEON", ("asimd",)),
    ("rpi4-a72-32bit.txt", "ARM Cortex-A72 (AArch32)", "NEON (AArch32)", ("neon",)),
    ("rpi5-a76.txt", "ARM Cortex-A76", "NEON dot product", ("asimd", "asimddp", "fphp", "asimdhp")),
    ("rk3588-a76-a55.txt", "ARM Cortex-A76 x4 + Cortex-A55 x4", "NEON dot product",
     ("asimd", "asimddp", "fphp", "asimdhp")),
    ("neoverse-n1.txt", "ARM Neoverse-N1", "NEON dot product", ("asimd", "asimddp", "fphp", "asimdhp")),
    ("graviton3-neoverse-v1.txt", "ARM Neoverse-V1", "NEON dot product",
     ("asimd", "asimddp", "fphp", "asimdhp", "asimdfhm", "sve")),
    ("dimensity8400-a725.txt", "ARM Cortex-A725", "NEON I8MM",
     ("asimd", "asimddp", "i8mm", "fphp", "asimdhp", "asimdfhm", "bf16", "sve", "sve2", "svei8mm")),
]


@pytest.mark.parametrize("fname,name,isa,flags", BOARDS)
def test_each_board_is_named_and_its_int8_path_read_from_its_features(fname, name, isa, flags):
    text = (DATA / fname).read_text()
    cpu = arm.parse_cpuinfo(text)
    assert cpu is not None and cpu.name == name
    machine = "armv7l" if cpu.aarch32 else "aarch64"
    got_name, got_flags = _arm_cpu_info(text, machine, environ={}, root=NOWHERE)
    assert (got_name, got_flags) == (name, flags)
    int8 = describe(machine, got_flags)
    assert int8.isa == isa and int8.u8s8_saturates is False
    # the label an ONNX Runtime int8 row carries there, and the recipe an int8 file built there gets
    assert int8.ort_kernel("S8S8", 8).startswith(f"{isa}: ")
    assert "can saturate" not in int8.ort_kernel("U8S8", 8)
    rr, why = reduce_range_for("auto", "U8S8", int8)
    assert rr is False and why.startswith(f"auto: off, built for {isa}") and "do not saturate" in why


def test_a_board_is_not_an_emulator():
    for fname, *_ in BOARDS:
        assert arm.emulation("aarch64", (DATA / fname).read_text(), {}, NOWHERE) is None


def test_the_raspberry_pi_model_line_is_kept():
    assert arm.parse_cpuinfo((DATA / "rpi5-a76.txt").read_text()).board == "Raspberry Pi 5 Model B Rev 1.0"
    assert arm.parse_cpuinfo((DATA / "jetson-nano-a57.txt").read_text()).board == ""


def test_every_processor_counts_and_only_common_features_are_kept():
    text = (DATA / "rk3588-a76-a55.txt").read_text()
    cpu = arm.parse_cpuinfo(text)
    assert cpu.cores.count("Cortex-A55") == 4 and cpu.cores.count("Cortex-A76") == 4
    # a core that lacks a feature removes it: the runtimes dispatch on what every core has
    first, rest = text.split("\n\n", 1)
    narrowed = first.replace(" asimddp", "") + "\n\n" + rest
    assert "asimddp" not in arm.parse_cpuinfo(narrowed).features
    assert describe("aarch64", arm.parse_cpuinfo(narrowed).features).isa == "NEON"


def test_an_unknown_core_keeps_the_files_own_name():
    text = (DATA / "jetson-nano-a57.txt").read_text().replace("0xd07", "0xfff")
    cpu = arm.parse_cpuinfo(text)
    assert cpu.name == "ARM unknown core"
    text = (DATA / "jetson-agx-xavier-carmel.txt").read_text().replace("CPU implementer\t: 0x4e\n", "")
    assert arm.cpu_name(arm.parse_cpuinfo(text), text) == "ARMv8 Processor rev 0 (v8l)"


def test_an_x86_cpuinfo_is_not_arm_and_on_an_arm_machine_means_emulation():
    x86 = (DATA / "x86-host-epyc.txt").read_text()
    assert arm.parse_cpuinfo(x86) is None
    why = arm.emulation("aarch64", x86, {}, NOWHERE)
    assert why is not None and "x86 CPU (AMD EPYC)" in why
    assert arm.emulation("x86_64", x86, {}, NOWHERE) is None
    name, _flags = _arm_cpu_info(x86, "aarch64", environ={}, root=NOWHERE)
    assert name.startswith("emulated aarch64 (user-mode emulation")


def test_the_launcher_says_emulation_and_binfmt_misc_hints_at_it(tmp_path):
    board = (DATA / "rpi5-a76.txt").read_text()
    said = {arm.EMULATION_ENV: "qemu-aarch64-static 7.2 user mode under proot"}
    assert arm.emulation("aarch64", board, said, NOWHERE) == said[arm.EMULATION_ENV]
    name, flags = _arm_cpu_info(board, "aarch64", environ=said, root=NOWHERE)
    assert name == "emulated aarch64 (qemu-aarch64-static 7.2 user mode under proot)" and "asimddp" in flags
    binfmt = tmp_path / "proc/sys/fs/binfmt_misc"
    binfmt.mkdir(parents=True)
    (binfmt / "qemu-aarch64").write_text("enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\n")
    assert "qemu-aarch64" in arm.emulation("aarch64", board, {}, tmp_path)
    (binfmt / "qemu-aarch64").write_text("disabled\n")
    assert arm.emulation("aarch64", board, {}, tmp_path) is None


def test_hwcap_bits_are_named_as_proc_cpuinfo_names_them():
    # AT_HWCAP: fp=0 asimd=1 ... asimddp=20 sve=22; AT_HWCAP2: sve2=1 i8mm=13 bf16=14
    hw = (1 << 0) | (1 << 1) | (1 << 20) | (1 << 22)
    hw2 = (1 << 1) | (1 << 13) | (1 << 14)
    assert arm.names_of(hw, hw2) == ("fp", "asimd", "asimddp", "sve", "sve2", "i8mm", "bf16")
    text = arm.cpuinfo_text(arm.names_of(hw, hw2), 2)
    cpu = arm.parse_cpuinfo(text)
    assert cpu.features == ("fp", "asimd", "asimddp", "sve", "sve2", "i8mm", "bf16") and len(cpu.cores) == 2
    assert describe("aarch64", cpu.features).isa == "NEON I8MM"
    # with the MIDR qemu's cortex-a76 reports (r4p1), the guest's file names the core as a board's does
    cpu = arm.parse_cpuinfo(arm.cpuinfo_text(("fp", "asimd", "asimddp"), 4, 0x414FD0B1))
    assert cpu.name == "ARM Cortex-A76" and len(cpu.cores) == 4
    assert "CPU variant\t: 0x4\nCPU part\t: 0xd0b\nCPU revision\t: 1" in arm.cpuinfo_text((), 1, 0x414FD0B1)


def test_an_emulated_machine_warns_that_its_timings_are_not_a_boards():
    from infer_compare.host.boards import measurement_warnings

    (w,) = measurement_warnings({"emulated": "emulated aarch64: qemu-user"})
    assert "not any Arm board's" in w
    assert measurement_warnings({"governor": "performance"}) == []
