"""The artifact chain: every artifact a run needs, built from its source through the cache in
an isolated export child, and the artifacts the user already has (given.py).

Enters: the prepared model and the selection. Leaves: ExportRecords and artifacts on disk.
May import: backends, models, data, parity, host, catalog, base."""
