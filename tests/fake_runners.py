"""Runners that misbehave on purpose, to prove the isolation: a native crash, a hang,
a Python exception, and one whose backend is 'missing'. Used only by tests."""

from __future__ import annotations

import os
import time

import numpy as np

from infer_compare.backends.runner import Runner
from infer_compare.errors import BackendUnavailable
from infer_compare.records import Availability


class _Base(Runner):
    @classmethod
    def probe(cls, device="cpu"):
        return Availability(True)

    def load(self):
        self._out = np.zeros((self.options.batch_size, 10), np.float32)

    def run(self, x):
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
