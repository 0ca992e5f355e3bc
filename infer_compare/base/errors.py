"""One small hierarchy for every error the tool raises on purpose.

Exit codes (see cli.py): 0 ok, 1 parity or regression failure, 2 usage error.
"""

from __future__ import annotations


class InferCompareError(Exception):
    """Base of every deliberate error. ``str(e)`` is a one-line message for the user."""

    exit_code = 2


class UsageError(InferCompareError):
    """Bad input from the user: unknown model, bad batch list, unreadable file..."""

    exit_code = 2


class BackendUnavailable(InferCompareError):
    """A backend's software or hardware is missing. Carries the install hint."""

    def __init__(self, reason: str, hint: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.hint = hint


class ExportError(InferCompareError):
    """An exporter failed (converter error, compiler exit status...)."""


class ExportRefused(ExportError):
    """The converter refused this model: the same file and converter versions give the same refusal, so
    the artifact cache remembers it (a timeout or a crash is not remembered)."""


class RunnerError(InferCompareError):
    """A runner failed to load or run an artifact."""


class SchemaError(InferCompareError):
    """A results file cannot be read (unknown or newer schema, not a results file)."""


class DiskFullError(InferCompareError):
    """A file the run needs could not be written for lack of space: the message says "disk full (ENOSPC)"
    and where, whatever words the failing library used (base/diskfull.py)."""
