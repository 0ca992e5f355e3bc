"""The bundle route on Arm, under emulation (issue 40): scripts/arm64-check builds a minimal arm64 Debian
sysroot, unpacks the registry's aarch64 wheels there, exports a LeNet-5 bundle here and runs it in the
guest through qemu-user. This test runs the script and checks its reports itself: the bundle verifies,
every ONNX Runtime and LiteRT row of the bundle ran with parity ok, and the rows and the report say
"emulated aarch64". It needs qemu-user-static and proot (.ci/run installs them) on x86-64 Linux, and
the network on its first run; without them it is skipped with the reason. The sysroot is kept in
$IC_ARM64_CACHE or ~/.cache/infer-compare-arm64 (a second run takes about a minute less)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, python_env

SCRIPT = ROOT / "scripts" / "arm64-check"
CPUS = ("cortex-a76", "cortex-a53")  # SDOT dot product (Pi 5, Jetson Orin class), plain NEON (Coral, Pi 3)
TOOLS = ("qemu-aarch64-static", "proot", "apt-get", "dpkg-deb")
EXIT_NO_NETWORK = 3  # the script's exit status when the mirror or the registry cannot be reached


def _missing_tools() -> list[str]:
    path = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin:/sbin"
    return [t for t in TOOLS if shutil.which(t, path=path) is None]


def _why_not_here() -> str:
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"the Arm check emulates aarch64 on x86-64 Linux (this is {sys.platform} {platform.machine()})"
    missing = _missing_tools()
    if missing:
        return f"{', '.join(missing)} not found (apt-get install qemu-user-static proot; .ci/run does)"
    return ""


def _emulated(text: str) -> bool:
    return text.startswith("emulated aarch64")


def _check_cpu(out: Path, cpu: str, want: set[tuple[str, str]]) -> None:
    verify = (out / cpu / "verify.txt").read_text()
    assert "bundle /bundle: ok" in verify and "sha256 verified" in verify, verify
    rep = json.loads((out / cpu / "run" / "results.json").read_text())
    assert _emulated(rep["environment"]["cpu_model"]), rep["environment"]["cpu_model"]
    assert any("emulator" in w for w in rep["warnings"]), rep["warnings"]
    rows = {(r["format"], r["precision"]): r for r in rep["rows"]
            if r["backend"] in ("onnxruntime", "tflite") and r["device"] == "cpu"}
    assert set(rows) == want, f"{cpu}: rows {sorted(rows)}, bundle {sorted(want)}"
    for (fmt, prec), r in sorted(rows.items()):
        assert r["status"] == "ok", f"{cpu} {fmt} {prec}: {r['status']} {r['reason']}"
        assert r["parity"]["judged"] and r["parity"]["passed"], \
            f"{cpu} {fmt} {prec}: {r['parity']['failures']}"
        assert any(_emulated(n) for n in r["notes"]), f"{cpu} {fmt} {prec}: notes {r['notes']}"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_bundle_route_on_emulated_aarch64(tmp_path, cache_dir):
    why = _why_not_here()
    if why:
        pytest.skip(why)
    out = tmp_path / "arm64"
    cmd = [str(SCRIPT), "--python", sys.executable, "--cpu", ",".join(CPUS), "--output", str(out)]
    proc = subprocess.run(cmd, env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=1700)
    if proc.returncode == EXIT_NO_NETWORK:
        pytest.skip(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stdout[-6000:]
    summary = proc.stdout[proc.stdout.rindex("== arm64-check:"):]
    print(summary)  # its timings, per phase, in the test log (pytest -s, or -rP)
    bundle = Path(os.environ.get("IC_ARM64_CACHE", Path.home() / ".cache" / "infer-compare-arm64"))
    man = json.loads((bundle / "bundle-lenet5" / "manifest.json").read_text())
    want = {(a["format"], a["precision"]) for a in man["artifacts"]}
    assert want == {("onnx", "fp32"), ("onnx", "int8"), ("tflite", "fp32"), ("tflite", "int8")}, want
    for cpu in CPUS:
        _check_cpu(out, cpu, want)


def test_script_help():
    """--help works anywhere (no tools needed) and says what the exit statuses mean."""
    proc = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--cache DIR" in proc.stdout and "3 the network could not be reached" in proc.stdout
