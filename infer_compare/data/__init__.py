"""Inputs: the real data that ships inside packages (bundled.py) and the user's own images and
arrays (user/), preprocessed for their model.

Enters: paths and preprocessing specs. Leaves: arrays (and labels).
May import: parity, host, catalog, base."""
