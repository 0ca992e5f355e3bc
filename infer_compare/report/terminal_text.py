"""The terminal's text below the table: data made safe to print, paragraphs wrapped at word boundaries with a
hanging indent, and the skipped rows folded into one line per runtime with its install hint. results.md and
results.json keep every skipped row with its whole reason."""

from __future__ import annotations

import re
import textwrap
from collections import OrderedDict

from infer_compare.base.printable import printable
from infer_compare.base.records import SKIPPED, Report, RunRecord
from infer_compare.catalog.runtimes import runtimes


def safe(s: object, keep: str = "") -> str:
    """Text from the data, ready for a rich markup string: control characters made visible (an ESC as
    ``\\x1b``), markup brackets escaped."""
    from rich.markup import escape

    return escape(printable(s, keep))


def wrap(text: str, width: int, indent: int = 2, hang: int = 4) -> list[str]:
    """``text`` (plain, printable) as lines of at most ``width`` columns, broken only between words (a word
    longer than a line stays whole); the first line indented by ``indent`` spaces, the rest by
    ``indent + hang``."""
    return textwrap.wrap(" ".join(text.split()), width=max(width, 20), initial_indent=" " * indent,
                         subsequent_indent=" " * (indent + hang), break_long_words=False,
                         break_on_hyphens=False) or [""]


def print_wrapped(con, text: str, style: str = "", head: int = 0, head_style: str = "bold", indent: int = 2,
                  hang: int = 4) -> None:
    """Print ``text`` (data allowed: it is made printable here) wrapped at word boundaries; its first
    ``head`` characters in ``head_style``. Each line is printed as it is (rich neither wraps nor cuts it)."""
    plain = printable(text, keep="\n\t")  # line breaks and tabs: spaces between words once wrapped
    lines = wrap(plain, con.width, indent, hang)
    from rich.markup import escape

    for i, line in enumerate(lines):
        body = escape(line)
        if i == 0 and head:
            cut = len(line) - len(line.lstrip()) + head
            body = f"[{head_style}]{escape(line[:cut])}[/]{escape(line[cut:])}"
        con.print(f"[{style}]{body}[/]" if style else body, soft_wrap=True, highlight=False)


def short_reason(reason: str) -> str:
    """A skip's reason in a few words: no parenthesized details, up to its first '; ' or ': '
    ('no CUDA device found (NVML / NVIDIA driver)' -> 'no CUDA device found')."""
    s = printable(" ".join(str(reason or "").split()))
    prev = None
    while prev != s:  # innermost parentheses first
        prev, s = s, re.sub(r"\s*\([^()]*\)", "", s)
    s = re.split(r"; |: ", s, maxsplit=1)[0].strip()
    return s or "no reason given"


def _runtime_titles() -> dict[str, str]:
    try:
        return {r.name: rt.title for rt in runtimes() for r in rt.runners}
    except Exception:  # a declaration that fails to load: the runner's own name stands in
        return {}


def _precs(rows: list[RunRecord]) -> str:
    return "/".join(dict.fromkeys(r.precision for r in rows))


def _what(rows: list[RunRecord], multi_backend: bool, multi_format: bool, with_precs: bool) -> str:
    """'onnx fp32/tf32/fp16 on cpu': the rows of one reason, by backend, format and device."""
    items: OrderedDict[tuple[str, str, str], list[RunRecord]] = OrderedDict()
    for r in rows:
        items.setdefault((r.backend, r.format, r.device), []).append(r)
    out = []
    for (backend, fmt, device), its in items.items():
        parts = [backend] if multi_backend else []
        parts += [fmt] if multi_format and not (multi_backend and fmt == backend) else []
        parts += [_precs(its)] if with_precs else []
        batches = list(dict.fromkeys(r.batch_size for r in its if r.batch_size is not None))
        parts += [f"at batch {'/'.join(map(str, batches))}"] if batches else []
        out.append(" ".join([*parts, f"on {device}"]))
    return ", ".join(out)


def _clauses(rows: list[RunRecord]) -> list[str]:
    """One runtime's skipped rows as 'what (why)' clauses: rows on a device that is not here as a count
    ('8 cuda rows (no CUDA device found)'), the others by their reason."""
    groups: OrderedDict[tuple[str, str], list[RunRecord]] = OrderedDict()
    for r in rows:
        why = short_reason(r.reason)
        if r.skip_kind == "no_device":  # every row on that device: counted
            key = (r.device, why)
        else:  # 'PyTorch fp16 is measured on CUDA devices only' for fp16, tf32, bf16: one clause
            word = rf"(?<![\w.-]){re.escape(r.precision)}(?![\w.-])"
            key = ("", re.sub(word, "\0", why) if r.precision else why)
        groups.setdefault(key, []).append(r)
    multi_backend = len({r.backend for r in rows}) > 1
    multi_format = len({r.format for r in rows}) > 1
    out = []
    for (device, why), its in groups.items():
        if device:
            n = len(its)
            out.append(f"{n} {printable(device)} row{'s' if n != 1 else ''} ({why})")
            continue
        named = "\0" in why
        why = why.replace("\0", _precs(its))
        out.append(f"{_what(its, multi_backend, multi_format, not named)} ({why})")
    return out


def skip_summary(rep: Report) -> tuple[str, list[tuple[str, str, list[str]]]]:
    """('skipped (N rows, ...):', [(runtime title, its clauses joined, its distinct install hints)]), in
    table order; ('', []) when nothing was skipped."""
    skipped = [r for r in rep.rows if r.status == SKIPPED]
    if not skipped:
        return "", []
    titles = _runtime_titles()
    by_runtime: OrderedDict[str, list[RunRecord]] = OrderedDict()
    for r in skipped:
        by_runtime.setdefault(titles.get(r.backend, r.backend), []).append(r)
    lines = []
    for title, rows in by_runtime.items():
        hints = list(dict.fromkeys(" ".join(r.hint.split()) for r in rows if r.hint and r.hint.strip()))
        lines.append((title, "; ".join(_clauses(rows)), hints))
    n = len(skipped)
    head = f"skipped ({n} row{'s' if n != 1 else ''}; results.md has each with its reason):"
    return head, lines


def print_skips(rep: Report, con) -> None:
    """The skipped rows: one wrapped line per runtime, what and why, then its install hint (wrapped)."""
    head, lines = skip_summary(rep)
    if not head:
        return
    con.print(f"[dim]{safe(head)}[/]", highlight=False)
    for title, text, hints in lines:
        print_wrapped(con, f"{title}: {text}", head=len(printable(title)) + 1)
        for hint in hints:
            print_wrapped(con, f"→ {hint}", style="cyan", indent=4, hang=2)
