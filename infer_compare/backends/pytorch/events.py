"""Device time of the PyTorch CUDA rows (run_cuda.py): a start and an end ``torch.cuda.Event`` per call,
created at load into a preallocated ring, recorded by the timed call and read after the loop."""

from __future__ import annotations

from typing import Any

RING_CALLS = 4096


class TorchEventRing:
    """A start and an end event (``enable_timing``) per call for ``calls`` calls, created at load."""

    def __init__(self, torch: Any, stream: Any, calls: int = RING_CALLS):
        self.slots = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(max(1, int(calls)))]
        # torch creates the CUDA event at its first record: do it now, not in a timed call
        for a, b in self.slots:
            a.record(stream)
            b.record(stream)
        stream.synchronize()
        self.calls = 0
        self.read: list[float] = []  # ms per call, in call order
        self.reads_in_loop = 0

    def begin(self) -> tuple[Any, Any]:
        """The events of the next call; a wrapped slot whose call is unread is read first."""
        n = len(self.slots)
        i = self.calls % n
        if self.calls - n >= len(self.read):
            self.read.append(float(self.slots[i][0].elapsed_time(self.slots[i][1])))
            self.reads_in_loop += 1
        self.calls += 1
        return self.slots[i]

    def times(self) -> list[float]:
        n = len(self.slots)
        for c in range(len(self.read), self.calls):
            a, b = self.slots[c % n]
            self.read.append(float(a.elapsed_time(b)))
        return list(self.read)
