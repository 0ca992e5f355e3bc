"""infer-compare: one command to export a vision model to every inference format,
run each artifact with its runtime, and compare latency, throughput and parity.

The package imports no heavy library at import time; ``compare`` and friends are
loaded lazily so that ``infer-compare --help`` works with only the core installed.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "compare", "load_report", "check_regression"]


def __getattr__(name: str):  # PEP 562 lazy attributes
    if name in ("compare", "load_report", "check_regression"):
        from . import api

        return getattr(api, name)
    raise AttributeError(name)
