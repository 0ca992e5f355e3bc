"""Energy readers on sample sysfs trees (RAPL powercap, amd_energy, Jetson INA3221 in both layouts), and the
energy column of the reports."""

import csv
import io
import time
from pathlib import Path

import pytest

from infer_compare.base.records import load_report
from infer_compare.host import energy
from infer_compare.host.energy import (
    EnergyMeter,
    EnergyReading,
    energy_fields,
    jetson_rails,
    rapl_counters,
    rapl_delta_uj,
    select_rails,
)
from infer_compare.report import render
from infer_compare.report.efficiency import efficiency

ROOT = Path(__file__).resolve().parents[1]
MAX_UJ = 262143328850


def _w(path: Path, text) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text}\n")


def _zone(base: Path, zone: str, name: str, uj: int, max_uj: int = MAX_UJ) -> Path:
    d = base / zone
    _w(d / "name", name)
    _w(d / "energy_uj", uj)
    _w(d / "max_energy_range_uj", max_uj)
    return d


def rapl_tree(root: Path) -> Path:
    """Two packages with core/dram subzones, a psys zone and the -mmio duplicate (as on Intel
    servers/clients)."""
    pc = root / "sys/class/powercap"
    _w(pc / "intel-rapl/enabled", 1)
    _zone(pc, "intel-rapl:0", "package-0", 1_000_000)
    _zone(pc, "intel-rapl:0:0", "core", 500_000)
    _zone(pc, "intel-rapl:0:1", "dram", 300_000)
    _zone(pc, "intel-rapl:1", "package-1", MAX_UJ - 1_000_000)  # about to wrap
    _zone(pc, "intel-rapl:2", "psys", 9_000_000)
    _zone(pc, "intel-rapl-mmio:0", "package-0", 7_000_000)
    return pc


def jetson_hwmon_tree(root: Path, rails=("VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"), mv=5000,
                      ma=(1000, 400, 200)):
    """JetPack 5/6: /sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmonN (bus mV, current mA, labels)."""
    d = root / "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3"
    _w(d / "name", "ina3221")
    for i, (rail, cur) in enumerate(zip(rails, ma, strict=True), start=1):
        _w(d / f"in{i}_label", rail)
        _w(d / f"in{i}_input", mv)
        _w(d / f"curr{i}_input", cur)
        _w(d / f"in{i}_enable", 1)
        _w(d / f"in{i + 3}_input", 1234)  # shunt voltages (uV): not rails
    _w(d / "in7_label", "sum of shunt voltages")
    _w(d / "in7_input", 3000)
    return d


def jetson_iio_tree(root: Path, rails=("POM_5V_IN", "POM_5V_GPU", "POM_5V_CPU"), mw=(4000, 1500, 900)):
    """L4T 32 (JetPack 4): /sys/bus/i2c/drivers/ina3221x/6-0040/iio:device0 (rail_name_k, in_powerk_input
    mW)."""
    d = root / "sys/bus/i2c/drivers/ina3221x/6-0040/iio:device0"
    for k, (rail, p) in enumerate(zip(rails, mw, strict=True)):
        _w(d / f"rail_name_{k}", rail)
        _w(d / f"in_power{k}_input", p)
        _w(d / f"in_current{k}_input", p // 5)
        _w(d / f"in_voltage{k}_input", 5000)
    return d


def test_rapl_delta_corrects_one_wrap():
    assert rapl_delta_uj(100, 250, MAX_UJ) == 150
    assert rapl_delta_uj(MAX_UJ - 100, 50, MAX_UJ) == 150
    assert rapl_delta_uj(100, 50, None) == -50  # a counter that does not wrap and went back: not hidden


def test_rapl_finds_package_zones_only(tmp_path):
    rapl_tree(tmp_path)
    cs, why = rapl_counters(str(tmp_path))
    assert why == "" and [c.name for c in cs] == ["intel-rapl:0 package-0", "intel-rapl:1 package-1"]
    assert all(c.max_uj == MAX_UJ for c in cs)
    assert rapl_counters(str(tmp_path / "nowhere"))[0] == []


def test_rapl_meter_sums_packages_across_a_wrap(tmp_path):
    pc = rapl_tree(tmp_path)
    m = EnergyMeter(root=str(tmp_path))
    assert m.available and m.source.startswith("RAPL powercap package energy")
    m.start()
    _w(pc / "intel-rapl:0/energy_uj", 1_000_000 + 2_500_000)  # +2.5 J
    _w(pc / "intel-rapl:1/energy_uj", 500_000)  # wrapped: +1.5 J
    _w(pc / "intel-rapl:2/energy_uj", 99_000_000)  # psys: not counted
    r = m.stop()
    assert isinstance(r, EnergyReading)
    assert r.joules == pytest.approx(4.0)
    assert r.details["joules_per_counter"]["intel-rapl:1 package-1"] == pytest.approx(1.5)
    assert "intel-rapl:0 package-0" in r.source and "psys" not in r.source


def test_rapl_readable_by_root_only_says_why(tmp_path, monkeypatch):
    rapl_tree(tmp_path)
    real = energy._read

    def deny(path):
        if path.endswith("energy_uj"):
            raise PermissionError(13, "Permission denied", path)
        return real(path)

    monkeypatch.setattr(energy, "_read", deny)
    m = EnergyMeter(root=str(tmp_path))
    assert not m.available and "root only" in m.reason and "CVE-2020-8694" in m.reason
    m.start()
    assert m.stop() is None and m.reason


def test_amd_energy_hwmon(tmp_path):
    h = tmp_path / "sys/class/hwmon/hwmon2"
    _w(h / "name", "amd_energy")
    _w(h / "energy1_label", "Ecore000")
    _w(h / "energy1_input", 10)
    _w(h / "energy17_label", "Esocket0")
    _w(h / "energy17_input", 5_000_000)
    m = EnergyMeter(root=str(tmp_path))
    assert m.available and "amd_energy" in m.source
    m.start()
    _w(h / "energy17_input", 7_000_000)
    _w(h / "energy1_input", 10**9)  # a core: inside the socket, not added
    assert m.stop().joules == pytest.approx(2.0)


def test_jetson_hwmon_layout_uses_the_input_rail(tmp_path):
    d = jetson_hwmon_tree(tmp_path)
    rails, why = jetson_rails(str(tmp_path))
    assert why == "" and [r.name for r in rails] == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]
    assert [r.read_mw() for r in rails] == [5000.0, 2000.0, 1000.0]  # mV x mA / 1000
    assert [r.name for r in select_rails(rails)] == ["VDD_IN"]  # the others are inside it
    _w(d / "in3_enable", 0)
    assert [r.name for r in jetson_rails(str(tmp_path))[0]] == ["VDD_IN", "VDD_CPU_GPU_CV"]


def test_jetson_iio_layout_and_a_board_without_an_input_rail(tmp_path):
    jetson_iio_tree(tmp_path)
    rails, _ = jetson_rails(str(tmp_path))
    assert [(r.name, r.read_mw()) for r in select_rails(rails)] == [("POM_5V_IN", 4000.0)]
    agx = tmp_path / "agx"
    jetson_iio_tree(agx, rails=("GPU", "CPU", "SOC"), mw=(3000, 2000, 1000))
    rails, _ = jetson_rails(str(agx))
    assert sum(r.read_mw() for r in select_rails(rails)) == 6000.0  # no input rail: every rail


def test_jetson_meter_integrates_sampled_power(tmp_path):
    jetson_hwmon_tree(tmp_path)  # VDD_IN: 5 V x 1 A = 5 W
    m = EnergyMeter(root=str(tmp_path), interval_s=0.01)
    assert m.available and "VDD_IN" in m.source
    m.start()
    time.sleep(0.1)
    r = m.stop()
    assert r is not None and r.seconds >= 0.1
    assert r.joules == pytest.approx(5.0 * r.seconds, rel=1e-9)  # constant power: the trapezoids are exact
    assert r.watts == pytest.approx(5.0) and r.details["power_samples"] >= 3
    assert "integrated" in r.source


def test_no_source_says_why(tmp_path):
    m = EnergyMeter(root=str(tmp_path))
    assert not m.available and "RAPL" in m.reason and "INA3221" in m.reason
    m.start()
    assert m.stop() is None
    assert energy_fields(None, 10, m.reason)["energy"].startswith("not measured")


def _row_with_energy(extra):
    rep = load_report(ROOT / "tests" / "data" / "reports" / "cpu-resnet50-v1.json")
    i = next(i for i, r in enumerate(rep.rows) if r.status == "ok" and r.batch_size == 1)
    rows = list(rep.rows)
    rows[i] = rows[i].replace(extra={**rows[i].extra, **extra})
    return rep.replace(rows=tuple(rows)), rows[i]


@pytest.mark.parametrize("extra, joules", [
    ({"energy_mj_per_image": 30.7,
      "energy_source": "NVML nvmlDeviceGetTotalEnergyConsumption (whole board)"}, 0.0307),
    (energy_fields(EnergyReading(12.0, 3.0, "RAPL powercap package energy "
                                            "(intel-rapl:0 package-0)"), 400), 0.03),
])
def test_the_energy_column_fills_from_a_row_that_has_energy(extra, joules):
    rep, row = _row_with_energy(extra)
    ej = efficiency(rep, row)["energy_j_per_image"]
    assert ej == pytest.approx(joules)
    lines = list(csv.DictReader(io.StringIO(render(rep, "csv"))))
    line = next(x for x in lines if x["label"] == row.label)
    assert float(line["energy_j_per_image"]) == pytest.approx(joules) and \
        line["energy_source"] == extra["energy_source"]
    assert sum(1 for x in lines if x["energy_j_per_image"]) == 1
    html = render(rep, "html")
    assert ">mJ/img</th>" in html and f'data-v="{1e3 * ej!r}"' in html
    assert extra["energy_source"] in html


def test_the_loop_meters_exactly_the_measured_calls(tmp_path):
    """time_loop starts the meter after the cold call and the warm-up and stops it after the last sample."""
    from infer_compare.measure.bench import LoopSettings, time_loop

    pc = rapl_tree(tmp_path)
    f = pc / "intel-rapl:0/energy_uj"

    def call(_x):  # each call costs 1 mJ on package 0
        _w(f, int(f.read_text()) + 1000)

    m = EnergyMeter(root=str(tmp_path))
    r = time_loop(call, 0, LoopSettings(warmup_iters=3, warmup_time_s=0.0, min_iters=25, min_time_s=0.0,
                                        target_ci=None), energy_meter=m)
    assert r.n == 25 and r.first_ns is not None and r.warmup_calls == 2
    assert r.energy.joules == pytest.approx(25 * 1e-3)
    fields = energy_fields(r.energy, 8 * r.n)
    assert fields["energy_j_per_image"] == pytest.approx(1e-3 / 8) and fields["energy_images"] == 200
