"""Type-driven (de)serialisation of frozen dataclasses: ``Record.to_dict`` / ``from_dict``.

Sequences are tuples so that every record is hashable and immutable; JSON turns them
into lists and ``from_dict`` turns them back. Used by the result records, the cell
spec and result that cross the process boundary, and the typed options.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Union

from infer_compare.base.errors import SchemaError


class Record:
    """Mixin: generic, type-driven (de)serialisation for the frozen dataclasses below."""

    def to_dict(self) -> dict[str, Any]:
        return encode(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        return decode(cls, d)

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


def encode(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: encode(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, (tuple, list)):
        return [encode(x) for x in v]
    if isinstance(v, dict):
        return {str(k): encode(x) for k, x in v.items()}
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else (1e308 if v > 0 else -1e308)
    return v


def decode(tp: Any, v: Any) -> Any:
    if v is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return decode(args[0], v) if len(args) == 1 else v
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(v, dict):
            raise SchemaError(f"expected an object for {tp.__name__}, got {type(v).__name__}")
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in v:
                kwargs[f.name] = decode(hints[f.name], v[f.name])
        try:
            return tp(**kwargs)
        except TypeError as e:
            raise SchemaError(f"cannot read {tp.__name__}: {e}") from e
    if origin is tuple:
        args = typing.get_args(tp)
        inner = args[0] if args else Any
        return tuple(decode(inner, x) for x in v)
    if origin is dict:
        args = typing.get_args(tp)
        inner = args[1] if len(args) == 2 else Any
        return {k: decode(inner, x) for k, x in v.items()}
    return v
