"""Soak: duration parsing, the window records and their summary (RSS growth per 10,000
calls, drift), the sysfs readers on sample trees, the child's window loop, real soaks of
LeNet-5 on ONNX Runtime (RSS growth under a bound that a 1 KB-per-call leak breaks), a
leaking and a crashing runner in a real child, and a real SIGINT to the CLI."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest

from infer_compare.backends.runner import Runner
from infer_compare.base.errors import UsageError
from infer_compare.base.records import Availability
from infer_compare.measure.bench import LoopSettings
from infer_compare.measure.cells import CellSpec
from infer_compare.soak import SoakResult, SoakWindow, rss_growth_exceeds
from infer_compare.soak.run import check_times, parse_duration

from .conftest import PY, ROOT, python_env

# RSS growth allowed per 10,000 calls in CI: about 210 bytes per call. A leak of 1 KB per call grows
# 9.8 MB per 10,000 calls, five times the bound (test_synthetic_leak_breaks_the_bound shows it).
BOUND_MB_PER_10K = 2.0


# ------------------------------------------------------------------------------------ parsing


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("10m", 600), ("1h", 3600), ("1h30m", 5400),
                                           ("600", 600), ("2.5", 2.5), ("500ms", 0.5), ("10min", 600),
                                           (" 3S ", 3), (45, 45)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "ten", "10x", "-5s", "0", "0s", "m", "1h 30", "10m5", "nan",
                                  "inf", "1e3"])
def test_malformed_duration_is_a_usage_error(text):
    with pytest.raises(UsageError, match="--duration"):
        parse_duration(text)


def test_window_longer_than_duration_or_too_short():
    assert check_times("10m", "10s") == (600, 10)
    with pytest.raises(UsageError, match="longer than --duration"):
        check_times("5s", "10s")
    with pytest.raises(UsageError, match="--window must be at least"):
        check_times("5s", "10ms")


@pytest.mark.parametrize("flags, message", [
    (["--duration", "10 minutes"], "bad --duration '10 minutes'"),
    (["--duration", "1m", "--window", "soon"], "bad --window 'soon'"),
    (["--duration", "1s", "--window", "2s"], "--window (2 s) is longer than --duration (1 s)"),
    (["--duration", "1m", "--bundle", "x"], "name a model (--model M) or a bundle (--bundle DIR), "
                                            "one of the two"),
])
def test_cli_refuses_bad_times_in_one_line(capsys, flags, message):
    from infer_compare.cli import main

    assert main(["soak", "--model", "lenet5", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"infer-compare: error: {message}"), err


# ------------------------------------------------------------------------- records, summary


def _windows(rss, calls=5000, p50=None, thr=None, dur=1.0):
    out = []
    for i, r in enumerate(rss):
        lat = p50[i] if p50 else 0.1
        out.append(SoakWindow(index=i, start_s=i * dur, end_s=(i + 1) * dur, calls=calls, images=calls,
                              throughput=thr[i] if thr else calls / dur, mean_ms=lat, std_ms=0.01,
                              min_ms=lat / 2, p50_ms=lat, p90_ms=lat * 1.2, p99_ms=lat * 2, max_ms=lat * 5,
                              rss_mb=r, temperatures_c={"cpu-thermal": 50.0 + i},
                              clocks_mhz={"cpu min": 1500.0}))
    return out


def test_summary_rss_growth_and_drift_on_synthetic_windows():
    # first window 80 MB (caches filling), then exactly +0.5 MB per window of 5,000 calls = 1 MB per 10,000
    # calls
    rss = [80.0] + [100.0 + 0.5 * i for i in range(9)]
    p50 = [1.0] * 5 + [1.5] * 5  # a throttled second half
    thr = [1000.0] * 5 + [800.0] * 5
    res = SoakResult.build("a/b/fp32/cpu/b1", 10, 1.0, _windows(rss, p50=p50, thr=thr), rss_start_mb=79.0)
    assert res.calls == 50_000 and res.rss_start_mb == 79.0 and res.rss_end_mb == 104.0
    assert res.rss_growth_mb_per_10k_calls == pytest.approx(1.0)
    assert res.p50_drift == pytest.approx(1.5) and res.p50_slope_pct_per_min > 0
    assert res.throughput_drift == pytest.approx(0.8) and res.throughput_slope_pct_per_min < 0
    flat = SoakResult.build("x", 10, 1.0, _windows([80.0] + [100.0] * 9))
    assert flat.rss_growth_mb_per_10k_calls == pytest.approx(0.0) and flat.p50_drift == 1.0
    assert flat.p50_slope_pct_per_min == pytest.approx(0.0)
    # too few windows for a slope: unknown, not zero
    two = SoakResult.build("x", 2, 1.0, _windows([80.0, 90.0]))
    assert two.rss_growth_mb_per_10k_calls is None and not rss_growth_exceeds(two, BOUND_MB_PER_10K)


def test_drift_ignores_a_short_last_window():
    ws = _windows([50.0] * 4, p50=[1.0, 1.0, 1.0, 9.0])
    ws[-1] = ws[-1].replace(end_s=ws[-1].start_s + 0.2)  # 0.2 of a 1 s window: not a full one
    res = SoakResult.build("x", 3.2, 1.0, ws)
    assert res.p50_drift == 1.0


def test_synthetic_leak_breaks_the_bound():
    calls = 5000
    leak = [60.0] + [60.0 + i * calls * 1024 / 2**20 for i in range(1, 10)]  # 1 KB per call
    noisy = [60.0] + [64.0 + (0.3 if i % 2 else -0.3) for i in range(1, 10)]  # allocator noise, no leak
    res_leak = SoakResult.build("leak", 10, 1.0, _windows(leak, calls=calls))
    res_ok = SoakResult.build("ok", 10, 1.0, _windows(noisy, calls=calls))
    assert res_leak.rss_growth_mb_per_10k_calls == pytest.approx(10_000 * 1024 / 2**20)
    assert rss_growth_exceeds(res_leak, BOUND_MB_PER_10K) and not rss_growth_exceeds(res_ok, BOUND_MB_PER_10K)


def _report(soak=()):
    from infer_compare.base.records import SCHEMA_VERSION, Environment, ModelInfo, Report, RunRecord, Settings

    env = Environment("abc", "Linux", "6.1", "x86_64", "CPython 3.11.7", "Some CPU", ("avx2",), 2, 4, 24.0,
                      "0.1.0", {"numpy": "2.4.6"}, (), {})
    minfo = ModelInfo("lenet5", "lenet", "trained", "x", "h" * 16, (1, 32, 32), 10)
    row = RunRecord("onnxruntime", "onnx", "fp32", "cpu", 1, "ok", throughput=5000.0)
    return Report(SCHEMA_VERSION, "0.1.0", "2026-11-22T10:00:00+0000", ("infer-compare", "soak"), minfo, env,
                  Settings({"cpu": (1,)}, 2, 2, 1, 0.0, 450, 600.0), (row,), soak=tuple(soak))


def test_windows_round_trip_and_old_files_load(tmp_path):
    from infer_compare.base.records import load_report

    res = SoakResult.build("onnxruntime/onnx/fp32/cpu/b1", 5, 1.0, _windows([60.0, 61.0, 61.0, 61.0, 61.0]),
                           rss_start_mb=59.5, stopped_by="interrupted", sensors=("thermal zones: 1 reading",))
    rep = _report([res])
    rep.save(tmp_path / "r.json")
    back = load_report(tmp_path / "r.json")
    assert back == rep and isinstance(back.soak[0].windows[0], SoakWindow) and back.soak[0].interrupted
    old = json.loads((tmp_path / "r.json").read_text())
    del old["soak"]  # a file written before soaks existed
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert load_report(tmp_path / "old.json").soak == ()


def test_renderers_show_the_soak(tmp_path):
    from rich.console import Console

    from infer_compare.report import render
    from infer_compare.report.soak import print_soak, sparkline

    res = SoakResult.build("onnxruntime/onnx/fp32/cpu/b1", 10, 1.0, _windows([60.0] + [61.0] * 9),
                           rss_start_mb=59.5)
    rep = _report([res])
    html = render(rep, "html")
    assert 'id="soak"' in html and html.count("<svg") >= 1 and "cpu-thermal" in html
    md = render(rep, "md")
    assert "## Soak" in md and "RSS 59.5 → 61.0 MB (+0 MB per 10,000 calls)" in md and \
        md.count("| 10 | 9.0 |") == 1
    con = Console(file=io.StringIO(), width=160, record=True)
    print_soak(rep, con)
    text = con.export_text()
    assert "50,000 calls in 10 windows of 1 s (duration)" in text and "max °C" in text
    assert sparkline([1, 2, 3, None, 8]) == "▁▂▃ █" and sparkline([5, 5]) == "▁▁"
    assert len(sparkline(list(range(600)))) == 60
    assert 'id="soak"' not in render(_report(), "html") and "## Soak" not in render(_report(), "md")


# -------------------------------------------------------------------------------- sensors


def _tree(root):
    def put(rel, text):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    put("proc/123/status", "Name:\tpython\nVmHWM:\t  90000 kB\nVmRSS:\t   65536 kB\nThreads:\t4\n")
    put("sys/class/hwmon/hwmon0/name", "k10temp\n")
    put("sys/class/hwmon/hwmon0/temp1_input", "48250\n")
    put("sys/class/hwmon/hwmon0/temp1_label", "Tctl\n")
    put("sys/class/hwmon/hwmon0/temp3_input", "51000\n")  # no label: named by its file
    put("sys/class/hwmon/hwmon1/name", "nvme\n")
    put("sys/class/hwmon/hwmon1/temp1_input", "-273150\n")  # a disabled sensor
    put("sys/class/hwmon/hwmon10/name", "rpi_volt\n")  # no temperature input at all
    put("sys/class/thermal/thermal_zone0/type", "CPU-therm\n")
    put("sys/class/thermal/thermal_zone0/temp", "45500\n")
    put("sys/class/thermal/thermal_zone1/type", "GPU-therm\n")
    put("sys/class/thermal/thermal_zone1/temp", "43000\n")
    put("sys/class/thermal/thermal_zone2/type", "CPU-therm\n")  # a second zone of the same type
    put("sys/class/thermal/thermal_zone2/temp", "44000\n")
    (root / "sys/class/thermal/thermal_zone3").mkdir()  # unreadable temp: absent
    for cpu, khz in ((0, 1_420_000), (1, 1_190_000), (2, 729_600)):
        put(f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq", f"{khz}\n")
    put("sys/devices/system/cpu/cpu3/cpufreq/scaling_cur_freq", "garbage\n")
    put("sys/class/devfreq/17000000.gpu/cur_freq", "918000000\n")


def test_sysfs_readers_on_a_sample_tree(tmp_path):
    from infer_compare.soak import sensors as s

    _tree(tmp_path)
    assert s.rss_mb(tmp_path, 123) == 64.0 and s.rss_mb(tmp_path, 999) is None
    assert s.hwmon_temperatures(tmp_path) == {"k10temp/Tctl": 48.2, "k10temp/temp3": 51.0}
    assert s.thermal_zones(tmp_path) == {"CPU-therm": 45.5, "GPU-therm": 43.0, "CPU-therm #2": 44.0}
    assert s.cpu_clocks(tmp_path) == {"cpu min": 729.6, "cpu mean": 1113.2, "cpu max": 1420.0}
    assert s.devfreq_clocks(tmp_path) == {"17000000.gpu": 918.0}
    sens = s.Sensors(tmp_path, "cpu", pid=123)
    got = sens.read()
    assert got["rss_mb"] == 64.0 and got["temperatures_c"]["GPU-therm"] == 43.0
    assert got["clocks_mhz"]["17000000.gpu"] == 918.0 and "gpu_memory_mib" not in got
    assert sens.describe() == ["RSS (VmRSS): 1 reading", "hwmon temperatures: 2 readings",
                               "thermal zones: 3 readings", "cpufreq clocks: 3 readings",
                               "devfreq clocks: 1 reading"]


def test_sensors_on_an_empty_tree_and_without_nvml(tmp_path):
    from infer_compare.soak.sensors import Sensors

    sens = Sensors(tmp_path, "cuda:0")
    got = sens.read()
    assert got["rss_mb"] is None and got["temperatures_c"] == {} and got["clocks_mhz"] == {}
    lines = sens.describe()
    assert "thermal zones: none readable here" in lines and lines[-1].startswith("NVML")
    sens.close()


# ------------------------------------------------------------------------------ the child


def test_window_loop_with_a_fake_clock():
    """Windows end at the first call past --window; the remainder under half a window joins the last one."""
    from infer_compare.soak.child import SoakSpec, soak_windows

    now = [0]

    def clock():
        return now[0]

    def call(_):
        now[0] += 1_000_000  # every call takes 1 ms

    lines = []
    spec = SoakSpec(CellSpec("null", "none"), duration_s=1.0, window_s=0.3)
    n = soak_windows(call, None, spec, lambda: {"rss_mb": 1.0}, lines.append, clock)
    assert n == 3 and [d["calls"] for d in lines] == [300, 300, 400]
    assert lines[-1]["end_s"] == pytest.approx(1.0) and lines[0]["p50_ms"] == 1.0 and \
        lines[0]["p99_ms"] == 1.0
    assert sum(c for d in lines for _, c in d["hist"]) == 1000


def test_window_statistics_match_numpy_and_the_histogram_is_within_half_a_percent():
    from infer_compare.soak.child import WindowBuffers
    from infer_compare.soak.process import hist_percentiles

    ns = np.random.default_rng(0).lognormal(np.log(2e5), 0.6, 50_001).astype(np.int64)
    bufs = WindowBuffers(10)
    while bufs.ns.size < ns.size:
        bufs.grow()
    bufs.ns[:ns.size] = ns
    st = bufs.stats(ns.size)
    ms = ns / 1e6
    for q in (50, 90, 99):
        assert st[f"p{q}_ms"] == pytest.approx(np.percentile(ms, q), rel=1e-12)
    assert st["mean_ms"] == pytest.approx(ms.mean()) and st["std_ms"] == pytest.approx(ms.std(ddof=1))
    assert (st["min_ms"], st["max_ms"]) == (ms.min(), ms.max())
    got = hist_percentiles({i: c for i, c in st["hist"]}, (50, 90, 99))
    for q in (50, 90, 99):
        assert abs(got[q] / np.percentile(ns, q) - 1) < 0.006, q
    small = WindowBuffers()
    small.ns[:5] = [1_000_000] * 5
    st = small.stats(5)
    assert st["p90_ms"] is None and st["p50_ms"] == 1.0  # too few calls for p90


class LeakRunner(Runner):
    """Keeps 1 KB per call, like a runtime that never frees an output buffer."""

    @classmethod
    def probe(cls, device="cpu"):
        return Availability(True)

    def load(self):
        self._out = np.zeros((self.options.batch_size, 10), np.float32)
        self._kept = []

    def run(self, x):
        self._kept.append(bytearray(1024))
        time.sleep(0.0002)
        return self._out


class CrashAfter300(LeakRunner):
    """Dies like a segfaulting native library at its 300th call (1 ms each)."""

    def load(self):
        super().load()
        self._n = 0

    def run(self, x):
        self._n += 1
        if self._n == 300:
            os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(0.001)
        return self._out


class HangAfter300(CrashAfter300):
    """Hangs at its 300th call, like a deadlocked runtime."""

    def run(self, x):
        self._n += 1
        time.sleep(3600 if self._n == 300 else 0.001)
        return self._out


def _soak_spec(tmp_path, runner, duration, window):
    from infer_compare.soak.child import SoakSpec

    np.save(tmp_path / "in.npy", np.zeros((4, 1, 32, 32), np.float32))
    cell = CellSpec(f"tests.test_soak:{runner}", "none", batch_sizes=(1,), inputs=str(tmp_path / "in.npy"),
                    loop=LoopSettings(warmup_iters=1, warmup_time_s=0.0))
    return SoakSpec(cell, duration, window)


def test_a_real_leak_is_caught(tmp_path):
    from infer_compare.soak.process import Collected, soak_one, soak_result

    spec = _soak_spec(tmp_path, "LeakRunner", 2.0, 0.25)
    got = soak_one(spec, tmp_path, "leak", 60, Collected(), env=python_env())
    res = soak_result(got, "leak", spec)
    assert res.stopped_by == "duration" and len(res.windows) >= 4, got.stderr
    assert res.rss_growth_mb_per_10k_calls > 5 and rss_growth_exceeds(res, BOUND_MB_PER_10K)


def test_a_crash_keeps_every_finished_window(tmp_path):
    from infer_compare.soak.process import Collected, row_of, soak_one, soak_result

    spec = _soak_spec(tmp_path, "CrashAfter300", 60.0, 0.1)
    got = soak_one(spec, tmp_path, "crash", 60, Collected(), env=python_env())
    res = soak_result(got, "crash", spec)
    assert res.stopped_by == "crashed" and "SIGSEGV" in res.reason and len(res.windows) >= 2
    row = row_of(got, {"backend": "x", "format": "onnx", "precision": "fp32",
                       "device": "cpu", "threads": 1}, 1,
                 None, 1)
    assert row.status == "run_failed" and "SIGSEGV" in row.reason and row.latency.count == res.calls


def test_a_hang_is_killed_and_keeps_its_windows(tmp_path):
    import psutil

    from infer_compare.soak.process import Collected, soak_one, soak_result

    spec = _soak_spec(tmp_path, "HangAfter300", 600.0, 0.1)
    got = soak_one(spec, tmp_path, "hang", 2, Collected(), env=python_env())
    res = soak_result(got, "hang", spec)
    assert res.stopped_by == "timed_out" and "no progress for 2 s" in res.reason and len(res.windows) >= 2
    assert not [p for p in psutil.process_iter(["cmdline"])
                if str(tmp_path / "hang.soak.json") in (p.info["cmdline"] or [])]


# ----------------------------------------------------------------------- real LeNet-5 soaks


def test_short_lenet_soak_rss_growth_stays_under_the_bound(cache_dir):
    from infer_compare.report import render
    from infer_compare.soak import soak

    rep = soak("lenet5", backends=["onnxruntime"], precisions=["fp32"], devices=["cpu"], duration_s="6s",
               window_s="0.5s", cache_dir=cache_dir)
    [row] = rep.rows
    [res] = rep.soak
    assert rep.complete and row.status == "ok" and row.label == res.label == "onnxruntime/onnx/fp32/cpu/b1"
    assert len(res.windows) >= 6 and res.calls == row.latency.count == sum(w.calls for w in res.windows)
    assert res.rss_start_mb and res.rss_end_mb and all(w.rss_mb for w in res.windows)
    assert res.rss_growth_mb_per_10k_calls is not None
    assert res.rss_growth_mb_per_10k_calls < BOUND_MB_PER_10K, [w.rss_mb for w in res.windows]
    assert res.p50_drift is not None and res.stopped_by == "duration"
    # the same calls per window with 1 KB kept per call would break the bound
    leak = [w.replace(rss_mb=res.rss_start_mb + sum(x.calls for x in res.windows[:i + 1]) * 1024 / 2**20)
            for i, w in enumerate(res.windows)]
    assert rss_growth_exceeds(SoakResult.build("leak", res.duration_s, res.window_s, leak), BOUND_MB_PER_10K)
    assert 'id="soak"' in render(rep, "html")


def test_interrupted_soak_keeps_its_windows_and_no_child(cache_dir, tmp_path):
    """A real SIGINT to the CLI: exit 130, the saved report is incomplete and holds the finished windows,
    and the soaking child is gone."""
    import psutil

    from infer_compare.base.records import SchemaError, load_report

    out = tmp_path / "out"
    cmd = [PY, "-m", "infer_compare.cli", "soak", "--model", "lenet5", "--backends", "onnxruntime",
           "--precisions", "fp32", "--device", "cpu", "--duration", "10m", "--window", "0.3s", "-o", str(out),
           "--quiet"]
    proc = subprocess.Popen(cmd, env=python_env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        windows, deadline = 0, time.monotonic() + 300
        while windows < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            try:
                rep = load_report(out / "results.json")
            except (SchemaError, OSError):
                continue
            windows = len(rep.soak[0].windows) if rep.soak else 0
            assert not rep.complete and "in progress" in rep.incomplete_reason  # never looks finished mid-run
        assert windows >= 2 and proc.poll() is None, \
            proc.stderr.read().decode() if proc.poll() is not None else ""
        children = psutil.Process(proc.pid).children(recursive=True)
        assert any("infer_compare.soak.child" in " ".join(c.cmdline()) for c in children)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err.decode()
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive
    rep = load_report(out / "results.json")
    [res] = rep.soak
    assert not rep.complete and "SIGINT" in rep.incomplete_reason and rep.not_run == ()
    assert res.stopped_by == "interrupted" and len(res.windows) >= windows
    assert rep.rows[0].status == "ok" and rep.rows[0].latency.count == res.calls
    assert "INCOMPLETE RESULTS" in (out / "results.md").read_text() and (out / "results.html").exists()
    assert b"partial results" in err
