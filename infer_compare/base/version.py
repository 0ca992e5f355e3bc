"""The package's version (read by pyproject.toml and recorded in every report)."""

__version__ = "0.1.0"
