"""Text from the data (model, bundle and file names, labels, reasons, notes) made safe to print: a control
character would otherwise reach the terminal or a Markdown file as it is (ESC [2J clears the screen,
ESC ]0; sets the window title, a carriage return overwrites the line). The terminal and Markdown
renderers pass every such text through :func:`printable` (HTML and CSV escape by their own rules)."""

from __future__ import annotations

import re

# C0 controls, DEL and C1 controls (0x80-0x9f: 0x9b is a one-byte CSI on some terminals). ESC (0x1b) is
# among them: an escape sequence loses its ESC and the rest of it is plain visible text.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _visible(m: re.Match) -> str:
    return f"\\x{ord(m.group()):02x}"


def printable(text: object, keep: str = "") -> str:
    """``text`` with each control character written as a visible escape (ESC as ``\\x1b``); those in
    ``keep`` (``"\\n\\t"`` where a line break or a tab is legitimate) stay. None gives ''."""
    if text is None:
        return ""
    s = str(text)
    if not _CONTROL.search(s):
        return s
    if keep:
        return _CONTROL.sub(lambda m: m.group() if m.group() in keep else _visible(m), s)
    return _CONTROL.sub(_visible, s)
