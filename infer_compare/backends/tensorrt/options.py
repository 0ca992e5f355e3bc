"""Options of TensorRT: the builder's (they change the engine, so they are part of its
cache key) and the runner's."""

from __future__ import annotations

from dataclasses import dataclass

from ...options import Options, option


@dataclass(frozen=True)
class TensorRTOptions(Options):
    workspace_mib: int = option(4096, "TensorRT builder workspace in MiB (TensorRT engines and the ORT TensorRT EP)",
                                flag="--tensorrt-workspace", minimum=1)
    opt_batch: int = option(0, "batch size the engine's optimization profile is tuned for (0: the largest measured)",
                            minimum=0)
    io: str = option("host", "TensorRT timed call with host copies (host, as trtexec) or device-resident buffers",
                     flag="--tensorrt-io", choices=("host", "device"))
