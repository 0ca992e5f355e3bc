"""One package per runtime: ``backends/<runtime>/`` holds its declaration (``__init__.py``), its
exporter (``export.py``), its runner (``run.py``), its options (``options.py``) and its own helpers.

Enters: an artifact, a device and typed options. Leaves: a Runner (``runner.py``: probe, load, infer,
close) and an Exporter (``exporter.py``). May import: models, data, parity, host, catalog, base.
No runtime package imports another (the independence contract in .importlinter); the catalog finds
the declarations by name (catalog/runtimes.py). Adding a runtime is one new folder here
(docs/architecture.md, "Adding a runtime"), plus a row in catalog/formats.py for a new format.
"""
