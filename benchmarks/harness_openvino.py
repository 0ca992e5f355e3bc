"""Part c of benchmarks/harness.py: the tool's OpenVINO rows against ``benchmark_app`` (shipped with the
openvino wheel) on the same IR, precision, device, shape and input (the tool's timed image, given with ``-i``:
speed can depend on the data), both scenarios, alternating the two sides pair by pair.

What each side times (benchmark_app: ``openvino/tools/benchmark/benchmark.py`` and ``main.py`` of the wheel):

* latency scenario
  - tool p50: the wall clock of each Python ``InferRequest.infer(share_outputs=True)`` call in the tool's loop
    (end of the previous call to the end of this one): OpenVINO's work plus pybind, the GIL and the loop;
  - tool own p50: ``InferRequest.latency`` of the same calls (OpenVINO's clock around the C++ infer; the
    first call left out, the warm-up calls in): the quantity benchmark_app's Median is made of;
  - benchmark_app Median: ``InferRequest.latency`` of each synchronous ``infer()`` (``-hint latency`` means
    ``-api sync``) after one first inference, the lower median (``values[ceil(n/2) - 1]``); Duration/Count is
    its wall time per iteration, its own Python loop included (compared with the tool's wall mean).
* throughput scenario: the same loop on both sides (``get_idle_request_id()``, ``start_async()``, no Python
  callback, until the time is spent and a whole round of requests has been started, then ``wait_all()``) and
  the same formula (requests started x batch / that wall time, ramp-up and drain included on both sides).
  Warm-up differs: the tool runs every request at least once (whole rounds, >= its warm-up time) before its
  window; benchmark_app runs one request once, so its other streams' first inferences fall in its window
  (which can only lower its figure). Request latencies are ``InferRequest.latency`` on both sides.
  "Occupancy" = sum of request latencies / (window x requests): below 1, requests sat idle (issue gaps, ramp,
  drain); equal occupancy with a lower rate means slower inferences.
* configuration: the tool compiles with PERFORMANCE_HINT, INFERENCE_NUM_THREADS (its threads) and
  INFERENCE_PRECISION_HINT; benchmark_app with PERFORMANCE_HINT (``-hint``), INFERENCE_PRECISION_HINT and
  PERF_COUNT NO, threads and streams left to OpenVINO (it refuses ``-nthreads``/``-nstreams`` with a hint).
  The *bridge* runs benchmark_app with the tool's own properties (``-load_config``), so that the effect of
  the configuration shows apart from the rest: tool / bridge is the tool against benchmark_app's process on
  the same configuration, bridge / benchmark_app the configuration's own effect. Compiled-model properties
  that differ between the tool and benchmark_app are listed.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

INFER_PRECISION = {"fp32": "f32", "bf16": "bf16", "fp16": "f16"}
_SCALE = {"ms": 1.0, "us": 1e-3, "s": 1e3}


def _num(text: str, pattern: str) -> float | None:
    m = re.search(pattern, text)
    return float(m.group(1)) * (_SCALE[m.group(2)] if m.lastindex and m.lastindex > 1 else 1.0) if m else None


def _properties(text: str) -> dict[str, str]:
    """The compiled model's properties that benchmark_app prints under 'Model:' (step 8)."""
    out: dict[str, str] = {}
    block = re.search(r"\] Model:\s*\n(.*?)(?:\n\[Step|\Z)", text, re.S)
    for line in (block.group(1).splitlines() if block else []):
        m = re.match(r"\[ INFO \]\s{3}(\w+): (.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def parse_benchmark_app(text: str) -> dict[str, Any]:
    """benchmark_app's console report as numbers (times in ms); RuntimeError when it has none."""
    lat = {k: _num(text, rf"{k}:\s+([\d.]+)\s*(ms|us|s)\b") for k in ("Median", "Average", "Min", "Max")}
    fps = _num(text, r"Throughput:\s+([\d.]+)\s*FPS")
    if lat["Median"] is None or fps is None:
        raise RuntimeError(f"could not read benchmark_app's Median/Throughput: {text[-600:]}")
    count, duration = (_num(text, r"Count:\s+(\d+) iterations"),
                       _num(text, r"Duration:\s+([\d.]+)\s*(ms|us|s)\b"))
    nireq = re.search(r"(\d+) inference requests", text)
    sync = "Start inference synchronously" in text
    props = _properties(text)
    return {"median_ms": lat["Median"], "average_ms": lat["Average"], "min_ms": lat["Min"],
            "max_ms": lat["Max"], "fps": fps, "count": int(count) if count is not None else None,
            "duration_ms": duration,
            "wall_per_iteration_ms": duration / count if duration and count else None,
            "first_inference_ms": _num(text, r"First inference took ([\d.]+) (ms)"),
            "api": "sync" if sync else "async",
            "infer_requests": 1 if sync else int(nireq.group(1)) if nireq else None,
            "properties": props, **{k: props.get(k) for k in ("NUM_STREAMS", "INFERENCE_NUM_THREADS",
                                                              "PERFORMANCE_HINT",
                                                              "OPTIMAL_NUMBER_OF_INFER_REQUESTS")}}


def benchmark_app(exe: str, ir: str, shape: str, secs: float, data: str, precision: str, hint: str,
                  config: dict[str, Any] | None = None) -> dict[str, Any]:
    """One benchmark_app run: ``-hint`` with OpenVINO's defaults, or (``config``) the given properties through
    ``-load_config`` with the API the hint implies (the bridge)."""
    args = [exe, "-m", ir, "-d", "CPU", "-t", str(max(1, round(secs))), "-shape", shape, "-ip", "f32",
            "-i", data]
    cfg_file = None
    if config is None:
        args += ["-hint", hint, "-infer_precision", INFER_PRECISION[precision]]
    else:
        fd, cfg_file = tempfile.mkstemp(suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump({"CPU": {k: str(v) for k, v in config.items()}}, f)
        args += ["-load_config", cfg_file, "-api", "sync" if hint == "latency" else "async"]
    try:
        out = subprocess.run(args, capture_output=True, text=True)
    finally:
        if cfg_file:
            os.unlink(cfg_file)
    res = parse_benchmark_app(out.stdout + out.stderr)
    res["args"] = " ".join(args[1:]) + (f"  (-load_config: {json.dumps(config)})" if config else "")
    return res


def tool_compile(ir: str, precision: str, threads: int | None,
                 hint: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(the properties the tool's runner compiles with under ``hint``, every property of the model it
    compiles, as benchmark_app prints them)."""
    from infer_compare.backends.openvino.run import OpenVinoRunner
    from infer_compare.backends.runner import RunOptions

    r = OpenVinoRunner(ir, "cpu", RunOptions(precision=precision, threads=threads, batch_size=1))
    compiled, _, _ = r._compile(hint)
    props = {}
    for k in compiled.get_property("SUPPORTED_PROPERTIES"):
        if k != "SUPPORTED_PROPERTIES":
            try:
                props[str(k)] = str(compiled.get_property(k))
            except Exception as e:  # a property this device lists but cannot read
                props[str(k)] = f"unreadable: {e}"
    return r.compile_config(hint), props


def property_diff(tool: dict[str, str], ba: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Properties both sides report with different values: {name: (tool, benchmark_app)}."""
    return {k: (tool[k], ba[k]) for k in sorted(set(tool) & set(ba)) if tool[k] != ba[k]}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def latency_pair(row: Any, ba: dict[str, Any], bridge: dict[str, Any]) -> dict[str, Any]:
    """One latency pair: both sides' figures, what each timed, and the ratios."""
    own, own_mean = row.extra.get("openvino_ms_p50"), row.extra.get("openvino_ms_mean")
    ba_py = (ba["wall_per_iteration_ms"] - ba["average_ms"]
             if ba["wall_per_iteration_ms"] and ba["average_ms"] else None)
    return {
        "tool_p50_ms": row.latency.p50_ms, "tool_mean_ms": row.latency.mean_ms, "tool_own_p50_ms": own,
        "tool_own_mean_ms": own_mean,  # Python's cost per call, each side: wall mean - OpenVINO's own mean
        "tool_python_per_call_ms": row.latency.mean_ms - own_mean if own_mean is not None else None,
        "benchmark_app_python_per_call_ms": ba_py,
        "tool_calls": row.latency.count, "tool_threads": row.options.get("INFERENCE_NUM_THREADS"),
        "tool_streams": row.options.get("NUM_STREAMS"), "tool_api": row.options.get("api"),
        "benchmark_app_median_ms": ba["median_ms"], "benchmark_app_average_ms": ba["average_ms"],
        "benchmark_app_wall_per_iteration_ms": ba["wall_per_iteration_ms"],
        "benchmark_app_count": ba["count"], "benchmark_app_threads": ba["INFERENCE_NUM_THREADS"],
        "benchmark_app_streams": ba["NUM_STREAMS"],
        "benchmark_app_first_inference_ms": ba["first_inference_ms"], "benchmark_app": ba.get("args"),
        "bridge_median_ms": bridge["median_ms"], "bridge_threads": bridge["INFERENCE_NUM_THREADS"],
        "bridge_streams": bridge["NUM_STREAMS"], "bridge": bridge.get("args"),
        "ratio": row.latency.p50_ms / ba["median_ms"],  # the issue's figure: tool p50 / Median
        "ratio_own": _ratio(own, ba["median_ms"]),  # OpenVINO's own latency on both sides
        # wall per call, both loops
        "ratio_wall_mean": _ratio(row.latency.mean_ms, ba["wall_per_iteration_ms"]),
        "ratio_tool_bridge": _ratio(own, bridge["median_ms"]),  # same configuration, OpenVINO's own latency
        "ratio_bridge_ba": _ratio(bridge["median_ms"], ba["median_ms"]),  # the configuration's own effect
    }


def occupancy(latencies_ms_sum: float | None, window_ms: float | None, requests: int | None) -> float | None:
    """Sum of request latencies over (window x requests): the share of the window the requests were in
    flight."""
    if not latencies_ms_sum or not window_ms or not requests:
        return None
    return latencies_ms_sum / (window_ms * requests)


def throughput_pair(row: Any, ba: dict[str, Any], bridge: dict[str, Any]) -> dict[str, Any]:
    """One throughput pair: both sides' figures, what each timed, and the ratios."""
    o, loop = row.options, row.extra.get("loop", {})
    lats = [v / 1e6 for v in row.samples_ns]
    window_ms = (row.measured_wall_s or 0) * 1e3
    nreq = o.get("infer_requests")
    ba_occ = occupancy((ba["count"] or 0) * (ba["average_ms"] or 0), ba["duration_ms"], ba["infer_requests"])
    return {
        "tool_img_s": row.throughput, "tool_streams": o.get("NUM_STREAMS"), "tool_requests": nreq,
        "tool_threads": o.get("INFERENCE_NUM_THREADS"), "tool_window_ms": window_ms,
        "tool_requests_done": len(lats), "tool_warmup_requests": loop.get("warmup_calls"),
        "tool_latency_p50_ms": statistics.median(lats) if lats
        else None, "tool_occupancy": occupancy(sum(lats), window_ms, nreq),
        "benchmark_app_img_s": ba["fps"], "benchmark_app_streams": ba["NUM_STREAMS"],
        "benchmark_app_requests": ba["infer_requests"], "benchmark_app_threads": ba["INFERENCE_NUM_THREADS"],
        "benchmark_app_window_ms": ba["duration_ms"], "benchmark_app_count": ba["count"],
        "benchmark_app_warmup_requests": 1, "benchmark_app_median_ms": ba["median_ms"],
        "benchmark_app_occupancy": ba_occ, "benchmark_app": ba.get("args"),
        "bridge_img_s": bridge["fps"], "bridge_streams": bridge["NUM_STREAMS"],
        "bridge_requests": bridge["infer_requests"], "bridge_threads": bridge["INFERENCE_NUM_THREADS"],
        "bridge": bridge.get("args"),
        "ratio": row.throughput / ba["fps"], "ratio_tool_bridge": _ratio(row.throughput, bridge["fps"]),
        "ratio_bridge_ba": _ratio(bridge["fps"], ba["fps"]),
    }


# ------------------------------------------------------------------------------ the tool's side
def tool_rows(model: str, precision: str, threads: int | None, secs: float,
              cache: str | None) -> tuple[Any, Any]:
    """The tool's latency and throughput rows at batch 1 (one child process, latency then throughput)."""
    from infer_compare import compare

    rep = compare(model, backends=["openvino"], formats=["openvino"], devices=["cpu"], precisions=[precision],
                  batch_sizes=[1], threads=threads, scenarios="both", min_time_s=secs, max_time_s=secs,
                  min_iters=20, cache_dir=cache)
    rows = {r.scenario: r for r in rep.rows if r.batch_size == 1}
    bad = [r for r in rows.values() if r.status != "ok"]
    if bad or len(rows) != 2:
        raise RuntimeError("the tool's OpenVINO rows did not "
                           f"run: {[(r.label, r.status, r.reason) for r in bad]}")
    return rows["latency"], rows["throughput"]


def ir_and_shape(model: str, precision: str, cache: str | None) -> tuple[str, str, int | None]:
    """The IR the tool measures (a short tool run builds or finds it in the cache), its input shape, and the
    threads the tool gives OpenVINO."""
    from infer_compare import compare

    rep = compare(model, backends=["openvino"], formats=["openvino"], devices=["cpu"], precisions=[precision],
                  batch_sizes=[1], min_time_s=0.0, max_time_s=0.1, min_iters=1, target_ci=None,
                  cache_dir=cache)
    row = next((r for r in rep.rows if r.batch_size == 1 and r.status == "ok" and r.export is not None), None)
    if row is None:
        raise RuntimeError(f"the tool's OpenVINO row did not run: {[(r.label, r.reason) for r in rep.rows]}")
    return row.export.path, "[1," + ",".join(map(str, rep.model.input_shape)) + "]", row.threads


def timed_batch(model: str, cache: str | None) -> str:
    """The tool's batch-1 input (its first evaluation image) as a .npy file for benchmark_app's -i."""
    import numpy as np

    from infer_compare.base.cache import Cache
    from infer_compare.prepare.prepared import prepare_model

    prep = prepare_model(model, cache=Cache(cache))
    path = Path(tempfile.mkdtemp()) / "input.npy"
    np.save(path, np.ascontiguousarray(prep.ds.eval[:1], dtype=np.float32))
    return str(path)


def _medians(pairs: list[dict], keys: tuple[str, ...]) -> dict[str, float | None]:
    out = {}
    for k in keys:
        vals = [p[k] for p in pairs if p.get(k) is not None]
        out[f"median_{k}"] = statistics.median(vals) if vals else None
    return out


def ov_vs_benchmark_app(model: str, precision: str, threads: int | None, secs: float, rounds: int,
                        cache: str | None, exe: str) -> dict[str, Any]:
    """``rounds`` pairs, the tool first in even rounds and benchmark_app (default, then the bridge) first in
    odd ones, so that drift cancels out; every figure of every pair, the medians of the ratios, the property
    diff."""
    ir, shape, tool_threads = ir_and_shape(model, precision, cache)
    threads = threads or tool_threads
    data = timed_batch(model, cache)  # the tool's timed batch: benchmark_app runs the same image, not noise
    hints = ("latency", "throughput")
    tool = {h: tool_compile(ir, precision, threads, h.upper()) for h in hints}  # (config, properties)
    diff: dict[str, dict] = {}
    lat: list[dict] = []
    tput: list[dict] = []
    for k in range(rounds):
        if k % 2 == 0:
            lrow, trow = tool_rows(model, precision, threads, secs, cache)
        ba = {h: benchmark_app(exe, ir, shape, secs, data, precision, h) for h in hints}
        bridge = {h: benchmark_app(exe, ir, shape, secs, data, precision, h, tool[h][0]) for h in hints}
        if k % 2 == 1:
            lrow, trow = tool_rows(model, precision, threads, secs, cache)
        diff = {h: property_diff(tool[h][1], ba[h]["properties"]) for h in hints}
        lat.append(latency_pair(lrow, ba["latency"], bridge["latency"]))
        tput.append(throughput_pair(trow, ba["throughput"], bridge["throughput"]))
    ratios = ("ratio", "ratio_tool_bridge", "ratio_bridge_ba")
    return {"model": model, "precision": precision, "ir": ir, "threads": threads, "input": data,
            "tool_config": {h: tool[h][0] for h in hints}, "property_diff": diff,
            "latency": {"pairs": lat, **_medians(lat, ratios + ("ratio_own", "ratio_wall_mean"))},
            "throughput": {"pairs": tput, **_medians(tput, ratios)}}


# ------------------------------------------------------------------------------ printing
def _f(v: Any, fmt: str = ".3f") -> str:
    return "?" if v is None else format(v, fmt)


def _ms_us(v: float | None) -> float | None:
    return None if v is None else v * 1e3


def print_ov(res: dict[str, Any]) -> None:
    if "skipped" in res:
        print(f"c. OpenVINO vs benchmark_app: skipped: {res['skipped']}")
        return
    print("   what is timed: tool p50 = wall of each Python infer() in the tool's loop; own = "
          "InferRequest.latency of the same calls; benchmark_app Median = InferRequest.latency (no Python); "
          "wall/iteration = its Duration/Count; throughput on both sides = requests started x batch / window "
          "(ramp and drain in); bridge = benchmark_app with the tool's own properties (-load_config)")
    print(f"   tool config: latency {res['tool_config']['latency']}, "
          f"throughput {res['tool_config']['throughput']}")
    for h, d in res["property_diff"].items():
        print(f"   {h} compiled-model properties, tool vs benchmark_app: "
              + ("; ".join(f"{k} {a} vs {b}" for k, (a, b) in d.items()) or "no difference"))
    for i, p in enumerate(res["latency"]["pairs"], 1):
        print(f"   latency pair {i}: tool p50 {_f(p['tool_p50_ms'])} ms wall (mean {_f(p['tool_mean_ms'])}, "
              f"OpenVINO's own p50 {_f(p['tool_own_p50_ms'])}; {p['tool_threads']} "
              f"threads, {p['tool_streams']} stream) | benchmark_app "
              f"Median {_f(p['benchmark_app_median_ms'], '.2f')} ms own "
              f"(wall/iteration {_f(p['benchmark_app_wall_per_iteration_ms'])}; {p['benchmark_app_threads']} "
              f"threads, {p['benchmark_app_streams']} stream) | bridge "
              f"Median {_f(p['bridge_median_ms'], '.2f')} ms ({p['bridge_threads']} threads)")
        print(f"      Python per call (wall mean - OpenVINO's own mean): tool "
              f"{_f(_ms_us(p['tool_python_per_call_ms']), '.0f')} us, benchmark_app "
              f"{_f(_ms_us(p['benchmark_app_python_per_call_ms']), '.0f')} us")
        print(f"      -> p50/Median {_f(p['ratio'])}, own/own {_f(p['ratio_own'])}, wall/wall "
              f"{_f(p['ratio_wall_mean'])}, tool own/bridge {_f(p['ratio_tool_bridge'])}, "
              f"bridge/benchmark_app {_f(p['ratio_bridge_ba'])}")
    for i, p in enumerate(res["throughput"]["pairs"], 1):
        print(f"   throughput pair {i}: tool {_f(p['tool_img_s'], '.1f')} img/s ({p['tool_streams']} "
              f"streams, {p['tool_requests']} requests, {p['tool_threads']} "
              f"threads; {p['tool_requests_done']} requests in {_f(p['tool_window_ms'], '.0f')} ms "
              f"after {p['tool_warmup_requests']} warm-up; request p50 {_f(p['tool_latency_p50_ms'], '.2f')} "
              f"ms, occupancy {_f(p['tool_occupancy'])}) | "
              f"benchmark_app {_f(p['benchmark_app_img_s'], '.1f')} FPS ({p['benchmark_app_streams']} "
              f"streams, {p['benchmark_app_requests']} requests, {p['benchmark_app_threads']} "
              f"threads; {p['benchmark_app_count']} in {_f(p['benchmark_app_window_ms'], '.0f')} ms after 1 "
              f"warm-up; Median {_f(p['benchmark_app_median_ms'], '.2f')} ms, "
              f"occupancy {_f(p['benchmark_app_occupancy'])}) | bridge {_f(p['bridge_img_s'], '.1f')} FPS "
              f"({p['bridge_streams']} streams, {p['bridge_threads']} threads)")
        print(f"      -> tool/benchmark_app {_f(p['ratio'])}, tool/bridge {_f(p['ratio_tool_bridge'])}, "
              f"bridge/benchmark_app {_f(p['ratio_bridge_ba'])}")
    la, tp = res["latency"], res["throughput"]
    print(f"c. tool / benchmark_app, OpenVINO {res['model']} {res['precision']} batch 1, medians over pairs: "
          f"latency p50/Median {_f(la['median_ratio'])} (OpenVINO's own on both "
          f"sides {_f(la['median_ratio_own'])}, wall per call {_f(la['median_ratio_wall_mean'])}, "
          f"configuration alone {_f(la['median_ratio_bridge_ba'])}); throughput {_f(tp['median_ratio'])} "
          f"(same configuration {_f(tp['median_ratio_tool_bridge'])}, configuration "
          f"alone {_f(tp['median_ratio_bridge_ba'])}) (goal: within 3 % for both)", flush=True)
