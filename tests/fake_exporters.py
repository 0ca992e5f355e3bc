"""Exporters that misbehave on purpose, to prove that exports are isolated: a native crash
and a hang. Used only by tests (resolved by "module:Class" in the export child)."""

from __future__ import annotations

import os
import time

from infer_compare.backends.exporter import Exporter
from infer_compare.base.records import Availability


class _Available(Exporter):
    @classmethod
    def probe(cls):
        return Availability(True, version="test")


class CrashingExporter(_Available):
    """Dies like a converter whose native library segfaults."""

    def export(self, ctx, source, out_dir, precision):
        os.kill(os.getpid(), 11)


class HangingExporter(_Available):
    def export(self, ctx, source, out_dir, precision):
        time.sleep(3600)
