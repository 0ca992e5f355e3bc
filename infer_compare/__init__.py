"""infer-compare: one command to export a vision model to every inference format,
run each artifact with its runtime, and compare latency, throughput and parity.

    from infer_compare import compare
    report = compare("lenet5", backends=["onnxruntime"], batch_sizes=[1], output_dir="results")
    report.save("lenet5.html")                      # .json, .md, .csv or .html, by the suffix

The public names (defined in infer_compare/api.py unless said otherwise):

- ``compare()``: measure a model on every backend present; returns a ``Report``.
- ``load_report()``: read a results.json back into a ``Report``.
- ``Report``: the results (infer_compare/base/records.py); ``Report.save(path)`` writes it.
- ``check_regression()``: the regression gate between two sets of runs.
- ``export_bundle()`` / ``run_bundle()``: export here, measure on another machine.
- ``MeasureOptions``: what to measure and how, shared by all of them (measure/options.py).
- ``DataOptions``: where the inputs come from (prepare/inputs.py).
- ``Progress``: the progress callbacks, to subclass for ``compare(progress=...)`` (base/progress.py).
- ``parse_batch_sizes()``: ``"1,8,32"`` to ``(1, 8, 32)``, as ``--batch-sizes`` reads it.
- ``UsageError``: what a bad argument raises (a one-line message).

The package imports no heavy library at import time: the public names are loaded on first use
(PEP 562), so that ``infer-compare --help`` and ``import infer_compare`` work with only the core
installed.
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
    """A public name, imported from its module on first access; AttributeError for another name."""
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'infer_compare' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazy public ones included."""
    return sorted(set(globals()) | set(__all__))
