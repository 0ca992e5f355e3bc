"""CLI flags of the runner options, generated from the runners' declarations.

Every field of a runner's Options dataclass (``backends/<runtime>/options.py``) gets a
flag: the one it declares (``--cuda-graphs``), else ``--<runner>-<field>`` (a bool that
defaults to True gets ``--<runner>-no-<field>``). A flag declared by several runners
(``--tensorrt-workspace``: the TensorRT builder and the ONNX Runtime TensorRT EP) sets
the field of each. The comparison and ``run`` both call :func:`add_runner_option_flags`,
so they offer the same options.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from infer_compare.base.errors import UsageError
from infer_compare.catalog.options import OptionField
from infer_compare.catalog.runtimes import options_class, runners, runtimes

_TYPES = {"int": int, "float": float, "str": str}


@dataclass(frozen=True)
class Flag:
    flag: str
    dest: str
    owners: tuple[tuple[str, OptionField], ...]  # (runner, field) pairs it sets

    @property
    def field(self) -> OptionField:
        return self.owners[0][1]


def flag_name(runner: str, f: OptionField) -> str:
    if f.flag:
        return f.flag
    name = f.name.replace("_", "-")
    return f"--{runner}-no-{name}" if f.kind == "bool" and f.default else f"--{runner}-{name}"


def runner_flags() -> list[Flag]:
    """One Flag per distinct flag, over every listed runner, in table order."""
    table: dict[str, list[tuple[str, OptionField]]] = {}
    for name, info in runners().items():
        if not info.listed:
            continue
        for f in options_class(name).fields_info():
            table.setdefault(flag_name(name, f), []).append((name, f))
    out = []
    for flag, owners in table.items():
        kinds = {(f.kind, f.default) for _, f in owners}
        if len(kinds) != 1:
            raise TypeError(f"flag {flag} is declared with different types or defaults by "
                            f"{', '.join(r for r, _ in owners)}")
        out.append(Flag(flag, "ro_" + flag.lstrip("-").replace("-", "_"), tuple(owners)))
    return out


def _runtime_titles() -> dict[str, str]:
    return {r.name: rt.title for rt in runtimes() for r in rt.runners}


def add_runner_option_flags(p: argparse.ArgumentParser, builds_only: bool = False) -> None:
    """One argument group per runtime with the flags of its runners' options (``builds_only``: only those that
    describe how an artifact is built, for ``export``)."""
    titles = _runtime_titles()
    groups: dict[str, Any] = {}
    for fl in runner_flags():
        if builds_only and not fl.field.builds:
            continue
        title = titles[fl.owners[0][0]]
        g = groups.get(title) or groups.setdefault(title, p.add_argument_group(f"{title} options"))
        f = fl.field
        who = ", ".join(r for r, _ in fl.owners)
        if f.kind == "bool":
            g.add_argument(fl.flag, dest=fl.dest, action="store_false" if f.default else "store_true",
                           default=None, help=f"{f.help} [{who}]")
            continue
        shown = [str(c) for c in f.choices if c != ""] if f.choices else []
        extra = f" (one of: {', '.join(shown)})" if shown else ""
        default = f"default: {f.default}" if f.default not in ("", None) else "default: automatic"
        g.add_argument(fl.flag, dest=fl.dest, type=_TYPES[f.kind], default=None,
                       metavar=_metavar(f, shown),
                       help=f"{f.help}{extra}; {default} [{who}]")


def _metavar(f: OptionField, shown: list[str]) -> str:
    """'{U8S8,S8S8}'; where the choices would not fit an 80-column help line, the field's name (the help
    lists them: 'one of: ...')."""
    braces = "{" + ",".join(shown) + "}"
    return braces if shown and len(braces) <= 40 else f.name.upper() if shown else f.kind.upper()


def runner_options_from_args(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The flags the user gave, as ``compare(runner_options=...)``; checked there."""
    out: dict[str, dict[str, Any]] = {}
    for fl in runner_flags():
        v = getattr(args, fl.dest, None)
        if v is None:
            continue
        for runner, f in fl.owners:
            out.setdefault(runner, {})[f.name] = v
    return out


def refuse_build_flags(args: argparse.Namespace) -> None:
    """``run``: a bundle carries its artifacts built; a flag that describes how one is built would be ignored,
    so it is a usage error that says where it belongs."""
    given = [fl.flag for fl in runner_flags() if fl.field.builds and getattr(args, fl.dest, None) is not None]
    if given:
        raise UsageError(f"{', '.join(given)} describe(s) how the bundle's artifacts are built, and this "
                         "bundle carries them built: give it to 'infer-compare export' (the bundle's "
                         "manifest.json records each artifact's recipe)")


# flag dest -> MeasureOptions field (measure/options.py); a flag that a subcommand lacks keeps the default
_MEASURE_FLAGS = {
    "backends": "backends", "formats": "formats", "precisions": "precisions", "devices": "devices",
    "batch_sizes": "batch_sizes", "threads": "threads", "warmup": "warmup_iters",
    "warmup_time": "warmup_time_s", "min_iters": "min_iters", "min_time": "min_time_s",
    "max_time": "max_time_s", "target_ci": "target_ci", "parity_every_batch": "parity_every_batch",
    "seed": "seed", "export_timeout": "export_timeout_s", "cell_timeout": "cell_timeout_s",
    "cache_dir": "cache_dir", "scenario": "scenarios", "io": "io", "concurrency": "concurrency",
    "artifact": "artifacts", "gpus": "gpus", "cpu_rows": "cpu_rows",
    "passes": "passes",
}


def measure_options(args: argparse.Namespace, **over: Any):
    """The run's MeasureOptions from the parsed flags of any measuring subcommand (the comparison, ``run``,
    ``soak``, ``fleet run``), ``over`` on top; a bad batch list is a UsageError before any work."""
    # deferred: the CLI's start (--help, env, report) stays light without it (+4 modules)
    from infer_compare.measure.options import MeasureOptions

    # deferred: the CLI's start (--help, env, report) stays light without it (+2 modules)
    from infer_compare.measure.plan import parse_batch_sizes

    kw: dict[str, Any] = {f: getattr(args, d) for d, f in _MEASURE_FLAGS.items()
                          if getattr(args, d, None) is not None}
    if "batch_sizes" in kw:
        kw["batch_sizes"] = parse_batch_sizes(kw["batch_sizes"])
    if "artifacts" in kw:
        kw["artifacts"] = tuple(kw["artifacts"])
    if "target_ci" in kw:
        kw["target_ci"] = kw["target_ci"] or None  # --target-ci 0: no target
    if hasattr(args, "no_cache"):
        kw["use_cache"] = not args.no_cache
    kw["runner_options"] = runner_options_from_args(args)
    return MeasureOptions(**{**kw, **over})
