"""The PyTorch "format": the model's state dict, which the PyTorch runner rebuilds.
It is produced by the model loader (pretrained file, trained or random weights), so
this exporter only answers the probe."""

from __future__ import annotations

from infer_compare.backends.exporter import Exporter
from infer_compare.base.records import Availability
from infer_compare.catalog import deps


class PyTorchExporter(Exporter):
    format = "pytorch"

    @classmethod
    def probe(cls) -> Availability:
        if not deps.has("torch"):
            return Availability(False, "PyTorch is not installed", deps.hint("torch"))
        return Availability(True, version=deps.version("torch"))
