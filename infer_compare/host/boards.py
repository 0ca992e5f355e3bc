"""Device facts for edge boards: Jetson, Coral, Raspberry Pi, the CPU governor.

Every probe is absent-tolerant: a missing file or command gives ``None`` (or an
empty value), never an exception. Files are read under ``root`` (``/`` by default)
and external commands go through ``run`` (argument list, timeout, never raises), so
tests feed the probes sample files and canned command output.

    collect()                     -> dict for Environment.device_facts
    measurement_warnings(facts)   -> warnings for Report.warnings (unlocked Jetson clocks, an emulator)
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infer_compare.catalog import device_kinds

# (returncode, stdout + stderr) or None when the command is absent, timed out or failed to start
CommandRunner = Callable[[list[str], float], "tuple[int, str] | None"]

COMMAND_TIMEOUT_S = 5.0

# Jetson Linux (L4T) release -> JetPack, from NVIDIA's JetPack archive. Exact releases
# first; a release not listed maps to its family (R36 -> 6.x, R35 -> 5.x, R32 -> 4.x).
L4T_TO_JETPACK = {
    "38.2": "7.0",
    "36.4.4": "6.2.1",
    "36.4.3": "6.2",
    "36.4.0": "6.1",
    "36.4": "6.1",
    "36.3.0": "6.0",
    "36.3": "6.0",
    "36.2.0": "6.0 DP",
    "36.2": "6.0 DP",
    "35.6.1": "5.1.5",
    "35.6.0": "5.1.4",
    "35.5.0": "5.1.3",
    "35.4.1": "5.1.2",
    "35.3.1": "5.1.1",
    "35.2.1": "5.1",
    "35.1.0": "5.0.2",
    "32.7.6": "4.6.6",
    "32.7.5": "4.6.5",
    "32.7.4": "4.6.4",
    "32.7.3": "4.6.3",
    "32.7.2": "4.6.2",
    "32.7.1": "4.6.1",
    "32.6.1": "4.6",
}
L4T_FAMILY = {"38": "7.x", "36": "6.x", "35": "5.x", "34": "5.0 DP", "32": "4.x"}


def run_command(args: list[str], timeout: float = COMMAND_TIMEOUT_S) -> tuple[int, str] | None:
    """Run ``args`` (no shell) with a timeout; (returncode, stdout+stderr) or None. Never raises."""
    if not args or shutil.which(args[0]) is None:
        return None
    try:
        p = subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return p.returncode, (p.stdout or "") + (p.stderr or "")


def _read(root: Path, rel: str) -> str | None:
    try:
        with open(root / rel.lstrip("/"), "rb") as f:
            data = f.read(65536)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace")


def device_tree_model(root: Path = Path("/")) -> str | None:
    """The board's model string from the device tree (NUL-terminated there)."""
    for rel in ("proc/device-tree/model", "sys/firmware/devicetree/base/model"):
        text = _read(root, rel)
        if text is not None:
            text = text.replace("\x00", "").strip()
            if text:
                return text
    return None


def parse_nv_tegra_release(text: str) -> dict[str, Any] | None:
    """'# R36 (release), REVISION: 4.3, GCID: ..., BOARD: generic, EABI: aarch64, DATE: ...'
    -> {'l4t': '36.4.3', 'jetpack': '6.2', ...}; None when the line is not there."""
    m = re.search(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*([\d.]+)", text or "")
    if not m:
        return None
    major, rev = m.group(1), m.group(2).rstrip(".")
    l4t = f"{major}.{rev}"
    out: dict[str, Any] = {"l4t": l4t}
    for key in ("GCID", "BOARD", "EABI", "DATE"):
        km = re.search(rf"{key}:\s*([^,\n]+)", text)
        if km:
            out[key.lower()] = km.group(1).strip()
    jp = L4T_TO_JETPACK.get(l4t)
    if jp is None:
        parts = l4t.split(".")
        jp = L4T_TO_JETPACK.get(".".join(parts[:2])) if len(parts) > 2 else L4T_TO_JETPACK.get(l4t + ".0")
    if jp is not None:
        out["jetpack"] = jp
    elif major in L4T_FAMILY:
        out["jetpack"] = L4T_FAMILY[major]
        out["jetpack_note"] = f"L4T {l4t} is not in this tool's table; JetPack family {L4T_FAMILY[major]}"
    return out


def l4t_release(root: Path = Path("/")) -> dict[str, Any] | None:
    text = _read(root, "etc/nv_tegra_release")
    return parse_nv_tegra_release(text) if text else None


def parse_nvpmodel(text: str) -> dict[str, Any] | None:
    """``nvpmodel -q`` output ('NV Power Mode: MAXN' then the mode id) -> {'name', 'id'}."""
    m = re.search(r"NV Power Mode\s*:\s*(\S[^\n]*)", text or "")
    if not m:
        return None
    out: dict[str, Any] = {"name": m.group(1).strip()}
    for line in text[m.end():].splitlines():
        if line.strip().isdigit():
            out["id"] = int(line.strip())
            break
    return out


_FREQ = re.compile(r"(MinFreq|MaxFreq|CurrentFreq)=(\d+)")


def parse_jetson_clocks(text: str) -> dict[str, Any] | None:
    """``jetson_clocks --show`` -> {'locked': bool, 'clocks': {...}, 'below_max': [...]}.

    Locked means every online CPU core, the GPU and the EMC (memory) run at their
    maximum frequency, which is what ``jetson_clocks`` sets; None when no clock line
    is found (e.g. 'must be root')."""
    clocks: dict[str, dict[str, int]] = {}
    for line in (text or "").splitlines():
        s = line.strip()
        m = re.match(r"(cpu\d+|GPU|EMC)\b[:\s]", s)
        if not m:
            continue
        if m.group(1).startswith("cpu") and "Online=0" in s:
            continue
        f = {k: int(v) for k, v in _FREQ.findall(s)}
        if "MaxFreq" in f and "CurrentFreq" in f:
            clocks[m.group(1)] = f
    if not clocks:
        return None
    below = [f"{k} {v['CurrentFreq']}/{v['MaxFreq']}" for k, v in clocks.items()
             if v["CurrentFreq"] < v["MaxFreq"]]
    out: dict[str, Any] = {"locked": not below, "source": "jetson_clocks --show",
                           "clocks": {k: v for k, v in clocks.items()
                                      if not k.startswith("cpu") or k == "cpu0"}}
    if below:
        out["below_max"] = below[:8] + ([f"... {len(below) - 8} more"] if len(below) > 8 else [])
    pm = parse_nvpmodel(text or "")
    if pm:
        out["power_mode"] = pm["name"]
    return out


def clocks_from_sysfs(root: Path = Path("/")) -> dict[str, Any] | None:
    """Fallback without root: ``jetson_clocks`` pins min = max on every CPU and on the
    GPU's devfreq node; compare them. None when the files are not there."""
    items: dict[str, tuple[int, int, int | None]] = {}
    for d in sorted(glob.glob(str(root / "sys/devices/system/cpu/cpu[0-9]*/cpufreq"))):
        name = Path(d).parent.name
        lo, hi = _read_int(Path(d) / "scaling_min_freq"), _read_int(Path(d) / "scaling_max_freq")
        if lo is not None and hi is not None:
            items[name] = (lo, hi, _read_int(Path(d) / "scaling_cur_freq"))
    gpu_nodes = [p for p in sorted(glob.glob(str(root / "sys/class/devfreq/*")))
                 if re.search(r"(gpu|ga10b|gv11b|gp10b|gb10b|gm20b)", os.path.basename(p))]
    for p in gpu_nodes[:1]:
        lo, hi = _read_int(Path(p) / "min_freq"), _read_int(Path(p) / "max_freq")
        if lo is not None and hi is not None:
            items["GPU"] = (lo, hi, _read_int(Path(p) / "cur_freq"))
    if not items:
        return None
    below = [f"{k} min {lo} < max {hi}" for k, (lo, hi, _) in items.items() if lo < hi]
    out: dict[str, Any] = {"locked": not below, "source": "sysfs min/max frequencies"}
    if below:
        out["below_max"] = below[:8] + ([f"... {len(below) - 8} more"] if len(below) > 8 else [])
    return out


def _read_int(p: Path) -> int | None:
    try:
        return int(p.read_text().strip())
    except (OSError, ValueError):
        return None


def cpu_governors(root: Path = Path("/")) -> dict[str, list[str]]:
    """governor -> CPUs using it, from /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor."""
    out: dict[str, list[str]] = {}
    paths = glob.glob(str(root / "sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"))
    for p in sorted(paths, key=lambda q: int(re.search(r"cpu(\d+)", q).group(1))):  # type: ignore[union-attr]
        g = _read(Path("/"), p)
        if g and g.strip():
            out.setdefault(g.strip(), []).append(Path(p).parent.parent.name)
    return out


def governor_summary(govs: dict[str, list[str]]) -> str | None:
    if not govs:
        return None
    if len(govs) == 1:
        return next(iter(govs))
    return ", ".join(f"{g} ({len(c)} CPUs)" for g, c in govs.items())


def is_jetson(model: str | None, release: dict[str, Any] | None) -> bool:
    return release is not None or bool(model and ("jetson" in model.lower() or "nvidia" in model.lower()))


def jetson_facts(root: Path = Path("/"), run: CommandRunner = run_command) -> dict[str, Any] | None:
    """Model, L4T/JetPack release, power mode, clock state; None when not a Jetson."""
    model = device_tree_model(root)
    rel = l4t_release(root)
    if not is_jetson(model, rel):
        return None
    out: dict[str, Any] = {"model": model}
    if rel:
        out.update(rel)
    r = run(["nvpmodel", "-q"], COMMAND_TIMEOUT_S)
    pm = parse_nvpmodel(r[1]) if r else None
    out["power_mode"] = pm["name"] if pm else None
    if pm and "id" in pm:
        out["power_mode_id"] = pm["id"]
    r = run(["jetson_clocks", "--show"], COMMAND_TIMEOUT_S)
    clocks = parse_jetson_clocks(r[1]) if r else None
    if clocks is None:
        clocks = clocks_from_sysfs(root)
        why = ("jetson_clocks not found" if r is None
               else "jetson_clocks --show gave no clock lines (not root?)")
        if clocks is not None:
            clocks["note"] = why
    out["clocks_locked"] = None if clocks is None else clocks["locked"]
    if clocks is not None:
        out["clocks"] = clocks
    return out


def raspberry_pi_model(root: Path = Path("/")) -> str | None:
    m = device_tree_model(root)
    return m if m and "raspberry pi" in m.lower() else None


def collect(root: Path = Path("/"), run: CommandRunner = run_command) -> dict[str, Any]:
    """Device facts for Environment.device_facts; keys are present only when found
    (except ``governor``, which is None when cpufreq is absent)."""
    facts: dict[str, Any] = {}
    govs = cpu_governors(root)
    facts["governor"] = governor_summary(govs)
    if len(govs) > 1:
        facts["governors"] = govs
    try:
        j = jetson_facts(root, run)
    except Exception as e:  # a probe never takes the run down
        j = {"error": f"{type(e).__name__}: {e}"}
    if j:
        facts["jetson"] = j
    pi = raspberry_pi_model(root)
    if pi:
        facts["raspberry_pi"] = pi
    if root == Path("/"):
        try:
            tpus = device_kinds.edgetpu_devices()
        except Exception:
            tpus = []
        if tpus:
            facts["edgetpu"] = tpus
    return facts


def measurement_warnings(facts: dict[str, Any]) -> list[str]:
    """Warnings about the conditions of a measurement (for Report.warnings)."""
    out: list[str] = []
    emulated = facts.get("emulated") if isinstance(facts, dict) else None
    if emulated:
        out.append(f"{emulated}. The timings are the emulator's on its host, not any Arm board's; the parity "
                   "verdicts are real (the runtimes' own aarch64 kernels computed them).")
    j = facts.get("jetson") if isinstance(facts, dict) else None
    if isinstance(j, dict):
        name = j.get("model") or "this Jetson"
        mode = f" (power mode {j['power_mode']})" if j.get("power_mode") else ""
        if j.get("clocks_locked") is False:
            below = ", ".join((j.get("clocks") or {}).get("below_max", [])[:4])
            out.append(f"{name}{mode}: clocks are NOT locked ({below}); dynamic frequency scaling makes "
                       "latency slower and noisier. Run `sudo jetson_clocks` (and `sudo nvpmodel -m 0` for "
                       "the maximum power mode) before measuring.")
        elif j.get("clocks_locked") is None:
            out.append(f"{name}{mode}: could not tell whether clocks are locked (run `sudo jetson_clocks` "
                       "before measuring; run infer-compare with read access to `jetson_clocks --show` to "
                       "record it).")
    return out
