"""The null runner: returns a preallocated constant. It measures the harness's own
per-call overhead and says what it is; it never stands for a real backend."""

from __future__ import annotations

import numpy as np

from infer_compare.backends.null.options import NullOptions
from infer_compare.backends.runner import Runner
from infer_compare.base.records import Availability


class NullRunner(Runner):
    name = "null"

    @classmethod
    def probe(cls, device: str = "cpu") -> Availability:
        return Availability(True, version="n/a", devices=("cpu",), details={"what": "harness overhead only"})

    def load(self) -> None:
        n = int(self.options.runner_as(NullOptions).num_outputs)
        self._out = np.zeros((self.options.batch_size, n), dtype=np.float32)
        self.exec_precision = "none"

    def run(self, prepared):
        return self._out
