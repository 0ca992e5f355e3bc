"""The gate's verdict as Markdown and HTML sections, written into results.md and results.html beside the
report they judge (and gate.md): the verdict, every violation, every row not judged and why, each row's
checks with the figure each side had."""

from __future__ import annotations

import html

from infer_compare.regress.metrics import METRICS, fmt_value
from infer_compare.regress.results import REGRESSION, RegressionResult


def verdict_line(result: RegressionResult) -> str:
    if not result.passed:
        return f"REGRESSION: {len(result.violations)} violation(s)"
    if not result.matched:
        return "NOTHING COMPARED: no row was measured in both runs (not a pass)"
    if result.unjudged:
        return f"NOT JUDGED: {len(result.unjudged)} check(s) could not be judged (not a pass)"
    return "PASS: no regression"


def _md(s: str) -> str:
    return html.escape(str(s), quote=False).replace("|", "\\|").replace("\n", " ")


def _change(c) -> str:
    if c.change is None:
        return "–"
    out = f"{c.change * 100:+.1f} %" if c.rule.relative else f"{c.change:+.4g}"
    if c.ci:
        lo, hi = c.ci
        out += f" [{lo * 100:+.1f}, {hi * 100:+.1f}]" if c.rule.relative else f" [{lo:+.4g}, {hi:+.4g}]"
    return out


def _rows(result: RegressionResult) -> list[tuple[str, str, str, str, str, str]]:
    out = []
    for d in result.rows:
        for c in d.checks:
            m = METRICS[c.rule.metric]
            out.append((d.label, str(c.rule), fmt_value(c.baseline, m.value_unit),
                        fmt_value(c.current, m.value_unit), _change(c),
                        ("VIOLATES: " if c.verdict == REGRESSION else "") + c.verdict))
    return out


def to_markdown(result: RegressionResult) -> str:
    lines = ["## Regression gate", "", f"**{_md(verdict_line(result))}**", "",
             f"Rules: {_md(result.rules_text)}; timings: {_md(result.timing)}"
             + (f" ({_md(result.method)})" if result.method else ""), ""]
    if result.violations:
        lines += ["Violations:", ""] + [f"- {_md(v)}" for v in result.violations] + [""]
    if result.unjudged:
        lines += ["Not judged (not a pass):", ""] + [f"- {_md(u)}" for u in result.unjudged] + [""]
    rows = _rows(result)
    if rows:
        lines += [f"| row | rule | baseline | current | {_ci_head(result)} | verdict |",
                  "|---|---|---|---|---|---|"]
        lines += ["| " + " | ".join(_md(x) for x in r) + " |" for r in rows]
        lines.append("")
    lines += [f"- note: {_md(n)}" for n in result.notes]
    return "\n".join(lines) + "\n"


def _ci_head(result: RegressionResult) -> str:
    return f"change [{result.confidence * 100:.0f} % CI]"


def to_html(result: RegressionResult) -> str:
    e = html.escape
    colour = "#b00020" if not result.passed else "#a06000" if result.unjudged else "#1b5e20"
    parts = ['<section id="gate"><h2>Regression gate</h2>',
             f'<p style="color:{colour};font-weight:bold">{e(verdict_line(result))}</p>',
             f"<p>Rules: {e(result.rules_text)}; timings: {e(result.timing)}"
             + (f" ({e(result.method)})" if result.method else "") + "</p>"]
    for title, items in (("Violations", result.violations), ("Not judged (not a pass)", result.unjudged)):
        if items:
            parts.append(f"<h3>{e(title)}</h3><ul>" + "".join(f"<li>{e(x)}</li>" for x in items) + "</ul>")
    rows = _rows(result)
    if rows:
        head = "".join(f"<th>{e(h)}</th>" for h in ("row", "rule", "baseline", "current", _ci_head(result),
                                                    "verdict"))
        body = "".join("<tr>" + "".join(f"<td>{e(x)}</td>" for x in r) + "</tr>" for r in rows)
        parts.append(f"<table><tr>{head}</tr>{body}</table>")
    parts.append("</section>")
    return "".join(parts)
