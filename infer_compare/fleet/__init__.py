"""A fleet on Ray: one bundle measured on every machine of a device lab (docs/fleet.md).

May import: soak, regress, bundle and every layer below them (never cli or api).

What enters: a bundle directory (``infer-compare export``) and the address of a Ray cluster whose
nodes joined with ``infer-compare fleet join`` (join.py: devices and runtimes as custom resources and
labels; auth.py: Ray's token authentication). What leaves: one merged Report, a machine per node
(run.py through ``merge``), with failed rows naming any node that gave no result. The bundle travels
as one archive whose hash is checked on arrival (pack.py); what runs on a node is task.py; which jobs
run where is plan.py; the executors (``infer_compare.fleet.executor``) run them. A node that gave no
report leaves a failed row per configuration (lost.py); the driver checks its token before Ray's own
retries (connect.py) and keeps Ray's output in a log file (raylog.py); ``fleet leave`` stops this
machine's node only (leave.py). The fixed work around a run (the report writers' imports, Ray's
shutdown, a node's hashing of the driver's directory) runs beside a wait (overlap.py).
"""
