"""Runners: one file per runtime, all behind :class:`infer_compare.runners.base.Runner`."""
