"""Exporters: one file per format, all behind :class:`infer_compare.exporters.base.Exporter`."""
