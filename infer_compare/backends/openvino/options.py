"""Options of the OpenVINO runner."""

from __future__ import annotations

from dataclasses import dataclass

from infer_compare.catalog.options import Options, option

HINTS = ("LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT")


@dataclass(frozen=True)
class OpenVinoOptions(Options):
    performance_hint: str = option("LATENCY", "OpenVINO PERFORMANCE_HINT of the compiled model",
                                   choices=HINTS)
