"""The notes a comparison's report carries about how it measured (measure/run.py): the weights, the clock,
the measuring processes, parity, the GPU timing policy and the throughput scenario."""

from __future__ import annotations

from typing import Any

from infer_compare.base.records import THROUGHPUT
from infer_compare.measure.bench import STABLE_MIN_S, STABLE_TOLERANCE, STABLE_WINDOW


def run_notes(prep: Any, min_parity_subset: int) -> list[str]:
    """The notes every comparison's report carries: weights, the clock, the processes and parity."""
    notes = list(prep.notes)
    if not prep.minfo.meaningful_top1:
        notes.append("random weights: top-1 agreement is reported but not judged; "
                     "int8 rows are reported, not judged "
                     "(top-1 margins of random networks are tiny, so small quantization noise flips them)")
    notes.append("latency: host clock (time.perf_counter_ns) around each blocking call, inputs prepared "
                 "before timing; each sample includes the harness's per-call overhead "
                 "(see benchmarks/harness.py)")
    notes.append("each configuration runs in one child process that loads the runtime once and measures its "
                 "batch sizes in turn; parity is checked in every batch size (all inputs at the largest, a "
                 f"subset of at least {min_parity_subset} at the others unless --parity-every-batch)")
    return notes


def scenario_notes(settings: Any) -> list[str]:
    """The notes of the GPU timing policy and of the throughput scenario."""
    policy = ("the host->device and device->host copies inside each timed call" if settings.io == "host" else
              "input and output device-resident, copied before and after the timed calls")
    out = [f"GPU rows (every CUDA runner alike): {policy} (--io {settings.io}); their warm-up ends once the "
           f"calls are steady (the median of the last {STABLE_WINDOW} within {STABLE_TOLERANCE:.0%} of the "
           f"{STABLE_WINDOW} before, at least {STABLE_MIN_S * 1000:.0f} ms and --warmup calls), "
           f"at the latest after --warmup-time ({settings.warmup_time_s} s); "
           "extra.loop.warmup_stopped_by says which"]
    if THROUGHPUT in settings.scenarios:
        out.append("throughput scenario: each runtime's own concurrency (OpenVINO AsyncInferQueue with the "
                   "THROUGHPUT hint and its optimal number of requests; ONNX Runtime and LiteRT: concurrent "
                   "runs sharing the cores; CUDA: several streams) for the cell's time budget; img/s = "
                   "images completed / wall time; its latency columns are those of each request under that "
                   "load; the concurrency is in each row's settings")
    return out
