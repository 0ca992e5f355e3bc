"""Measuring: the plan of cells (measure/plan.py), each cell in an isolated child (measure/isolate.py,
child.py, the fork server), the harness that owns the clock (measure/bench.py), and the rows out
(measure/rows.py); run.py drives a whole comparison.

Enters: a Prepared model, the Selection. Leaves: a Report.
May import: report, prepare, build and everything below them."""
