"""Typed options, declared once by the runner (or exporter) that uses them.

A runtime declares a frozen dataclass of :class:`Options` in its ``options.py``; each
field is made with :func:`option` (default, help, flag, choices, minimum). From those
declarations come:

* the CLI flags of the comparison and of ``run`` (``cli_flags()``; a flag shared by
  several runners, such as ``--cuda-graphs``, sets the field in each);
* the checking of the API's ``runner_options={"openvino": {"performance_hint": ...}}``
  (``build()``): an unknown runner or field, a value of the wrong type or outside its
  choices is a UsageError that names the runner and its valid options;
* the values that cross the process boundary (``to_dict``/``from_dict``).

Nothing parses option strings: a runner reads typed attributes.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from infer_compare.base.errors import UsageError
from infer_compare.base.records import Record

_KINDS = {"bool": bool, "int": int, "float": float, "str": str}


def option(default: Any, help: str, *, flag: str | None = None, choices: Iterable[Any] | None = None,
           minimum: float | None = None, builds: bool = False) -> Any:
    """A declared option: ``flag`` is its CLI flag (default ``--<runner>-<field>``; for a
    bool whose default is True, the flag turns it off). ``builds``: it describes how an artifact that
    travels in a bundle is built (the int8 recipe of the ONNX file...): ``export`` offers it, and
    ``run``, whose bundle carries the file already built, refuses it."""
    meta = {"help": help, "flag": flag, "choices": tuple(choices) if choices is not None else None,
            "minimum": minimum, "builds": builds}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class OptionField:
    name: str
    kind: str  # bool, int, float, str
    default: Any
    help: str
    flag: str | None
    choices: tuple[Any, ...] | None
    minimum: float | None
    builds: bool = False

    def check(self, owner: str, value: Any) -> Any:
        """``value`` converted to the field's type; UsageError when it cannot be."""
        tp = _KINDS[self.kind]
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise UsageError(f"{owner} option {self.name} takes true or false, not {value!r}")
        elif self.kind in ("int", "float"):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                    self.kind == "int" and not float(value).is_integer()):
                raise UsageError(f"{owner} option {self.name} takes a number ({self.kind}), not {value!r}")
            value = tp(value)
            if self.minimum is not None and value < self.minimum:
                raise UsageError(f"{owner} option {self.name} must be >= {self.minimum}, got {value}")
        elif not isinstance(value, str):
            raise UsageError(f"{owner} option {self.name} takes a string, not {value!r}")
        if self.choices is not None and value not in self.choices:
            raise UsageError(f"{owner} option {self.name} must be one of "
                             f"{', '.join(map(str, self.choices))}, not {value!r}")
        return value


@dataclass(frozen=True)
class Options(Record):
    """Base of every runner's options. Subclasses add fields made with :func:`option`."""

    @classmethod
    def fields_info(cls) -> list[OptionField]:
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            kind = getattr(hints[f.name], "__name__", str(hints[f.name]))
            if kind not in _KINDS:
                raise TypeError(f"{cls.__name__}.{f.name}: options are bool, int, float or str, not {kind}")
            m = f.metadata
            out.append(OptionField(f.name, kind, f.default, m.get("help", ""), m.get("flag"),
                                   m.get("choices"), m.get("minimum"), bool(m.get("builds"))))
        return out

    @classmethod
    def build(cls, owner: str, values: dict[str, Any] | None) -> Options:
        """Checked options of ``owner`` (a runner name) from a plain mapping."""
        info = {f.name: f for f in cls.fields_info()}
        if values is not None and not isinstance(values, dict):
            raise UsageError(f"options of {owner} must be a mapping of option names to values")
        kwargs = {}
        for k, v in (values or {}).items():
            if k not in info:
                valid = ", ".join(info) or "none"
                raise UsageError(f"unknown option {k!r} for runner {owner} (its options: {valid})")
            kwargs[k] = info[k].check(owner, v)
        return cls(**kwargs)

    def changed(self) -> dict[str, Any]:
        """The fields that differ from their defaults (recorded in a row's settings)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) != f.default}


@dataclass(frozen=True)
class NoOptions(Options):
    """For a runner that declares no option of its own."""
