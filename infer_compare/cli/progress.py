"""The progress display on stderr: defined in base/progress_display.py, where the Python API uses it too."""

from __future__ import annotations

from infer_compare.base.progress_display import RichProgress, _columns  # noqa: F401  (re-exported)
