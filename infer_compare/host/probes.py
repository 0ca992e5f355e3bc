"""Every backend probed on this machine: the rows of ``infer-compare env`` (each runner per device kind,
each exporter per format), available or why not. Used by ``env`` and by a fleet node's advertisement."""

from __future__ import annotations

from infer_compare.base.records import Availability
from infer_compare.catalog.device_kinds import DEVICE_KINDS
from infer_compare.catalog.formats import FORMATS, RUNNERS
from infer_compare.catalog.runtimes import load_impl


def _probe(cls, device: str):
    try:
        return cls.probe(device) if device else cls.probe()
    except Exception as e:  # noqa: BLE001 - a broken backend is a row, not a crash
        return Availability(False, f"{type(e).__name__}: {e}")


def env_rows(present: dict[str, list[str]]) -> tuple[list[dict], list[dict]]:
    """(runner rows, exporter rows) of `infer-compare env`: every backend, available or why not."""
    rows = []
    for r in RUNNERS.values():
        for kind in r.device_kinds:
            devs = present.get(kind, [])
            try:
                av = _probe(load_impl(r.impl), devs[0] if devs else kind)
            except (ImportError, AttributeError) as e:
                av = Availability(False, f"{type(e).__name__}: {e}")
            if not devs and av.available:
                av = Availability(False, DEVICE_KINDS[kind].absent_reason, av.hint, av.version)
            rows.append({"backend": r.name, "device": kind, "available": av.available, "version": av.version,
                         "devices": list(devs) if av.available else [], "reason": av.reason, "hint": av.hint})
    exporters = []
    for f in FORMATS.values():
        for prec in dict.fromkeys(f.artifact_for(p) for p in f.precisions):
            try:
                av = _probe(load_impl(f.exporter_for(prec)), "")
            except (ImportError, AttributeError) as e:
                av = Availability(False, f"{type(e).__name__}: {e}")
            if any(x["format"] == f.name and x["exporter"] == f.exporter_for(prec) for x in exporters):
                continue
            exporters.append({"format": f.name, "exporter": f.exporter_for(prec), "available": av.available,
                              "version": av.version, "reason": av.reason, "hint": av.hint,
                              "precisions": [p for p in f.precisions if f.exporter_for(f.artifact_for(p)) ==
                                             f.exporter_for(prec)]})
    return rows, exporters
