"""The terminal's answer at 80 columns for a real CPU run (ResNet-50, 20 measured rows, 30 skipped): the
parity column kept, the skipped rows one wrapped line per runtime with its install hint broken only between
words, the verdict last; results.md keeps every skipped row. Text from the data (model, labels, reasons,
notes) reaches neither the terminal nor results.md with a control character in it."""

from __future__ import annotations

import io
import itertools
import re
import subprocess

import pytest

from infer_compare.base.records import SKIPPED, Report, load_report
from infer_compare.report.markdown import render as render_md

from .conftest import PY, ROOT, python_env

REAL = ROOT / "reports" / "cpu-resnet50" / "results.json"  # a default `--model resnet50` run on a 2-core VM
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # every control character but \t and \n


def _render(rep: Report, width: int) -> str:
    from rich.console import Console

    from infer_compare.report.terminal import print_report

    buf = io.StringIO()
    print_report(rep, Console(file=buf, width=width, force_terminal=False))
    return buf.getvalue()


def _blocks(lines: list[str]) -> tuple[int, int]:
    """Where the skipped rows start and where the verdict starts."""
    skipped = next(i for i, ln in enumerate(lines) if ln.startswith("skipped ("))
    verdict = next(i for i, ln in enumerate(lines) if ln == "Verdict")
    return skipped, verdict


def _kinds(block: list[str]) -> list[str]:
    """Each line of the skipped block: 'text' (a runtime's what and why) or 'hint' (an install hint)."""
    out, kind = [], "text"
    for ln in block:
        kind = "hint" if ln.startswith("    → ") else "text" if not ln.startswith("      ") else kind
        out.append(kind)
    return out


def test_80_columns_keep_parity_fold_the_skipped_rows_and_end_with_the_verdict():
    rep = load_report(REAL)
    skipped_rows = [r for r in rep.rows if r.status == SKIPPED]
    measured = [r for r in rep.rows if r.status != SKIPPED and r.batch_size is not None]
    assert len(skipped_rows) == 30 and len(measured) == 20
    lines = _render(rep, 80).splitlines()
    assert all(len(ln) <= 80 for ln in lines), max(lines, key=len)
    head = next(i for i, ln in enumerate(lines) if ln.startswith("backend"))
    assert "cos" in lines[head].split() and "p50" in lines[head]  # the parity column is kept
    table = lines[head + 2:head + 2 + len(measured)]
    assert all(re.search(r"\b[01]\.\d{5}\b", ln) for ln in table), table  # each row's cosine
    assert "img/s not shown (results.md has them)" in " ".join(" ".join(lines[head:]).split())
    start, verdict = _blocks(lines)
    assert head < start < verdict
    block = lines[start + 1:verdict]
    runtimes = [ln for ln in block if re.match(r"  \S", ln)]  # a line per runtime, the rest its continuation
    assert [ln.split(":")[0].strip() for ln in runtimes] == [
        "PyTorch", "ONNX Runtime", "OpenVINO", "TensorRT", "LiteRT / TFLite and Edge TPU"]
    kinds = _kinds(block)
    hints = {" ".join(r.hint.split()) for r in skipped_rows if r.hint}
    assert sum(ln.startswith("    → ") for ln in block) == len(hints) == 5  # each hint once (11 lines)
    assert kinds.count("text") <= 12, "\n".join(block)  # what and why: at most 12 lines for 30 rows
    assert len(block) <= 21, "\n".join(block)  # 46 lines before (one to three per skipped row)
    assert "8 cuda rows (no CUDA device found)" in " ".join(" ".join(block).split())
    # the verdict is the last block: its heading, then its indented lines to the end
    assert lines[verdict + 1:] and all(ln.startswith("  ") for ln in lines[verdict + 1:])
    # the files keep each skipped row with its whole reason and hint
    md = render_md(rep)
    for r in skipped_rows:
        assert r.reason.replace("|", "\\|").split(" (")[0] in md
        assert not r.hint or r.hint.split(" (")[0] in md


@pytest.mark.parametrize("width", [60, 80, 120])
def test_install_hints_are_wrapped_between_words(width):
    rep = load_report(REAL)
    hints = {" ".join(r.hint.split()) for r in rep.rows if r.status == SKIPPED and r.hint}
    assert any(len(h) > width for h in hints)  # some must wrap
    lines = _render(rep, width).splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("skipped ("))
    first = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("  "))
    block = list(itertools.takewhile(lambda x: x.startswith(" "), lines[first:]))
    found = set()
    for i, ln in enumerate(block):
        if not ln.lstrip().startswith("→ "):
            continue
        part = [ln.lstrip()[2:]]
        indent = len(ln) - len(ln.lstrip())
        for nxt in block[i + 1:]:  # its continuation: indented under its text
            if not nxt.startswith(" " * (indent + 2)) or nxt.lstrip().startswith("→"):
                break
            part.append(nxt.strip())
        assert all(len(x) <= width for x in block[i:i + len(part)])
        found.add(" ".join(part))  # joined at the breaks: equal to the hint only where none cut a word
    assert found == hints


def _hostile_report() -> Report:
    from .test_terminal_widths import _rows_report

    rep = _rows_report()
    esc = "\x1b]0;pwned\x07\x1b[2J\x1b[31m"
    model = rep.model.replace(name=f"evil{esc}net\r\x7f\x9b1m")
    rows = list(rep.rows)
    rows[0] = rows[0].replace(notes=(f"note {esc}",))
    rows[4] = rows[4].replace(reason=f"cosine low {esc}")
    rows.append(rows[1].replace(backend="tensorrt", format="tensorrt", status=SKIPPED, batch_size=None,
                                latency=None, parity=None, reason=f"no TensorRT{esc} here",
                                hint=f"pip install tensorrt{esc}", skip_kind="unavailable"))
    return rep.replace(model=model, rows=tuple(rows), warnings=(f"weights {esc} odd",))


def test_printable_writes_control_characters_as_visible_escapes():
    from infer_compare.base.printable import printable

    assert printable("a\x1b[2Jb\x07\x7f\x9b\r") == "a\\x1b[2Jb\\x07\\x7f\\x9b\\x0d"
    assert printable("two\nlines\tand\x1b", keep="\n\t") == "two\nlines\tand\\x1b"
    assert printable("plain ünïcode → ok") == "plain ünïcode → ok" and printable(None) == ""


def test_escape_sequences_in_names_reach_neither_the_terminal_nor_results_md(tmp_path):
    from infer_compare.report import write_all

    rep = _hostile_report()
    rep.save(tmp_path / "results.json")
    env = python_env()
    env["COLUMNS"] = "80"
    out = subprocess.run([PY, "-m", "infer_compare", "report", str(tmp_path / "results.json")],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert not CONTROL.search(out.stdout + out.stderr), repr(CONTROL.search(out.stdout + out.stderr))
    flat = " ".join(out.stdout.split())
    assert "evil\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mnet\\x0d\\x7f\\x9b1m" in flat  # shown, harmless
    assert "weights \\x1b]0;pwned" in flat and "no TensorRT\\x1b]0;pwned" in flat
    assert "pip install tensorrt\\x1b]0;pwned" in flat
    write_all(rep, tmp_path / "files")
    md = (tmp_path / "files" / "results.md").read_text()
    assert not CONTROL.search(md), repr(CONTROL.search(md))
    assert "evil\\\\x1b\\]0;pwned" in md  # md_escape doubles the backslash: a viewer shows \x1b]0;pwned
