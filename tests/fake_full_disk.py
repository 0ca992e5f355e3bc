"""Exporters that fail as a full disk makes them fail, to prove the row says so whatever the words:
an OSError(ENOSPC), and OpenVINO's "iostream error". Used only by tests/test_disk_full.py (resolved by
"module:Class" in the export child)."""

from __future__ import annotations

import errno

from tests.fake_exporters import _Available


class NoSpaceExporter(_Available):
    def export(self, ctx, source, out_dir, precision):
        raise OSError(errno.ENOSPC, "No space left on device", str(out_dir / "model.onnx"))


class IostreamExporter(_Available):
    """OpenVINO's serializer on a full disk: no errno, only its own words."""

    def export(self, ctx, source, out_dir, precision):
        raise RuntimeError("Exception from src/core/src/pass/serialize.cpp:1234: basic_ios::clear: "
                           "iostream error")
