"""Options of the null runner."""

from __future__ import annotations

from dataclasses import dataclass

from infer_compare.catalog.options import Options, option


@dataclass(frozen=True)
class NullOptions(Options):
    num_outputs: int = option(10, "width of the constant output", minimum=1)
