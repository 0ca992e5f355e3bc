"""The regression gate: compare a run with a baseline, row by row, under rules.

    from infer_compare import check_regression, load_report
    result = check_regression("current.json", "baseline.json", ["p50:+10%", "throughput:-5%", "accuracy:-0.5"])
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
``allow_environment_change=True``; the error says what differs.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .errors import UsageError
from .records import EXPORT_FAILED, OK, PARITY_FAILED, RUN_FAILED, SKIPPED, Environment, Report, RunRecord

__all__ = ["Rule", "parse_rule", "parse_rules", "check_regression", "RegressionResult", "RowDiff", "Check",
           "EnvironmentMismatch", "environment_differences", "METRICS"]


class EnvironmentMismatch(UsageError):
    """The baseline was measured on another machine or with other library versions."""


# ------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class Metric:
    name: str
    title: str
    unit: str  # unit of absolute thresholds
    worse: int  # +1: higher is worse (latency), -1: lower is worse (throughput, accuracy)
    get: Callable[[RunRecord], float | None]
    samples: str = ""  # "quantile:<q>", "mean", "min", "max", "throughput": bootstrap statistic on raw samples
    aliases: tuple[str, ...] = ()


def _lat(attr: str) -> Callable[[RunRecord], float | None]:
    return lambda r: getattr(r.latency, attr) if r.latency is not None else None


def _par(attr: str, scale: float = 1.0) -> Callable[[RunRecord], float | None]:
    def get(r: RunRecord) -> float | None:
        v = getattr(r.parity, attr, None) if r.parity is not None else None
        return None if v is None else float(v) * scale

    return get


def _size(r: RunRecord) -> float | None:
    return r.export.size_bytes / 1e6 if r.export is not None else None


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("p50", "p50 latency", "ms", +1, _lat("p50_ms"), "quantile:50", ("median",)),
    Metric("p90", "p90 latency", "ms", +1, _lat("p90_ms"), "quantile:90"),
    Metric("p95", "p95 latency", "ms", +1, _lat("p95_ms"), "quantile:95"),
    Metric("p99", "p99 latency", "ms", +1, _lat("p99_ms"), "quantile:99"),
    Metric("mean", "mean latency", "ms", +1, _lat("mean_ms"), "mean"),
    Metric("min", "min latency", "ms", +1, _lat("min_ms"), "min"),
    Metric("max", "max latency", "ms", +1, _lat("max_ms"), "max"),
    Metric("throughput", "throughput", "img/s", -1, lambda r: r.throughput, "throughput", ("img/s", "thr", "ips")),
    Metric("accuracy", "accuracy", "pp", -1, _par("accuracy", 100.0), "", ("acc",)),
    Metric("top1", "top-1 agreement", "pp", -1, _par("top1_agreement", 100.0), "", ("top-1",)),
    Metric("top5", "top-5 agreement", "pp", -1, _par("top5_agreement", 100.0), "", ("top-5",)),
    Metric("cosine", "mean cosine similarity", "", -1, _par("cosine_mean"), "", ("cos", "parity")),
    Metric("rel_err", "max relative error", "", +1, _par("rel_max"), "", ("rel_max",)),
    Metric("load", "load time", "s", +1, lambda r: r.load_s, "", ("load_s",)),
    Metric("memory", "peak RSS", "MB", +1, lambda r: r.peak_rss_mb, "", ("rss", "peak_rss")),
    Metric("size", "artifact size", "MB", +1, _size, "", ()),
)}
_ALIASES = {a: m.name for m in METRICS.values() for a in (m.name, *m.aliases)}


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class Rule:
    """Fail when ``metric`` gets worse by more than ``threshold`` (relative when ``relative``)."""

    metric: str
    threshold: float  # >= 0; a fraction for relative rules (0.1 = 10 %), else in the metric's unit
    relative: bool

    def __post_init__(self):
        if self.metric not in METRICS:
            raise UsageError(f"unknown metric {self.metric!r}")
        if not (math.isfinite(self.threshold) and self.threshold >= 0):
            raise UsageError(f"rule threshold must be a finite number >= 0, got {self.threshold!r}")

    def __str__(self) -> str:
        m = METRICS[self.metric]
        sign = "+" if m.worse > 0 else "-"
        if self.relative:
            return f"{self.metric}:{sign}{_g(self.threshold * 100)}%"
        return f"{self.metric}:{sign}{_g(self.threshold)}"

    def describe(self) -> str:
        m = METRICS[self.metric]
        how = "rises" if m.worse > 0 else "drops"
        amount = f"{_g(self.threshold * 100)} %" if self.relative else f"{_g(self.threshold)} {m.unit}".rstrip()
        return f"{m.title} {how} by more than {amount}"


def _g(v: float) -> str:
    return f"{v:.12g}"


_RULE_RE = re.compile(
    r"^\s*(?P<metric>[A-Za-z][A-Za-z0-9_/\-]*)\s*:\s*(?P<sign>[+-]?)\s*"
    r"(?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>%|[A-Za-z/]+)?\s*$"
)


def parse_rule(text: str) -> Rule:
    """``"p50:+10%"`` -> Rule("p50", 0.10, relative=True). Raises UsageError with the reason."""
    if not isinstance(text, str):
        raise UsageError(f"a rule must be text like 'p50:+10%', got {type(text).__name__}")
    m = _RULE_RE.match(text)
    if not m:
        raise UsageError(f"bad --fail-on rule {text!r}: expected METRIC:[+|-]NUMBER[%], e.g. p50:+10%, "
                         f"throughput:-5%, accuracy:-0.5 (metrics: {', '.join(METRICS)})")
    name = _ALIASES.get(m["metric"].lower())
    if name is None:
        import difflib

        close = difflib.get_close_matches(m["metric"].lower(), list(_ALIASES), n=1)
        raise UsageError(f"bad --fail-on rule {text!r}: unknown metric {m['metric']!r}"
                         + (f" (did you mean {close[0]!r}?)" if close else "") + f"; metrics: {', '.join(METRICS)}")
    metric = METRICS[name]
    value = float(m["num"])
    if not math.isfinite(value):
        raise UsageError(f"bad --fail-on rule {text!r}: the threshold is not a finite number")
    sign = m["sign"]
    if sign and (1 if sign == "+" else -1) != metric.worse:
        worse = "an increase" if metric.worse > 0 else "a decrease"
        good = "+" if metric.worse > 0 else "-"
        raise UsageError(f"bad --fail-on rule {text!r}: for {metric.name}, a regression is {worse}; "
                         f"write {metric.name}:{good}{m['num']}{m['unit'] or ''}")
    unit = m["unit"] or ""
    relative = unit == "%"
    if unit and not relative and unit.lower() != metric.unit.lower():
        raise UsageError(f"bad --fail-on rule {text!r}: {metric.name} thresholds are in "
                         f"{metric.unit or 'its own unit (no suffix)'} or % of the baseline, not {unit!r}")
    if relative and metric.worse < 0 and value > 100:
        raise UsageError(f"bad --fail-on rule {text!r}: {metric.name} cannot drop by more than 100 %")
    return Rule(name, value / 100.0 if relative else value, relative)


def parse_rules(items: Iterable[str | Rule] | str | None) -> tuple[Rule, ...]:
    """Rules from strings (each may hold several, comma-separated) or Rule objects."""
    if items is None:
        return ()
    if isinstance(items, (str, Rule)):
        items = [items]
    out: list[Rule] = []
    for it in items:
        if isinstance(it, Rule):
            parts: list[Rule] = [it]
        else:
            if not isinstance(it, str):
                raise UsageError(f"a rule must be text like 'p50:+10%', got {type(it).__name__}")
            if not it.strip():
                raise UsageError("empty --fail-on rule")
            parts = [parse_rule(p) for p in it.split(",") if p.strip()]
            if not parts:
                raise UsageError(f"empty --fail-on rule {it!r}")
        for r in parts:
            if r not in out:
                out.append(r)
    return tuple(out)


# --------------------------------------------------------------------- environment


def environment_differences(baseline: Environment, current: Environment) -> list[str]:
    """What differs between the two fingerprints, one readable item each (empty when they match)."""
    a, b = baseline.fingerprint(), current.fingerprint()
    out: list[str] = []
    for k in sorted(set(a) | set(b)):
        if k == "libraries":
            continue
        if a.get(k) != b.get(k):
            out.append(f"{k}: {a.get(k)!r} -> {b.get(k)!r}")
    la, lb = a.get("libraries", {}) or {}, b.get("libraries", {}) or {}
    for lib in sorted(set(la) | set(lb)):
        if la.get(lib) != lb.get(lib):
            out.append(f"{lib}: {la.get(lib) or 'absent'} -> {lb.get(lib) or 'absent'}")
    return out


def check_environment(baseline: Environment, current: Environment, allow: bool = False) -> list[str]:
    """Raise EnvironmentMismatch when the environments differ and ``allow`` is False; else the differences."""
    diffs = environment_differences(baseline, current)
    if diffs and not allow:
        raise EnvironmentMismatch(
            "the baseline was measured in a different environment (" + "; ".join(diffs) + "): its timings are not "
            "comparable; re-measure the baseline here, or pass --allow-environment-change "
            "(allow_environment_change=True) to compare anyway")
    return diffs


# ---------------------------------------------------------------------- statistics


MAX_SAMPLES = 4000  # per run, thinned evenly in time order beyond this (the bootstrap stays fast)
N_BLOCKS = 20


def _blocks(samples_ns) -> Any:
    """Raw samples (ms) as an array of N_BLOCKS contiguous blocks, shape (B, L); None if too few."""
    import numpy as np

    a = np.asarray(samples_ns, dtype=np.float64) / 1e6
    if a.size > MAX_SAMPLES:
        a = a[np.linspace(0, a.size - 1, MAX_SAMPLES).round().astype(np.int64)]
    n_blocks = min(N_BLOCKS, a.size)
    if n_blocks < 2:
        return None
    length = a.size // n_blocks
    return a[: n_blocks * length].reshape(n_blocks, length)


def _stat_fn(kind: str) -> Callable[..., Any]:
    import numpy as np

    if kind.startswith("quantile:"):
        q = float(kind.split(":", 1)[1])
        return lambda x: np.percentile(x, q, axis=-1)
    if kind in ("mean", "throughput"):
        return lambda x: x.mean(axis=-1)
    if kind == "min":
        return lambda x: x.min(axis=-1)
    if kind == "max":
        return lambda x: x.max(axis=-1)
    raise ValueError(kind)


def bootstrap_ratio_ci(base_blocks, cur_blocks, kind: str, confidence: float = 0.95, n_resamples: int = 1000,
                       seed: int = 0) -> tuple[float, float, str]:
    """Confidence interval of stat(current) / stat(baseline) by a moving-block bootstrap.

    Each run's blocks of consecutive samples are resampled with replacement,
    independently for the two runs. Returns (low, high, method).
    """
    import numpy as np

    stat = _stat_fn(kind)
    ba, bb = np.asarray(base_blocks), np.asarray(cur_blocks)

    def statistic(ia, ib, axis=-1):
        ia = np.moveaxis(np.asarray(ia), axis, -1)
        ib = np.moveaxis(np.asarray(ib), axis, -1)
        xa = ba[ia].reshape(*ia.shape[:-1], -1)
        xb = bb[ib].reshape(*ib.shape[:-1], -1)
        return stat(xb) / stat(xa)

    ia0, ib0 = np.arange(ba.shape[0]), np.arange(bb.shape[0])
    from . import deps

    if deps.has("scipy"):
        import inspect

        from scipy import stats

        kw: dict[str, Any] = {}
        params = inspect.signature(stats.bootstrap).parameters
        if "rng" in params:
            kw["rng"] = np.random.default_rng(seed)
        else:
            kw["random_state"] = np.random.default_rng(seed)
        res = stats.bootstrap((ia0, ib0), statistic, n_resamples=n_resamples, batch=100, vectorized=True,
                              paired=False, axis=-1, confidence_level=confidence, method="percentile", **kw)
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        return lo, hi, "scipy.stats.bootstrap (percentile), moving blocks"
    rng = np.random.default_rng(seed)
    vals = []
    for start in range(0, n_resamples, 100):
        k = min(100, n_resamples - start)
        vals.append(statistic(rng.integers(0, ia0.size, (k, ia0.size)), rng.integers(0, ib0.size, (k, ib0.size))))
    v = np.concatenate(vals)
    alpha = (1 - confidence) / 2
    lo, hi = np.percentile(v, [100 * alpha, 100 * (1 - alpha)])
    return float(lo), float(hi), "numpy percentile bootstrap, moving blocks (scipy absent)"


# ------------------------------------------------------------------------- results

PASS = "pass"
REGRESSION = "regression"
NOISE = "within noise"
NA = "n/a"


@dataclass(frozen=True)
class Check:
    """One rule applied to one row."""

    rule: Rule
    label: str
    baseline: float | None
    current: float | None
    change: float | None  # relative: current/baseline - 1; absolute: current - baseline (metric unit)
    ci: tuple[float, float] | None  # confidence interval of ``change``; None when compared as points
    verdict: str  # pass / regression / within noise / n/a
    message: str = ""

    @property
    def broken(self) -> bool:
        return self.verdict == REGRESSION


@dataclass(frozen=True)
class RowDiff:
    label: str
    baseline: RunRecord | None
    current: RunRecord | None
    checks: tuple[Check, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def status_change(self) -> str:
        a = self.baseline.status if self.baseline is not None else "absent"
        b = self.current.status if self.current is not None else "absent"
        return a if a == b else f"{a} -> {b}"

    @property
    def status_regressed(self) -> bool:
        return (self.baseline is not None and self.current is not None and self.baseline.status == OK
                and self.current.status in (RUN_FAILED, EXPORT_FAILED, PARITY_FAILED))

    def value(self, metric: str) -> tuple[float | None, float | None]:
        g = METRICS[metric].get
        return (g(self.baseline) if self.baseline is not None else None,
                g(self.current) if self.current is not None else None)


@dataclass(frozen=True)
class RegressionResult:
    """What check_regression found. ``passed`` is False when a rule is broken or an ok row now fails."""

    rules: tuple[Rule, ...]
    rows: tuple[RowDiff, ...]
    environment_differences: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    confidence: float = 0.95
    method: str = ""
    baseline_created: str = ""
    current_created: str = ""

    @property
    def violations(self) -> tuple[str, ...]:
        out = []
        for d in self.rows:
            if d.status_regressed:
                cur = d.current
                out.append(f"{d.label}: was ok, now {cur.status if cur else '?'}"
                           + (f" ({cur.reason})" if cur is not None and cur.reason else ""))
            for c in d.checks:
                if c.broken:
                    out.append(f"{d.label}: {c.message}")
        return tuple(out)

    @property
    def checks(self) -> tuple[Check, ...]:
        return tuple(c for d in self.rows for c in d.checks)

    @property
    def passed(self) -> bool:
        return not self.violations

    def __bool__(self) -> bool:
        return self.passed

    @property
    def matched(self) -> tuple[RowDiff, ...]:
        return tuple(d for d in self.rows if d.baseline is not None and d.current is not None)

    @property
    def only_in_baseline(self) -> tuple[str, ...]:
        return tuple(d.label for d in self.rows if d.current is None)

    @property
    def only_in_current(self) -> tuple[str, ...]:
        return tuple(d.label for d in self.rows if d.baseline is None)

    def summary(self) -> str:
        """Plain text: verdict, violations, changes within noise, notes. Good for assertion messages."""
        lines = [("PASSED" if self.passed else "FAILED") + f": {len(self.matched)} rows compared, "
                 f"{len(self.rules)} rule(s): {', '.join(map(str, self.rules)) or 'none'}"]
        lines += [f"  REGRESSION {v}" for v in self.violations]
        for c in self.checks:
            if c.verdict == NOISE:
                lines.append(f"  within noise {c.label}: {c.message}")
        if self.only_in_baseline:
            lines.append(f"  only in the baseline: {', '.join(self.only_in_baseline)}")
        if self.only_in_current:
            lines.append(f"  only in the current run: {', '.join(self.only_in_current)}")
        if self.environment_differences:
            lines.append(f"  environment changed (allowed): {'; '.join(self.environment_differences)}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "rules": [str(r) for r in self.rules],
            "violations": list(self.violations),
            "confidence": self.confidence,
            "method": self.method,
            "environment_differences": list(self.environment_differences),
            "notes": list(self.notes),
            "only_in_baseline": list(self.only_in_baseline),
            "only_in_current": list(self.only_in_current),
            "rows": [
                {"label": d.label, "status": d.status_change,
                 "values": {m: dict(zip(("baseline", "current"), d.value(m), strict=True))
                            for m in ("p50", "p99", "throughput", "cosine", "accuracy")},
                 "checks": [{"rule": str(c.rule), "baseline": c.baseline, "current": c.current, "change": c.change,
                             "ci": list(c.ci) if c.ci else None, "verdict": c.verdict, "message": c.message}
                            for c in d.checks],
                 "notes": list(d.notes)}
                for d in self.rows
            ],
        }


# --------------------------------------------------------------------------- check


def _as_report(x, what: str) -> Report:
    if isinstance(x, Report):
        return x
    if isinstance(x, (str, os.PathLike)):
        from .records import load_report

        return load_report(x)
    raise UsageError(f"{what} must be a Report or the path of a results.json, got {type(x).__name__}")


def _fmt(v: float | None, unit: str = "") -> str:
    if v is None:
        return "–"
    a = abs(v)
    s = f"{v:.4g}" if a < 1000 else f"{v:,.0f}"
    return f"{s} {unit}".rstrip()


def _apply(rule: Rule, label: str, a: RunRecord, b: RunRecord, confidence: float, n_resamples: int,
           seed: int) -> tuple[Check, str]:
    m = METRICS[rule.metric]
    va, vb = m.get(a), m.get(b)
    if va is None or vb is None:
        return Check(rule, label, va, vb, None, None, NA, f"{m.title}: not measured in "
                     + ("either run" if va is None and vb is None else "the baseline" if va is None
                        else "the current run")), ""
    if rule.relative:
        if va == 0:
            return Check(rule, label, va, vb, None, None, NA, f"{m.title}: baseline is 0, no relative change"), ""
        change = vb / va - 1.0
    else:
        change = vb - va
    t = rule.threshold
    ci: tuple[float, float] | None = None
    method = ""
    if m.samples and a.samples_ns and b.samples_ns:
        ba, bb = _blocks(a.samples_ns), _blocks(b.samples_ns)
        if ba is not None and bb is not None:
            lo, hi, method = bootstrap_ratio_ci(ba, bb, m.samples, confidence, n_resamples, seed)
            if m.samples == "throughput":
                # throughput ~ batch / mean latency: invert the latency-ratio interval and anchor it to
                # the observed throughput ratio (which also carries the loop's own overhead).
                obs = vb / va
                point = float(_stat_fn("mean")(bb.reshape(-1)) / _stat_fn("mean")(ba.reshape(-1)))
                lo, hi = obs * point / hi, obs * point / lo
            ci = (lo - 1.0, hi - 1.0) if rule.relative else (va * lo - va, va * hi - va)
    beyond = change > t if m.worse > 0 else change < -t
    if not beyond:
        verdict = PASS
    elif ci is None:
        verdict = REGRESSION
    else:
        sure = ci[0] > t if m.worse > 0 else ci[1] < -t
        verdict = REGRESSION if sure else NOISE
    chg = f"{change * 100:+.1f} %" if rule.relative else f"{change:+.4g} {m.unit}".rstrip()
    ci_txt = ""
    if ci is not None:
        ci_txt = (f", {confidence:.0%} CI [{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}] %" if rule.relative
                  else f", {confidence:.0%} CI [{ci[0]:+.4g}, {ci[1]:+.4g}] {m.unit}".rstrip())
    msg = f"{m.title} {_fmt(va, m.unit)} -> {_fmt(vb, m.unit)} ({chg}{ci_txt}); rule {rule}"
    if verdict == NOISE:
        msg += ": beyond the threshold, but not by more than the measured spread"
    elif verdict == REGRESSION and ci is None and m.samples:
        msg += " (no raw samples: compared as points, no noise allowance)"
    return Check(rule, label, va, vb, change, ci, verdict, msg), method


def check_regression(current: Report | str | os.PathLike, baseline: Report | str | os.PathLike,
                     rules: Iterable[str | Rule] | str | None = (), *, allow_environment_change: bool = False,
                     confidence: float = 0.95, n_resamples: int = 1000, seed: int = 0) -> RegressionResult:
    """Compare ``current`` with ``baseline`` row by row under ``rules`` (e.g. ``["p50:+10%"]``).

    Returns a RegressionResult (``.passed``, ``.violations``, ``.summary()``).
    Raises EnvironmentMismatch (a UsageError) when the baseline comes from another
    machine or library versions and ``allow_environment_change`` is False, and
    UsageError for bad rules or baselines of another model.
    """
    cur = _as_report(current, "current")
    base = _as_report(baseline, "baseline")
    rule_t = parse_rules(rules)
    if not 0.5 <= confidence < 1:
        raise UsageError(f"confidence must be in [0.5, 1), got {confidence}")
    if n_resamples < 100:
        raise UsageError(f"n_resamples must be >= 100, got {n_resamples}")
    if base.model.name != cur.model.name:
        raise UsageError(f"the baseline is of model {base.model.name!r} and the current run of "
                         f"{cur.model.name!r}: nothing to compare")
    env_diffs = check_environment(base.environment, cur.environment, allow_environment_change)
    notes: list[str] = []
    if base.model.weights_hash != cur.model.weights_hash:
        notes.append(f"model weights differ (hash {base.model.weights_hash} -> {cur.model.weights_hash})")
    sa, sb = base.settings, cur.settings
    for attr in ("threads", "warmup_iters", "min_iters", "min_time_s", "parity_samples", "seed"):
        if getattr(sa, attr) != getattr(sb, attr):
            notes.append(f"setting {attr}: {getattr(sa, attr)} -> {getattr(sb, attr)}")
    if sa.parity_samples != sb.parity_samples or sa.seed != sb.seed:
        notes.append("parity and accuracy were computed on different inputs: their changes are not comparable")

    def key_rows(rep: Report) -> dict[str, RunRecord]:
        out: dict[str, RunRecord] = {}
        for r in rep.rows:
            prev = out.get(r.label)
            # a skipped placeholder (batch None) never hides a measured row of the same label
            if prev is None or (prev.status == SKIPPED and r.status != SKIPPED):
                out[r.label] = r
        return out

    ra, rb = key_rows(base), key_rows(cur)
    labels = list(ra) + [k for k in rb if k not in ra]
    diffs: list[RowDiff] = []
    methods: set[str] = set()
    for lab in labels:
        a, b = ra.get(lab), rb.get(lab)
        if a is None or b is None:
            diffs.append(RowDiff(lab, a, b))
            continue
        row_notes = []
        if a.threads != b.threads:
            row_notes.append(f"threads {a.threads} -> {b.threads}")
        if a.exec_precision != b.exec_precision:
            row_notes.append(f"executed precision {a.exec_precision or '?'} -> {b.exec_precision or '?'}")
        checks: list[Check] = []
        if a.status in (OK, PARITY_FAILED) and b.status in (OK, PARITY_FAILED):
            for rule in rule_t:
                c, method = _apply(rule, lab, a, b, confidence, n_resamples, seed)
                checks.append(c)
                if method:
                    methods.add(method)
        elif b.status == SKIPPED and a.status != SKIPPED:
            row_notes.append(f"now skipped: {b.reason}")
        diffs.append(RowDiff(lab, a, b, tuple(checks), tuple(row_notes)))
    if rule_t and not any(c.verdict != NA for d in diffs for c in d.checks):
        notes.append("no rule could be applied: no measured row appears in both runs")
    return RegressionResult(rule_t, tuple(diffs), tuple(env_diffs), tuple(notes), confidence,
                            "; ".join(sorted(methods)), base.created, cur.created)


# ------------------------------------------------------------------------- display


def print_result(result: RegressionResult, console=None, show_all: bool = False) -> None:
    """A rich table of the changes per row, then the verdict."""
    import sys

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    con = console or (Console() if sys.stdout.isatty() else Console(width=200))
    t = Table(header_style="bold", pad_edge=False, title="changes against the baseline "
              f"({escape(result.baseline_created)} -> {escape(result.current_created)})")
    for col in ("row", "status", "p50 ms", "p99 ms", "img/s", "cos", "acc %", "rules"):
        t.add_column(col, justify="left" if col in ("row", "status", "rules") else "right")

    def cell(d: RowDiff, metric: str, rel: bool = True) -> str:
        va, vb = d.value(metric)
        if va is None and vb is None:
            return "–"
        if va is None or vb is None:
            return f"{_fmt(va)} → {_fmt(vb)}"
        if rel and va:
            ch = f"{(vb / va - 1) * 100:+.1f}%"
        else:
            ch = f"{vb - va:+.3g}"
        return f"{_fmt(va)} → {_fmt(vb)} ({ch})"

    for d in result.rows:
        if d.baseline is None or d.current is None:
            continue
        if not show_all and d.baseline.status == SKIPPED and d.current.status == SKIPPED:
            continue
        verdicts = []
        for c in d.checks:
            if c.verdict == REGRESSION:
                verdicts.append(f"[bold red]{escape(str(c.rule))} broken[/]")
            elif c.verdict == NOISE:
                verdicts.append(f"[yellow]{escape(str(c.rule))} within noise[/]")
        if d.status_regressed:
            verdicts.insert(0, "[bold red]now failing[/]")
        if d.checks and not verdicts:
            verdicts.append("[green]ok[/]")
        status = escape(d.status_change)
        t.add_row(escape(d.label), status if "->" not in status else f"[red]{status}[/]",
                  cell(d, "p50"), cell(d, "p99"), cell(d, "throughput"), cell(d, "cosine", rel=False),
                  cell(d, "accuracy", rel=False), ", ".join(verdicts) or "–")
    con.print(t)
    for n in result.notes:
        con.print(f"[dim]note:[/] {escape(n)}")
    for d in result.rows:
        for n in d.notes:
            con.print(f"[dim]{escape(d.label)}:[/] {escape(n)}")
    if result.environment_differences:
        con.print(f"[yellow]environment changed (allowed):[/] {escape('; '.join(result.environment_differences))}")
    if result.only_in_baseline:
        con.print(f"[dim]only in the baseline: {escape(', '.join(result.only_in_baseline))}[/]")
    if result.only_in_current:
        con.print(f"[dim]only in the current run: {escape(', '.join(result.only_in_current))}[/]")
    for c in result.checks:
        if c.verdict == NOISE:
            con.print(f"[yellow]within noise[/] {escape(c.label)}: {escape(c.message)}")
    if result.method:
        con.print(f"[dim]noise allowance: {result.confidence:.0%} confidence intervals by {escape(result.method)}[/]")
    if result.passed:
        con.print(f"[bold green]no regression[/] ({len(result.matched)} rows compared; rules: "
                  f"{escape(', '.join(map(str, result.rules)) or 'none (status changes only)')})")
    else:
        con.print(f"[bold red]REGRESSION[/] ({len(result.violations)}):")
        for v in result.violations:
            con.print(f"  [red]{escape(v)}[/]")


def rules_help() -> str:
    return ("METRIC:[+|-]NUMBER[%]; metrics: " + ", ".join(
        f"{m.name} ({m.unit or 'no unit'})" for m in METRICS.values()))

