"""The CSV of the rows: one line per row, stable column names, round-trips through
the csv module with the figures of the records."""

from __future__ import annotations

import csv
import io
import math

from infer_compare.base.records import SKIPPED
from infer_compare.report import csv as csv_report
from infer_compare.report import render

# The column names are an interface (pandas scripts read them): only ever append.
FIRST_COLUMNS = (
    "label", "model", "backend", "format", "precision", "exec_precision", "device", "batch_size", "status",
    "threads", "latency_count", "latency_mean_ms", "latency_std_ms", "latency_min_ms", "latency_p50_ms",
    "latency_p90_ms", "latency_p95_ms", "latency_p99_ms", "latency_max_ms", "throughput_img_s", "load_s",
    "first_infer_ms", "peak_rss_mb", "measured_wall_s", "artifact_path", "artifact_size_bytes", "export_s",
    "export_cached", "parity_n", "parity_max_abs", "parity_mean_abs", "parity_rel_max", "parity_cosine_mean",
    "parity_cosine_min", "top1_agreement", "top5_agreement", "accuracy", "reference_accuracy",
    "parity_judged", "parity_passed", "flops_per_image", "achieved_gflops_s", "peak_share",
    "energy_j_per_image", "reason", "hint", "versions", "created",
)


def _f(s: str) -> float | None:
    return None if s == "" else float(s)


def test_csv_round_trips(lenet_report):
    rep = lenet_report
    text = render(rep, "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(csv.reader(io.StringIO(text)).__next__()) == csv_report.COLUMN_NAMES
    assert csv_report.COLUMN_NAMES[: len(FIRST_COLUMNS)] == FIRST_COLUMNS
    assert len(rows) == len(rep.rows)  # one line per row, skips included
    assert any(r["status"] == SKIPPED and r["reason"] for r in rows)
    for line, r in zip(rows, rep.rows, strict=True):
        assert line["label"] == r.label and line["status"] == r.status and line["model"] == rep.model.name
        assert line["batch_size"] == ("" if r.batch_size is None else str(r.batch_size))
        assert line["reason"] == r.reason
        if r.latency is None:
            assert line["latency_p50_ms"] == "" and line["throughput_img_s"] == ""
            continue
        # numbers come back exactly (repr of the float)
        assert _f(line["latency_p50_ms"]) == r.latency.p50_ms
        assert _f(line["latency_p99_ms"]) == r.latency.p99_ms
        assert int(line["latency_count"]) == len(r.samples_ns)
        assert _f(line["throughput_img_s"]) == r.throughput
        assert int(line["artifact_size_bytes"]) == r.export.size_bytes
        if r.parity is not None:
            assert _f(line["parity_cosine_mean"]) == r.parity.cosine_mean
            assert _f(line["accuracy"]) == r.parity.accuracy
            assert line["parity_passed"] in ("true", "false")
        fl = rep.model.flops_per_image
        assert fl and _f(line["flops_per_image"]) == fl
        assert math.isclose(_f(line["achieved_gflops_s"]), fl * r.throughput / 1e9, rel_tol=1e-12)
        assert line["peak_share"] == ""  # CPU peak is left unknown


def test_csv_quotes_awkward_text(lenet_report):
    rep = lenet_report
    odd = 'a reason, with "quotes"\nand a second line'
    row = next(r for r in rep.rows if r.status == SKIPPED).replace(reason=odd)
    text = render(rep.replace(rows=(row,)), "csv")
    (line,) = list(csv.DictReader(io.StringIO(text)))
    assert line["reason"] == odd


def test_csv_efficiency_on_a_known_gpu(lenet_report):
    """Share of peak and energy appear when the device is in the peak table and the runner measured energy."""
    rep = lenet_report
    r = next(x for x in rep.rows if x.status == "ok" and x.throughput)
    gpu_row = r.replace(device="cuda:0", precision="fp16", exec_precision="fp16",
                        extra={"energy_j_per_image": 0.002})
    env = rep.environment.replace(gpus=({"index": 0, "name": "NVIDIA H100 80GB HBM3"},))
    rep2 = rep.replace(rows=(gpu_row,), environment=env)
    (line,) = list(csv.DictReader(io.StringIO(render(rep2, "csv"))))
    achieved = rep.model.flops_per_image * r.throughput
    assert math.isclose(_f(line["peak_share"]), achieved / 989.5e12, rel_tol=1e-12)
    assert _f(line["energy_j_per_image"]) == 0.002
