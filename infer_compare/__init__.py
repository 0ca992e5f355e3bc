"""infer-compare: one command to export a vision model to every inference format,
run each artifact with its runtime, and compare latency, throughput and parity.

    from infer_compare import compare, DataOptions
    report = compare("mobilenet_v2", data="/path/to/photos")          # or data=DataOptions(...)

The package imports no heavy library at import time: the public names below are
loaded on first use (PEP 562), so that ``infer-compare --help`` and ``import
infer_compare`` work with only the core installed.
"""

from __future__ import annotations

from infer_compare.base.version import __version__

# public name -> the module that defines it (imported on first access)
_LAZY = {
    "compare": "api", "load_report": "api", "check_regression": "api", "Progress": "api",
    "parse_batch_sizes": "api", "DataOptions": "api", "MeasureOptions": "api", "export_bundle": "api",
    "run_bundle": "api", "Report": "api", "UsageError": "api",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):  # PEP 562 lazy attributes
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'infer_compare' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
