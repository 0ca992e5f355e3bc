"""The regression gate: compare a run with a baseline, row by row, under rules.

Enters: the current and baseline Reports and the rules. Leaves: a RegressionResult. May import:
bundle, measure, report and every layer below them (never soak).

    from infer_compare import check_regression, load_report
    result = check_regression("current.json", "baseline.json",
                              ["p50:+10%", "throughput:-5%", "accuracy:-0.5"])
    assert result.passed, result.summary()

Rows are matched by ``RunRecord.label`` (backend/format/precision/device/batch).

Rules are ``METRIC:[+|-]NUMBER[%]``. The sign, when given, must point in the
direction that is worse for the metric (latency up, throughput down...). With
``%`` the threshold is relative to the baseline; without, it is in the metric's
unit (ms, img/s, percentage points for accuracy and agreement, ...).

Noise: a latency or throughput change counts as a regression only when the whole
confidence interval of the change lies beyond the threshold. The interval comes
from a moving-block bootstrap over each run's raw samples (``RunRecord.samples_ns``,
kept in time order): blocks of consecutive calls are resampled, so that slow
drifts within a run (a neighbour process waking up, frequency changes) widen
the interval instead of being mistaken for a real change. ``scipy.stats.bootstrap``
does the resampling when scipy is installed; otherwise the same percentile
bootstrap runs in numpy. Accuracy, agreement and parity figures are computed on
the same inputs in both runs, so they are compared directly.

A baseline from a different machine or library versions is refused unless
``allow_environment_change=True``; the error says what differs. An incomplete
report (an interrupted run, ``Report.complete`` False), baseline or current, is
refused unless ``allow_incomplete=True``: its missing rows would otherwise pass
unnoticed.

Modules: ``metrics`` (what a rule can name), ``rules`` (parsing), ``environment``,
``noise`` (the bootstrap), ``results`` (Check, RowDiff, RegressionResult), ``check``
(matching rows and applying rules), ``printing`` (the terminal view).
"""

from __future__ import annotations

from infer_compare.regress.check import check_complete, check_regression, key_rows
from infer_compare.regress.environment import EnvironmentMismatch, check_environment, environment_differences
from infer_compare.regress.metrics import METRICS, Metric, fmt_value
from infer_compare.regress.noise import MAX_SAMPLES, N_BLOCKS, bootstrap_ratio_ci, sample_blocks, stat_fn
from infer_compare.regress.printing import print_result
from infer_compare.regress.results import NA, NOISE, PASS, REGRESSION, Check, RegressionResult, RowDiff
from infer_compare.regress.rules import Rule, parse_rule, parse_rules, rules_help

__all__ = ["Rule", "parse_rule", "parse_rules", "check_regression", "RegressionResult", "RowDiff", "Check",
           "EnvironmentMismatch", "environment_differences", "METRICS", "Metric", "check_environment",
           "check_complete", "print_result", "rules_help", "bootstrap_ratio_ci", "sample_blocks", "stat_fn",
           "key_rows", "fmt_value", "MAX_SAMPLES", "N_BLOCKS", "PASS", "REGRESSION", "NOISE", "NA"]
