"""PyTorch eager. On the CPU, fp32: the reference's own runtime, as a row of its own."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import deps
from ..records import Availability
from .base import Runner


class PyTorchRunner(Runner):
    name = "pytorch"

    @classmethod
    def probe(cls, device: str = "cpu") -> Availability:
        if not deps.has("torch"):
            return Availability(False, "PyTorch is not installed", deps.hint("torch"))
        v = deps.version("torch")
        if device.startswith("cuda"):
            return Availability(False, "the PyTorch CUDA runner is not part of this version", deps.hint("torch"),
                                version=v)
        return Availability(True, version=v, devices=("cpu",))

    @classmethod
    def supports(cls, fmt: str, precision: str, device: str) -> Availability:
        if device == "cpu" and precision != "fp32":
            return Availability(False, f"PyTorch {precision} is measured on CUDA devices only (CPU eager runs fp32)")
        return Availability(True)

    def load(self) -> None:
        import torch

        from ..models import build_architecture

        if self.options.threads:
            torch.set_num_threads(int(self.options.threads))
        torch.set_grad_enabled(False)
        model = build_architecture(self.options.model)
        model.load_state_dict(torch.load(self.artifact, map_location="cpu", weights_only=True))
        self.model = model.eval()
        self._torch = torch
        self.exec_precision = "fp32"
        self.settings = {"threads": torch.get_num_threads(), "mode": "eager, inference_mode",
                         "mkldnn": bool(torch.backends.mkldnn.is_available())}

    def prepare(self, batch: np.ndarray) -> Any:
        return self._torch.from_numpy(np.ascontiguousarray(batch))

    def run(self, prepared: Any) -> Any:
        with self._torch.inference_mode():
            return self.model(prepared)

    def to_numpy(self, outputs: Any) -> np.ndarray:
        return outputs.float().cpu().numpy()

    def library_versions(self) -> dict[str, str]:
        return {"torch": self._torch.__version__}
