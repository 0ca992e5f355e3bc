"""Device-fact probes against sample files of the real formats (tests/data/devices/):
Jetson model and L4T/JetPack release, nvpmodel power mode, jetson_clocks clock state
(command output, and the sysfs fallback), Raspberry Pi model, CPU governors; and the
warning that unlocked Jetson clocks put into a report."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infer_compare.host import boards as devices

DATA = Path(__file__).parent / "data" / "devices"
ORIN = DATA / "jetson-orin"
RPI = DATA / "rpi5"


def _runner(outputs: dict[str, str | None]):
    """A fake command runner: command name -> output (None: command absent)."""
    calls = []

    def run(args, timeout):
        calls.append((list(args), timeout))
        out = outputs.get(args[0])
        return None if out is None else (0, out)

    run.calls = calls  # type: ignore[attr-defined]
    return run


def test_device_tree_model_strips_nul():
    assert devices.device_tree_model(ORIN) == "NVIDIA Jetson AGX Orin Developer Kit"
    assert devices.device_tree_model(RPI) == "Raspberry Pi 5 Model B Rev 1.0"
    assert devices.device_tree_model(DATA / "nowhere") is None


def test_nv_tegra_release_and_jetpack():
    rel = devices.l4t_release(ORIN)
    assert rel["l4t"] == "36.4.3" and rel["jetpack"] == "6.2"
    assert rel["board"] == "generic" and rel["eabi"] == "aarch64" and rel["gcid"] == "38968081"
    assert devices.parse_nv_tegra_release("# R36 (release), REVISION: 4.0, GCID: 1")["jetpack"] == "6.1"
    assert devices.parse_nv_tegra_release("# R35 (release), REVISION: 4.1, GCID: 1")["jetpack"] == "5.1.2"
    unknown = devices.parse_nv_tegra_release("# R35 (release), REVISION: 9.9, GCID: 1")
    assert unknown["jetpack"] == "5.x" and "not in this tool's table" in unknown["jetpack_note"]
    assert devices.parse_nv_tegra_release("garbage") is None
    assert devices.l4t_release(RPI) is None


def test_nvpmodel():
    assert devices.parse_nvpmodel((DATA / "nvpmodel-q.txt").read_text()) == {"name": "MAXN", "id": 0}
    assert devices.parse_nvpmodel((DATA / "nvpmodel-q-15w.txt").read_text()) == {"name": "15W", "id": 1}
    assert devices.parse_nvpmodel("nvpmodel: command failed") is None


def test_jetson_clocks_show():
    un = devices.parse_jetson_clocks((DATA / "jetson_clocks-show-unlocked.txt").read_text())
    assert un["locked"] is False
    below = " ".join(un["below_max"])
    assert "cpu0 1728000/2201600" in below and "GPU 306000000/1300500000" in below and "EMC" in below
    assert "cpu2" not in below and "cpu4" not in below  # at max / offline
    assert un["power_mode"] == "MAXN"
    lk = devices.parse_jetson_clocks((DATA / "jetson_clocks-show-locked.txt").read_text())
    assert lk["locked"] is True and "below_max" not in lk
    assert devices.parse_jetson_clocks("jetson_clocks: ERROR: You must be root to run this script") is None


def test_jetson_facts_with_commands():
    run = _runner({"nvpmodel": (DATA / "nvpmodel-q.txt").read_text(),
                   "jetson_clocks": (DATA / "jetson_clocks-show-unlocked.txt").read_text()})
    j = devices.jetson_facts(ORIN, run)
    assert j["model"] == "NVIDIA Jetson AGX Orin Developer Kit"
    assert j["l4t"] == "36.4.3" and j["jetpack"] == "6.2"
    assert j["power_mode"] == "MAXN" and j["power_mode_id"] == 0
    assert j["clocks_locked"] is False and j["clocks"]["source"] == "jetson_clocks --show"
    assert all(isinstance(a, list) and t > 0 for a, t in run.calls)  # argument lists, with a timeout


def test_jetson_clocks_fall_back_to_sysfs_when_not_root():
    run = _runner({"nvpmodel": None, "jetson_clocks": "jetson_clocks: ERROR: You must be root "
                                                      "to run this script"})
    j = devices.jetson_facts(ORIN, run)
    assert j["power_mode"] is None
    assert j["clocks_locked"] is False
    assert j["clocks"]["source"] == "sysfs min/max frequencies" and "not root" in j["clocks"]["note"]
    assert any(b.startswith("GPU") for b in j["clocks"]["below_max"])


def test_not_a_jetson_and_raspberry_pi():
    run = _runner({})
    assert devices.jetson_facts(RPI, run) is None
    assert run.calls == []  # no Jetson commands run elsewhere
    facts = devices.collect(RPI, run)
    assert facts["raspberry_pi"] == "Raspberry Pi 5 Model B Rev 1.0"
    assert facts["governor"] == "ondemand" and "jetson" not in facts
    assert devices.measurement_warnings(facts) == []


def test_governors_mixed_and_absent(tmp_path):
    for i, g in enumerate(("performance", "performance", "powersave")):
        d = tmp_path / f"sys/devices/system/cpu/cpu{i}/cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text(g + "\n")
    govs = devices.cpu_governors(tmp_path)
    assert govs == {"performance": ["cpu0", "cpu1"], "powersave": ["cpu2"]}
    facts = devices.collect(tmp_path, _runner({}))
    assert facts["governor"] == "performance (2 CPUs), powersave (1 CPUs)" and facts["governors"] == govs
    assert devices.collect(tmp_path / "empty", _runner({})) == {"governor": None}


def test_unlocked_clocks_warn_locked_do_not():
    facts = devices.collect(ORIN, _runner({
        "nvpmodel": (DATA / "nvpmodel-q.txt").read_text(),
        "jetson_clocks": (DATA / "jetson_clocks-show-unlocked.txt").read_text()}))
    (w,) = devices.measurement_warnings(facts)
    assert "NOT locked" in w and "sudo jetson_clocks" in w and "MAXN" in w
    facts = devices.collect(ORIN,
                            _runner({"jetson_clocks": (DATA / "jetson_clocks-show-locked.txt").read_text()}))
    assert facts["jetson"]["clocks_locked"] is True
    assert devices.measurement_warnings(facts) == []


def test_run_command_never_raises():
    assert devices.run_command(["/nonexistent/tool", "-q"]) is None
    assert devices.run_command([]) is None
    assert devices.run_command([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.3) is None
    rc, out = devices.run_command([sys.executable, "-c", "print('NV Power Mode: MAXN'); print(0)"])
    assert rc == 0 and devices.parse_nvpmodel(out) == {"name": "MAXN", "id": 0}


def test_this_machine():
    facts = devices.collect()
    assert "governor" in facts
    from infer_compare.host import env

    assert "governor" in env.collect().device_facts


@given(st.text(max_size=400))
def test_parsers_never_raise(text):
    devices.parse_nv_tegra_release(text)
    devices.parse_nvpmodel(text)
    devices.parse_jetson_clocks(text)


@pytest.mark.parametrize("line", ["cpu0: Online=1 MinFreq=1 MaxFreq=x CurrentFreq=1", "GPU MaxFreq=5"])
def test_partial_clock_lines_are_ignored(line):
    assert devices.parse_jetson_clocks(line) is None
