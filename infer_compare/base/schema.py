"""Validating the JSON documents the tool did not just write (results.json from a CI artifact or a
board, bundle manifests copied over a network) before anything uses them, with pydantic.

``read_json`` parses with pydantic-core's parser (jiter): nesting deeper than its bound (200 levels)
and files over a size bound are refused in one line, never a RecursionError or a MemoryError.
``validate`` checks a parsed document against a frozen record dataclass (base/serial.Record) in full:
every field's type strictly (a string is not a number, ``true`` is not 1), required fields present,
and, through ``fields``, the known keys of the free-form dicts (``RunRecord.extra``, ...) and the
allowed values of enum-like strings. Unknown keys are ignored (newer writers add fields; older
readers read on). Every failure is one ``SchemaError`` line naming the file, the field and what was
expected. pydantic stays inside these functions: importing this module costs nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import types
import typing
from typing import Any, Union

from infer_compare.base.errors import SchemaError

MAX_JSON_BYTES = 512 << 20  # a results file with every latency sample of a long run stays far below this


def read_json(path: str | os.PathLike, *, what: str, max_bytes: int = MAX_JSON_BYTES,
              error: type[Exception] = SchemaError) -> Any:
    """The parsed JSON of ``path``; ``error`` (one line) when it is missing, too big, not UTF-8 JSON
    or nested deeper than the parser's bound."""
    from pydantic_core import from_json

    try:
        size = os.stat(path).st_size
        if size > max_bytes:
            raise error(f"{path}: {what} of {size} bytes is larger than {max_bytes >> 20} MiB; refused")
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise error(f"{what} not found: {path}") from None
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror or e}") from None
    try:
        data.decode("utf-8")
        return from_json(data, allow_inf_nan=True)
    except (ValueError, UnicodeDecodeError) as e:
        raise error(f"{path} is not a JSON {what}: {_one_line(str(e))}") from None


def _one_line(s: str) -> str:
    return " ".join(s.split())


def location(loc: tuple[Any, ...]) -> str:
    """('rows', 3, 'latency', 'median_ms') -> 'rows[3].latency.median_ms'."""
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def describe(exc: Any, where: str) -> str:
    """One line for a pydantic ValidationError: the file, the first bad field, what was expected."""
    errs = exc.errors(include_url=False)
    e = errs[0]
    got = repr(e.get("input"))
    got = got if len(got) <= 60 else got[:57] + "..."
    more = f" (and {len(errs) - 1} more problem{'s' if len(errs) > 2 else ''})" if len(errs) > 1 else ""
    what = "required, missing" if e["type"] == "missing" else f"{e['msg']}, got {got}"
    return _one_line(f"{where}: field {location(tuple(e['loc']))}: {what}{more}")


def validate(tp: type, obj: Any, *, where: str, fields: dict[str, Any] | None = None,
             error: type[Exception] = SchemaError) -> None:
    """Check ``obj`` (parsed JSON) against the dataclass ``tp``; ``error`` names the first bad field.

    ``fields`` maps "Class.field" to the type to check that field against instead of its annotation
    (a Literal of the allowed values, a TypedDict of a free-form dict's known keys); "Class.*" set to
    ``None`` lets every float field of that class be null (where NaN is written as null: the parity
    figures of NaN outputs)."""
    from pydantic import ValidationError

    adapter = _adapter(tp, tuple(sorted((fields or {}).items(), key=lambda kv: kv[0])))
    try:
        adapter.validate_python(obj, strict=True)
    except ValidationError as e:
        raise error(describe(e, where)) from None
    except RecursionError:
        raise error(f"{where}: nested too deeply; refused") from None


def check_type(tp: Any, obj: Any, *, where: str, error: type[Exception] = SchemaError) -> None:
    """Check ``obj`` against a plain type (a TypedDict, ``list[int]``...) in pydantic's strict mode."""
    from pydantic import ValidationError

    try:
        _plain_adapter(tp).validate_python(obj, strict=True)
    except ValidationError as e:
        raise error(describe(e, where)) from None
    except RecursionError:
        raise error(f"{where}: nested too deeply; refused") from None


@functools.lru_cache(maxsize=32)
def _plain_adapter(tp: Any) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(tp)


@functools.lru_cache(maxsize=32)
def _adapter(tp: type, fields: tuple[tuple[str, Any], ...]) -> Any:
    from pydantic import TypeAdapter

    built: dict[type, Any] = {}
    model = _model(tp, dict(fields), built)
    ns = {m.__name__: m for m in built.values()}
    for m in built.values():
        m.model_rebuild(_types_namespace=ns)
    return TypeAdapter(model)


def _model(cls: type, fields: dict[str, Any], built: dict[type, Any]) -> Any:
    """A pydantic model with the dataclass's fields, strict, extra keys ignored."""
    from pydantic import ConfigDict, create_model

    if cls in built:
        return built[cls]
    name = f"{cls.__name__}Schema"
    built[cls] = name  # a reference to itself (ParityResult.outputs) resolves on rebuild
    hints = typing.get_type_hints(cls)
    spec = {}
    nan = f"{cls.__name__}.*" in fields
    for f in dataclasses.fields(cls):
        tp = fields.get(f"{cls.__name__}.{f.name}", hints[f.name])
        tp = float | None if nan and tp is float else tp
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        spec[f.name] = (_convert(tp, fields, built), ... if required else None)
    built[cls] = create_model(name, __config__=ConfigDict(strict=True, extra="ignore"), **spec)
    return built[cls]


def _convert(tp: Any, fields: dict[str, Any], built: dict[type, Any]) -> Any:
    """The type to check a JSON value against: lists for tuples, nested records as models (a float
    field takes an integer too, strict mode's rule)."""
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        m = _model(tp, fields, built)
        return m if not isinstance(m, str) else typing.ForwardRef(m)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        inner = [_convert(a, fields, built) for a in args if a is not type(None)]
        return Union[(*inner, type(None))] if len(args) > len(inner) else Union[tuple(inner)]  # noqa: UP007
    if origin is tuple:
        inner = args[0] if len(args) == 2 and args[1] is Ellipsis else Any
        return list[_convert(inner, fields, built)]
    if origin is dict:
        return dict[str, _convert(args[1], fields, built) if len(args) == 2 else Any]
    return tp
