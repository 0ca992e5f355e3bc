"""The efficiency figures of a row, from the model's FLOPs (prepare/flops.py) and its measurements.

* :data:`GPU_PEAKS` holds dense peak throughput figures from NVIDIA's datasheets,
  matched by GPU name. A row's share of peak is only given where its device is in
  the table: CPU peaks depend on clocks under load, AVX-512/AMX port counts and
  turbo licences, so they are left unknown rather than guessed.
* :func:`efficiency` gives a row's achieved GFLOP/s, its share of the device's peak
  and its energy per image (when the runner measured it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from infer_compare.base.records import Report, RunRecord


@dataclass(frozen=True)
class Peak:
    device: str  # what it matched, e.g. "NVIDIA H100 SXM5"
    per_precision: dict[str, float]  # precision -> FLOP/s (int8: ops/s), dense
    source: str


_NV_DENSE = "NVIDIA datasheet, dense (the datasheet's sparsity figures halved)"
# Order matters: the first entry whose every token is in the lower-cased GPU name wins.
GPU_PEAKS: tuple[tuple[tuple[str, ...], Peak], ...] = (
    (("h200", "nvl"), Peak("NVIDIA H200 NVL", {"fp32": 60e12, "tf32": 417.5e12, "fp16": 835.5e12,
                                               "bf16": 835.5e12, "fp8": 1670.5e12, "int8": 1670.5e12},
                           _NV_DENSE)),
    (("h200",), Peak("NVIDIA H200 SXM", {"fp32": 67e12, "tf32": 494.5e12, "fp16": 989.5e12, "bf16": 989.5e12,
                                         "fp8": 1979e12, "int8": 1979e12}, _NV_DENSE)),
    (("h100", "nvl"), Peak("NVIDIA H100 NVL", {"fp32": 60e12, "tf32": 417.5e12, "fp16": 835.5e12,
                                               "bf16": 835.5e12, "fp8": 1670.5e12, "int8": 1670.5e12},
                           _NV_DENSE)),
    (("h100", "pcie"), Peak("NVIDIA H100 PCIe", {"fp32": 51e12, "tf32": 378e12, "fp16": 756.5e12,
                                                 "bf16": 756.5e12, "fp8": 1513e12, "int8": 1513e12},
                            _NV_DENSE)),
    (("h100",), Peak("NVIDIA H100 SXM5", {"fp32": 67e12, "tf32": 494.5e12, "fp16": 989.5e12, "bf16": 989.5e12,
                                          "fp8": 1979e12, "int8": 1979e12}, _NV_DENSE)),
    (("a100",), Peak("NVIDIA A100", {"fp32": 19.5e12, "tf32": 156e12, "fp16": 312e12, "bf16": 312e12,
                                     "int8": 624e12}, "NVIDIA A100 datasheet, dense")),
    (("t4",), Peak("NVIDIA T4", {"fp32": 8.1e12, "fp16": 65e12, "int8": 130e12}, "NVIDIA T4 datasheet")),
)
EDGETPU_PEAK = Peak("Coral Edge TPU", {"int8": 4e12}, "Coral Edge TPU datasheet (4 TOPS int8)")


def _norm_precision(p: str) -> str:
    p = (p or "").lower()
    for known in ("int8", "fp8", "fp16", "bf16", "tf32", "fp32"):
        if known in p.split("+")[0]:
            return known
    return p


def gpu_peak(name: str | None) -> Peak | None:
    n = (name or "").lower()
    if not n:
        return None
    for tokens, peak in GPU_PEAKS:
        if all(t in n for t in tokens):
            # "t4" must be a word: avoid matching e.g. "rtx 4090" -> no "t4" there, but be strict anyway
            if tokens == ("t4",) and not any(w == "t4" for w in n.replace("-", " ").split()):
                continue
            return peak
    return None


def device_peak(rep: Report, row: RunRecord) -> tuple[float, str] | None:
    """(peak FLOP/s for this row's device and precision, what it is) or None when unknown."""
    kind, _, idx = row.device.partition(":")
    prec = _norm_precision(row.exec_precision or row.precision)
    peak: Peak | None = None
    if kind == "cuda":
        gpus = list(rep.environment.gpus)
        g = None
        if idx.isdigit():
            g = next((x for x in gpus if x.get("index") == int(idx)), None)
            if g is None and int(idx) < len(gpus):
                g = gpus[int(idx)]
        elif gpus:
            g = gpus[0]
        peak = gpu_peak(g.get("name") if g else None)
    elif kind == "edgetpu":
        peak = EDGETPU_PEAK
    if peak is None or prec not in peak.per_precision:
        return None
    return (peak.per_precision[prec],
            f"{peak.device} {prec} peak {peak.per_precision[prec] / 1e12:g} T/s ({peak.source})")


def energy_j_per_image(row: RunRecord) -> tuple[float | None, str]:
    """(joules per image, its source) from the row's ``extra``; (None, "") where not measured.

    Runners write ``energy_j_per_image`` (energy.energy_fields) or, the NVML meter of the
    GPU runners, ``energy_mj_per_image`` (millijoules); both are read.
    """
    ex = row.extra or {}
    src = str(ex.get("energy_source") or "")
    for key, scale in (("energy_j_per_image", 1.0), ("energy_mj_per_image", 1e-3)):
        e = ex.get(key)
        if isinstance(e, (int, float)) and not isinstance(e, bool) and math.isfinite(e):
            return float(e) * scale, src
    return None, ""


def efficiency(rep: Report, row: RunRecord) -> dict[str, Any]:
    """gflops_per_s, peak_share (0..1), peak_source, energy_j_per_image, energy_source: None/"" where not
    known."""
    out: dict[str, Any] = {"gflops_per_s": None, "peak_share": None, "peak_source": "",
                           "energy_j_per_image": None, "energy_source": ""}
    fl = getattr(rep.model, "flops_per_image", None)
    if fl and row.throughput:
        achieved = fl * row.throughput
        out["gflops_per_s"] = achieved / 1e9
        pk = device_peak(rep, row)
        if pk is not None:
            out["peak_share"] = achieved / pk[0]
            out["peak_source"] = pk[1]
    out["energy_j_per_image"], out["energy_source"] = energy_j_per_image(row)
    return out
