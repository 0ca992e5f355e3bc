"""Options of TensorRT: the builder's (they change the engine, so they are part of its
cache key; the exporter reads them through ``ctx.options_as(TensorRTOptions)``) and the
runner's (``io``: an alias of the common ``--io``, see plan.resolve_io)."""

from __future__ import annotations

from dataclasses import dataclass

from infer_compare.catalog.options import Options, option


@dataclass(frozen=True)
class TensorRTOptions(Options):
    workspace_mib: int = option(4096, "TensorRT builder workspace in MiB "
                                      "(TensorRT engines and the ORT TensorRT EP)",
                                flag="--tensorrt-workspace", minimum=1)
    opt_batch: int = option(0, "0: one optimization profile per measured batch (opt = that batch); "
                               "N: one profile 1..largest batch tuned for batch N", minimum=0)
    builder_optimization_level: int = option(3, "TensorRT builder optimization level "
                                                "(0-5, TensorRT's default 3; higher searches longer)",
                                             minimum=0)
    io: str = option("", "alias of --io (kept for old command lines): host copies inside each timed call, or "
                         "device-resident buffers; it sets the policy of every GPU row",
                     flag="--tensorrt-io", choices=("", "host", "device"))
