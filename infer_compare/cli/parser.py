"""The parser every subcommand builds on: an error is one line (exit 2) that names the closest option or
subcommand; --help starts with a one-line usage. And the top of the main --help: the subcommands."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import textwrap

from infer_compare.base.errors import UsageError

_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # a negative number is a value, not an option (argparse's rule)

# The subcommands, one line each, at the top of `infer-compare --help` (at most 78 columns).
SUBCOMMAND_LINES = (
    ("env", "every backend: available or why not, how to install it"),
    ("report RESULTS.json", "a saved result as the table, or as html, md, csv, json"),
    ("diff BASE CURRENT", "the regression gate across runs (exit 1: a regression)"),
    ("gate A B", "two bundles measured side by side, B judged against A"),
    ("export -m M -o DIR", "the model as a bundle to measure on another machine"),
    ("run BUNDLE", "measure a bundle here (no torch needed)"),
    ("merge R1 R2 -o DIR", "results of several machines as one comparison"),
    ("soak -m M", "configurations run for long, measured per time window"),
    ("fleet run BUNDLE", "a bundle measured on every node of a Ray cluster"),
    ("compare", "the same as no subcommand: the options below"),
)

MAIN_DESCRIPTION = "\n".join(
    ["subcommands (each has --help):"]
    + [f"  {name:<21}{what}" for name, what in SUBCOMMAND_LINES]
    + ["", "Without a subcommand: export MODEL to ONNX, OpenVINO IR, TensorRT and",
       "TFLite/Edge TPU, run each with its runtime, measure latency and throughput,",
       "and check every output against PyTorch."])

MAIN_EPILOG = ("Exit codes: 0 ok; 1 a parity failure, a regression, or a requested backend that\n"
               "did not run; 2 usage error; 3 rows not judged (the gates) or measured while other\n"
               "processes used the cores (disturbed: not a clean measurement).")

MAIN_USAGE = "%(prog)s --model MODEL [options]\n       %(prog)s SUBCOMMAND [options]"


def closest(word: str, candidates) -> str:
    """The candidate nearest to a mistyped ``word`` ('' when none is near)."""
    got = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return got[0] if got else ""


def unknown_subcommand(word: str, subcommands, prog: str = "infer-compare") -> UsageError:
    """'unknown subcommand envv (did you mean env?)'; with no near one, the list (and for the main command
    how a comparison is asked for)."""
    near = closest(word, subcommands)
    main = prog == "infer-compare"
    tail = (f"did you mean {near}?" if near else f"subcommands: {', '.join(subcommands)}"
            + (f"; a comparison: infer-compare --model {word}" if main else ""))
    return UsageError(f"unknown subcommand {'' if main else prog.split(' ', 1)[-1] + ' '}{word} ({tail})")


class HelpFormatter(argparse.HelpFormatter):
    """argparse's, with help texts wrapped between words only (a flag, a path or 'infer-compare' is never cut
    at its hyphen)."""

    def _split_lines(self, text, width):
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text, width, indent):
        lines = textwrap.wrap(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                              break_on_hyphens=False, break_long_words=False)
        return "\n".join(lines)


class RawDescriptionHelpFormatter(HelpFormatter):
    """The same, with the description and the epilog printed as written (the subcommand table)."""

    def _fill_text(self, text, width, indent):
        return "".join(indent + line for line in text.splitlines(keepends=True))


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line (a UsageError, exit 2: cli.main prints it), an unknown
    option named with the closest flag before anything else is checked, and a short usage line."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise UsageError(self._better(message))

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        if self._subparsers is None:  # a parser with subcommands leaves their options to them
            bad = self._unknown_option(args)
            if bad:
                near = closest(bad, self._visible_options())
                self.error(f"unknown option {bad} (" + (f"did you mean {near}?)" if near else
                                                        f"{self.prog} --help lists the options)"))
        ns, rest = super().parse_known_args(args, namespace)
        for dest, flag in getattr(self, "required_outputs", ()):  # see args.add_output
            if getattr(ns, dest, None) is None:
                self.error(f"the following arguments are required: {flag}")
        return ns, rest

    def format_usage(self):
        return self._with_usage(super().format_usage)

    def format_help(self):
        return self._with_usage(super().format_help)

    def _with_usage(self, fmt) -> str:
        if self.usage is not None:
            return fmt()
        self.usage = self._short_usage()
        try:
            return fmt()
        finally:
            self.usage = None

    def _short_usage(self) -> str:
        """'%(prog)s --model MODEL RESULTS.json [options]': required options, positionals, the rest."""
        f = self._get_formatter()
        parts = [f"{a.option_strings[0]} {f._format_args(a, a.dest.upper())}".rstrip()
                 for a in self._actions if a.option_strings and a.required]
        parts += [flag.split("/")[0] + " " + ("FILE" if dest == "output" else "DIR")
                  for dest, flag in getattr(self, "required_outputs", ())]
        parts += [f._format_args(a, a.dest) for a in self._actions
                  if not a.option_strings and a.help is not argparse.SUPPRESS]
        return " ".join(["%(prog)s", *parts, "[options]"])

    def _visible_options(self) -> list[str]:
        return [o for o, a in self._option_string_actions.items() if a.help is not argparse.SUPPRESS]

    def _unknown_option(self, args: list[str]) -> str:
        """The first argument that looks like an option and is none of this parser's ('' when all are)."""
        known = self._option_string_actions
        longs = [o for o in known if o.startswith("--")]
        for a in args:
            if a == "--":
                break
            if not a.startswith("-") or a == "-" or _NUMBER.match(a):
                continue
            if a.startswith("--"):
                name = a.split("=", 1)[0]
                if name in known or (self.allow_abbrev and any(o.startswith(name) for o in longs)):
                    continue
                return name
            if a[:2] not in known:  # -b1 is -b 1
                return a
        return ""

    def _better(self, message: str) -> str:
        """argparse's message, with the closest choice where a value is not one of them."""
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if not m:
            return message
        choices = [c.strip().strip("'") for c in m[2].split(",")]
        sub = self._subparsers is not None and message.startswith(f"argument {self._sub_name()}:")
        if sub:
            return str(unknown_subcommand(m[1], choices, self.prog))
        near = closest(m[1], choices)
        return message + (f" (did you mean {near}?)" if near else "")

    def _sub_name(self) -> str:
        act = next((a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
        return (act.metavar or act.dest or "") if act is not None else ""
