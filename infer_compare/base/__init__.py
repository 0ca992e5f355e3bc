"""The foundation: records and their serialization, latency statistics, batches and their layout,
the artifact cache, progress callbacks, interrupts, errors and the version.

Enters: plain values. Leaves: the records every stage passes on. Imports nothing of infer_compare
above it (checked by .importlinter), and no heavy library at import time."""
