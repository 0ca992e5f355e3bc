"""check_regression: match the rows of two reports and apply the rules to each pair."""

from __future__ import annotations

import os
from collections.abc import Iterable

from infer_compare.base.errors import UsageError
from infer_compare.base.records import OK, PARITY_FAILED, SKIPPED, Report, RunRecord, load_report
from infer_compare.regress.environment import check_environment
from infer_compare.regress.judge import (
    BEST,
    CALIBRATED,
    DISTURBED_CORES,
    REFERENCE,
    TIMINGS,
    Stats,
    disturbance,
    judge,
)
from infer_compare.regress.metrics import METRICS
from infer_compare.regress.results import NA, Check, RegressionResult, RowDiff
from infer_compare.regress.rules import DEFAULT_RULES, Rule, parse_rules

NO_RULE_APPLIED = "no rule could be applied"


def as_report(x, what: str) -> Report:
    if isinstance(x, Report):
        return x
    if isinstance(x, (str, os.PathLike)):
        return load_report(x)
    raise UsageError(f"{what} must be a Report or the path of a results.json, got {type(x).__name__}")


def baseline_paths(items, what: str = "baseline") -> list[str]:
    """Paths given as baselines, directories expanded to every results.json below them (sorted)."""
    from pathlib import Path

    out: list[str] = []
    for x in [items] if isinstance(items, (str, os.PathLike)) else items:
        p = Path(x)
        if p.is_dir():
            # the directory's own run first (a run with --confirm: its confirm-K hold only the rows measured
            # again)
            found = sorted(p.rglob("results.json"), key=lambda f: (len(f.relative_to(p).parts), str(f)))
            if not found:
                raise UsageError(f"{what} directory {p} holds no results.json")
            out += [str(f) for f in found]
        else:
            out.append(str(p))
    return out


def load_runs(runs, what: str = "baseline") -> list[tuple[str, Report]]:
    """(name, Report) for each run of one side: a Report, a path (file or directory), or a list of them."""
    if isinstance(runs, Report):
        return [("", runs)]
    items = [runs] if isinstance(runs, (str, os.PathLike)) else list(runs or ())
    out: list[tuple[str, Report]] = []
    for x in items:
        if isinstance(x, Report):
            out.append(("", x))
        else:
            out += [(f"({p})", as_report(p, what)) for p in baseline_paths([x], what)]
    if not out:
        raise UsageError(f"no {what} given")
    return out


def load_baselines(baseline) -> list[tuple[str, Report]]:
    """(name, Report) for each baseline run: a Report, a path (file or directory), or a list of them."""
    return load_runs(baseline, "baseline")


def _incompleteness(rep: Report, what: str) -> str:
    """'' for a complete report, else what is missing, in a few words."""
    if rep.complete:
        return ""
    why = rep.incomplete_reason or "the run stopped early"
    n = len(rep.not_run)
    return f"{what} is incomplete ({why}; {n} cell{'s' if n != 1 else ''} did not run)"


def check_complete(current: Report | None, baseline: Report, allow: bool = False,
                   names: tuple[str, str] = ("", "")) -> list[str]:
    """Raise UsageError when either report is incomplete and ``allow`` is False; else notes about it.

    ``current`` None checks the baseline alone (before measuring). ``names`` are how to call the
    current and the baseline file in the message (their paths).
    """
    found = [x for x in (_incompleteness(baseline, f"the baseline{names[1] and ' ' + names[1]}"),
                         current and _incompleteness(current,
                                                     f"the current run{names[0] and ' ' + names[0]}"))
             if x]
    if found and not allow:
        raise UsageError("; ".join(found) + ": rows that did not run would be missing from the comparison; "
                         "re-measure, or pass --allow-incomplete (allow_incomplete=True) to compare anyway")
    notes = [f"{x}: its missing rows are listed, not judged" for x in found]
    for rep, what in ((baseline, "baseline"), (current, "current run")):
        if rep is not None and rep.not_run:
            more = len(rep.not_run) - 20
            notes.append(f"did not run in the {what}: {', '.join(rep.not_run[:20])}"
                         + (f" and {more} more" if more > 0 else ""))
    return notes


def _run_notes(base: Report, cur: Report) -> list[str]:
    """Differences of weights and settings: not refused, but said."""
    notes: list[str] = []
    if base.model.weights_hash != cur.model.weights_hash:
        notes.append(f"model weights differ (hash {base.model.weights_hash} -> {cur.model.weights_hash})")
    sa, sb = base.settings, cur.settings
    for attr in ("threads", "warmup_iters", "min_iters", "min_time_s", "parity_samples", "seed"):
        if getattr(sa, attr) != getattr(sb, attr):
            notes.append(f"setting {attr}: {getattr(sa, attr)} -> {getattr(sb, attr)}")
    if sa.parity_samples != sb.parity_samples or sa.seed != sb.seed:
        notes.append("parity and accuracy were computed on different inputs: their changes are not "
                     "comparable")
    return notes


def key_rows(rep: Report) -> dict[str, RunRecord]:
    """Rows by label; a skipped placeholder (batch None) never hides a measured row of the same label."""
    out: dict[str, RunRecord] = {}
    for r in rep.rows:
        prev = out.get(r.label)
        if prev is None or (prev.status == SKIPPED and r.status != SKIPPED):
            out[r.label] = r
    return out


def _diff_row(lab: str, bases: list[RunRecord], curs: list[RunRecord], rules: tuple[Rule, ...],
              methods: set[str], st: Stats) -> RowDiff:
    a, b = bases[0], curs[0]
    row_notes = []
    if a.threads != b.threads:
        row_notes.append(f"threads {a.threads} -> {b.threads}")
    measured = [x for x in bases if x.status in (OK, PARITY_FAILED)]
    measured_now = [x for x in curs if x.status in (OK, PARITY_FAILED)]
    checks: list[Check] = []
    if measured and b.status in (OK, PARITY_FAILED):
        for rule in rules:
            c, method = judge(rule, lab, measured, measured_now, st)
            checks.append(c)
            if method:
                methods.add(method)
        is_ref = a.backend == "pytorch" and a.format == "pytorch" and a.precision == "fp32"
        timed = [c for c in checks if c.rule.metric in _TIMED]
        if st.timing == REFERENCE and is_ref:
            row_notes.append("the reference row: its timings are judged as measured")
        elif st.timing in (REFERENCE, CALIBRATED) and timed and not any(c.calibrated for c in timed):
            row_notes.append(f"timings compared in absolute terms: no {st.timing} figure to divide by")
    elif b.status == SKIPPED and a.status != SKIPPED:
        row_notes.append(f"now skipped: {b.reason}")
    return RowDiff(lab, a, b, tuple(checks), tuple(row_notes), tuple(bases), tuple(curs))


_TIMED = tuple(k for k, m in METRICS.items() if m.samples)


def _reference_rows(reps: list[Report]) -> dict[int, RunRecord]:
    """id(row) -> its run's reference row: PyTorch fp32 measured ok on the same device, batch size and
    scenario (what --timing reference divides by)."""
    out: dict[int, RunRecord] = {}
    for rep in reps:
        refs = {(r.device, r.batch_size, r.scenario): r for r in rep.rows
                if (r.backend == "pytorch" and r.format == "pytorch" and r.precision == "fp32"
                    and r.status == OK)}
        for r in rep.rows:
            ref = refs.get((r.device, r.batch_size, r.scenario))
            if ref is not None:
                out[id(r)] = ref
    return out


def _machine(keyed: list[dict[str, RunRecord]],
             cur_keyed: list[dict[str, RunRecord]]) -> tuple[float | None, str]:
    """The machine's own change between the baseline and the current runs (pooling.machine_factor)."""
    # deferred: the CLI's start (--help, env, report) stays light without it (+1 module)
    from infer_compare.regress.pooling import machine_factor

    def quiet(rows):
        return [r for r in rows if r.status == OK and r.latency and disturbance(r) <= DISTURBED_CORES]

    pairs = []
    for lab in dict.fromkeys(k for ra in keyed for k in ra):
        a, b = (quiet([ra[lab] for ra in keyed if lab in ra]),
                quiet([rb[lab] for rb in cur_keyed if lab in rb]))
        if a and b:
            pairs.append((a, b))
    return machine_factor(pairs, METRICS["p50"])


def _validate(confidence: float, n_resamples: int, timing: str) -> None:
    if not 0.5 <= confidence < 1:
        raise UsageError(f"confidence must be in [0.5, 1), got {confidence}")
    if n_resamples < 100:
        raise UsageError(f"n_resamples must be >= 100, got {n_resamples}")
    if timing not in TIMINGS:
        raise UsageError(f"timing must be one of {', '.join(TIMINGS)}, got {timing!r}")


def check_regression(current, baseline, rules: Iterable[str | Rule] | str | None = None,
                     *, allow_environment_change: bool = False, allow_incomplete: bool = False,
                     allow_missing: bool = False, allow_condition_change: bool = False, timing: str = BEST,
                     confidence: float = 0.95, n_resamples: int = 1000, seed: int = 0) -> RegressionResult:
    """Compare ``current`` with ``baseline`` row by row under ``rules`` (e.g. ``["p50:+10%"]``).

    ``baseline`` and ``current`` are each a Report or a path (a results.json, or a directory of them), or
    a list of them: several runs of one code, pooled. ``rules`` None applies DEFAULT_RULES. Timings
    (``timing``, judge.py): ``"best"`` (the default) compares each row's fastest sustained level over the
    current runs with the same over the baseline runs (the fastest block of consecutive calls), normalized
    only when the whole machine moved; ``"reference"``: ratios to each run's PyTorch fp32 row;
    ``"calibrated"``: to the calibration workload timed before each row; ``"absolute"``: as measured. Returns
    a RegressionResult (``.passed``, ``.violations``, ``.summary()``). Raises EnvironmentMismatch (a
    UsageError) when a baseline comes from another machine or library versions and
    ``allow_environment_change`` is False; UsageError when a report is incomplete (an interrupted or killed
    run) and ``allow_incomplete`` is False, for bad rules, and for baselines of another model.
    """
    _validate(confidence, n_resamples, timing)
    curs = load_runs(current, "current run")
    bases = load_runs(baseline, "baseline")
    rule_t = parse_rules(DEFAULT_RULES if rules is None else rules)
    notes, env_diffs = _preflight(curs, bases, allow_incomplete, allow_environment_change)
    keyed = [key_rows(rep) for _, rep in bases]
    cur_keyed = [key_rows(rep) for _, rep in curs]
    machine, why = _machine(keyed, cur_keyed) if timing == BEST else (None, "")
    if why:
        notes.append(why)
    st = Stats(confidence, n_resamples, seed, timing, _reference_rows([rep for _, rep in bases + curs]),
               machine)
    methods: set[str] = set()
    diffs = _diffs(keyed, cur_keyed, rule_t, st, methods)
    if rule_t and not any(c.verdict != NA for d in diffs for c in d.checks):
        notes.append(f"{NO_RULE_APPLIED}: no measured row appears in both runs")
    if len(bases) == 1:
        notes.append("one baseline run: the noise between runs is not known, only each run's own interval; "
                     "pool several baseline runs (--baseline a.json b.json c.json, or a directory of them)")
    return RegressionResult(rule_t, tuple(diffs), tuple(env_diffs), tuple(notes), confidence,
                            "; ".join(sorted(methods)), ", ".join(rep.created for _, rep in bases),
                            ", ".join(rep.created for _, rep in curs), n_baselines=len(bases), timing=timing,
                            default_rules=rules is None, allow_missing=allow_missing,
                            allow_condition_change=allow_condition_change, n_currents=len(curs))


def _diffs(keyed: list[dict[str, RunRecord]], cur_keyed: list[dict[str, RunRecord]], rules: tuple[Rule, ...],
           st: Stats, methods: set[str]) -> list[RowDiff]:
    """One RowDiff per label of either side; the first current run that has the row decides its status
    (confirming runs hold only the rows measured again)."""
    out: list[RowDiff] = []
    for lab in dict.fromkeys([k for ra in keyed for k in ra] + [k for rb in cur_keyed for k in rb]):
        rows_a, rows_b = [ra[lab] for ra in keyed if lab in ra], [rb[lab] for rb in cur_keyed if lab in rb]
        b = rows_b[0] if rows_b else None
        if not rows_a or b is None:
            out.append(RowDiff(lab, rows_a[0] if rows_a else None, b, baselines=tuple(rows_a),
                               currents=tuple(rows_b)))
        else:
            out.append(_diff_row(lab, rows_a, [b] + [x for x in rows_b if x is not b], rules, methods, st))
    return out


def _preflight(curs: list[tuple[str, Report]], bases: list[tuple[str, Report]], allow_incomplete: bool,
               allow_env: bool) -> tuple[list[str], list[str]]:
    """Refuse what cannot be compared (another model, incomplete, another environment); the notes."""
    notes: list[str] = []
    env_diffs: list[str] = []
    model = curs[0][1].model.name
    for (name, rep), what in [(x, "baseline") for x in bases] + [(x, "current run") for x in curs]:
        if rep.model.name != model:
            raise UsageError(f"the {what}{name and ' ' + name} is of model {rep.model.name!r} and the "
                             f"current run of {model!r}: nothing to compare")
    for j, (cname, cur) in enumerate(curs):
        for i, (name, base) in enumerate(bases):
            for n in check_complete(cur if i == 0 else None, base, allow_incomplete, (cname, name)):
                if n not in notes:
                    notes.append(n)
            for d in check_environment(base.environment, cur.environment, allow_env):
                if d not in env_diffs:
                    env_diffs.append(d)
            if j == 0:
                notes += [n for n in _run_notes(base, cur) if n not in notes]
    return notes, env_diffs
