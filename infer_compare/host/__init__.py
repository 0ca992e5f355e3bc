"""This machine: the environment fingerprint, edge-board facts (Jetson, Coral, Raspberry Pi), GPUs
through NVML, energy counters, CPU int8 facts, bytecode caches, and the one way to start a child process.

Enters: nothing. Leaves: facts recorded in every report, and child processes.
May import: catalog, base."""
