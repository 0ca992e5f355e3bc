"""Runners that misbehave on purpose, to prove the isolation: a native crash, a hang,
a Python exception, and one whose backend is 'missing'; one that answers wrongly at one
batch size only, and one that counts what the harness asks of it. Used only by tests."""

from __future__ import annotations

import gc
import os
import time

import numpy as np

from infer_compare.backends.onnxruntime.run import OnnxRuntimeRunner  # imports no onnxruntime until load()
from infer_compare.backends.runner import Runner
from infer_compare.base.errors import BackendUnavailable
from infer_compare.base.records import Availability
from infer_compare.host import gpu_turn


class _Base(Runner):
    @classmethod
    def probe(cls, device="cpu"):
        return Availability(True)

    def load(self):
        self._out = np.zeros((self.options.batch_size, 10), np.float32)

    def run(self, x):
        return self._out


class TurnRunner(_Base):
    """Writes "PID TIME" to $TURN_LOG at each call; with $TURN_RELEASE_S, its load lets its GPU turn go that
    long (host/gpu_turn.py), as torch.compile's tracing does, touching $TURN_LOG.released when it has let
    go, and, with $TURN_RELEASE_UNTIL, longer: until that file exists (at most 60 s), so that another process,
    however slow to start, has taken the turn; $TURN_LOG.returned says when it asked for the turn again."""

    def load(self):
        super().load()
        hold, turn = float(os.environ.get("TURN_RELEASE_S") or 0), gpu_turn.current()
        if hold and turn is not None:
            with turn.released():
                with open(os.environ["TURN_LOG"] + ".released", "w") as f:
                    f.write(f"{time.time()}\n")
                time.sleep(hold)
                until, t0 = os.environ.get("TURN_RELEASE_UNTIL"), time.time()
                while until and not os.path.exists(until) and time.time() - t0 < 60:
                    time.sleep(0.005)
                with open(os.environ["TURN_LOG"] + ".returned", "w") as f:
                    f.write(f"{time.time()}\n")

    def run(self, x):
        with open(os.environ["TURN_LOG"], "a") as f:
            f.write(f"{os.getpid()} {time.time()}\n")
        time.sleep(0.002)
        return self._out


class CrashRunner(_Base):
    """Dies like a segfaulting native library, in the middle of the timed loop."""

    def run(self, x):
        os.kill(os.getpid(), 11)


class HangRunner(_Base):
    def run(self, x):
        time.sleep(3600)


class RaiseRunner(_Base):
    def load(self):
        raise RuntimeError("engine deserialisation failed (simulated)")


class MissingRunner(_Base):
    def load(self):
        raise BackendUnavailable("libfoo.so.1 not found (simulated)", "pip install foo")


class CrashAtBatch4(_Base):
    """Measures at every batch size but 4, where it dies like a segfaulting native library."""

    def run(self, x):
        if self.options.batch_size == 4:
            os.kill(os.getpid(), 11)
        return self._out


class CrashInThroughput(_Base):
    """Measures the latency scenario, dies like a segfaulting native library in the throughput scenario at
    batch 1."""

    def throughput(self, batch, settings):
        if self.options.batch_size == 1:
            os.kill(os.getpid(), 11)
        return super().throughput(batch, settings)


class CountingRunner(_Base):
    """Counts what the harness asks of it: a run before the first timed call would show in
    ``runs_before_first``."""

    def load(self):
        super().load()
        self.calls, self.prepared, self.runs_before_first = 0, 0, None
        self.settings = {"io": self.options.io}

    def prepare(self, batch):
        self.prepared += 1
        return batch

    def run(self, x):
        if self.runs_before_first is None:
            self.runs_before_first = self.calls  # what ran before this, the first call
        self.calls += 1
        return self._out

    def extra_metrics(self):  # called right after the timed loop, before the parity outputs
        return {"calls": self.calls, "runs_before_first": self.runs_before_first, "prepared": self.prepared}


class PidRunner(_Base):
    """Says which process measured it, and what the process-wide state a configuration leaves looked like
    when it loaded (``LEFT``: set by the configuration before it, put back by ``reset_process_state``)."""

    LEFT: list[str] = []
    resets = 0

    @classmethod
    def reset_process_state(cls):
        cls.LEFT.clear()
        cls.resets += 1
        return {"fake_reset": cls.resets}

    def load(self):
        super().load()
        self._left = list(PidRunner.LEFT)
        PidRunner.LEFT.append(self.options.precision)

    def extra_metrics(self):
        return {"pid": os.getpid(), "left_before_load": self._left, "gc_frozen": gc.get_freeze_count()}


class WrongAtBatch8(OnnxRuntimeRunner):
    """ONNX Runtime, except that at batch 8 every output comes back with its classes reversed."""

    def to_numpy(self, outputs):
        out = super().to_numpy(outputs)
        return out[:, ::-1].copy() if self.options.batch_size == 8 else out


def main(args: list[str]) -> int:
    """For the fork server's test: print the environment variables named in ``args``."""
    for name in args:
        print(f"{name}={os.environ.get(name, '')}", flush=True)
    return 0
