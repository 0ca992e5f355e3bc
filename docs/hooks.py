"""MkDocs hook (mkdocs.yml ``hooks``): the CLI reference, docs/cli.md, generated from the argument parsers at
build time, so it cannot go stale.

Every ``build_*parser`` function of the ``infer_compare.cli`` modules is called; each parser's subcommand is
its ``prog`` (``infer-compare run`` -> ``run``), and a parser's own subcommands (``fleet join``) are walked
too. Every subcommand of ``infer_compare.cli.SUBCOMMANDS`` must have a parser, or the build fails. Each flag
is written from its declaration: its names, metavar, choices, default and help. An argument group that
several subcommands declare alike (the runner options, "how to measure") is written once, under "Shared
option groups", and each subcommand links to it. tests/test_docs.py builds the site and checks the page.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re

MARKER = "<!-- cli-reference -->"
HELP_FLAGS = ("-h", "--help")
TITLES = {"positional arguments": "arguments", "optional arguments": "flags", "options": "flags"}


def parsers() -> dict[str, argparse.ArgumentParser]:
    """{subcommand: parser}: "compare" for the main command, "fleet join" for a parser's own subcommands."""
    cli = importlib.import_module("infer_compare.cli")
    found: dict[str, argparse.ArgumentParser] = {}
    for info in pkgutil.iter_modules(cli.__path__):
        if info.name.startswith("_"):  # __main__ runs the command
            continue
        mod = importlib.import_module(f"{cli.__name__}.{info.name}")
        for name, fn in vars(mod).items():
            if re.fullmatch(r"build_(\w+_)?parser", name) and getattr(fn, "__module__", "") == mod.__name__:
                _add(found, fn())
    missing = [s for s in cli.SUBCOMMANDS if s not in found]
    if missing:
        raise RuntimeError(f"no build_*parser function found for the subcommand(s) {', '.join(missing)}")
    return {s: found[s] for s in sorted(found, key=lambda s: _order(s, cli.SUBCOMMANDS))}


def _add(found: dict, p: argparse.ArgumentParser, name: str | None = None) -> None:
    name = name or (p.prog.split(None, 1)[1] if " " in p.prog else "compare")
    found[name] = p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub, sp in a.choices.items():
                _add(found, sp, f"{name} {sub}")


def _order(name: str, subcommands) -> tuple[int, str]:
    head = name.split()[0]
    if head == "compare":
        return (0, name)
    return (1 + list(subcommands).index(head) if head in subcommands else 99, name)


def subcommand_help(p: argparse.ArgumentParser) -> dict[str, str]:
    """{name: help} of a parser's own subcommands (``fleet``: join, run, leave)."""
    return {c.dest: c.help or "" for a in p._actions if isinstance(a, argparse._SubParsersAction)
            for c in a._choices_actions}


def documented(p: argparse.ArgumentParser) -> list[argparse.Action]:
    """The actions a reference lists: all but -h/--help and a subparsers action (its choices are sections)."""
    return [a for a in p._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def md(text: str) -> str:
    """Plain text as Markdown: paired backticks stay code spans, everything else is escaped."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code span at all
        parts = ["\\`".join(parts)]
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f"`{part}`")
        else:
            part = part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            out.append(re.sub(r"([\\*_\[\]])", r"\\\1", part))
    return "".join(out)


def help_text(p: argparse.ArgumentParser, a: argparse.Action) -> str:
    """The action's help as --help prints it (``%(default)s`` expanded, ``%%`` as ``%``)."""
    if not a.help or a.help == argparse.SUPPRESS:
        return ""
    return p._get_formatter()._expand_help(a)


def _names(p: argparse.ArgumentParser, a: argparse.Action) -> str:
    if not a.option_strings:
        return f"`{a.metavar or a.dest}`"
    names = ", ".join(f"`{s}`" for s in a.option_strings)
    if a.nargs == 0:
        return names
    if a.choices is not None and a.metavar is None:  # the choices are listed after the help
        return names
    fmt = p._get_formatter()
    metavar = fmt._format_args(a, fmt._get_default_metavar_for_optional(a))
    return f"{names} `{metavar}`"


def _shown(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _facts(a: argparse.Action, helped: str) -> list[str]:
    """What the declaration says beyond the help: required, repeatable, choices, default (each unless the help
    already says it)."""
    facts = []
    if a.required and a.option_strings:
        facts.append("required")
    if not a.option_strings and a.nargs in ("+", "*"):
        facts.append("one or more" if a.nargs == "+" else "any number")
    if isinstance(a, (argparse._AppendAction, argparse._ExtendAction)) and "repeatable" not in helped:
        facts.append("repeatable")
    if a.choices is not None and a.metavar is None:
        facts.append("one of " + ", ".join(f"`{c}`" for c in a.choices))
    d = a.default
    listed = a.nargs != 0 and not isinstance(a, argparse._VersionAction)
    if listed and d not in (None, argparse.SUPPRESS, [], ""):
        v = re.escape(_shown(d))
        if not re.search(rf"default:?\s+{v}\b|\b{v}\W+the default", helped):  # the help says it already
            facts.append(f"default `{_shown(d)}`")
    return facts


def item(p: argparse.ArgumentParser, a: argparse.Action) -> str:
    """One list item: names and metavar, then the help, then what the declaration says (choices, default)."""
    facts = _facts(a, help_text(p, a))
    tail = f" ({'; '.join(facts)})" if facts else ""
    return f"- {_names(p, a)}: {md(help_text(p, a))}{tail}"


def _groups(p: argparse.ArgumentParser) -> list[tuple[str, list[str], list[argparse.Action]]]:
    """(title, items, hidden actions) of each argument group with something to list, in declaration order."""
    keep = set(map(id, documented(p)))
    out = []
    for g in p._action_groups:
        acts = [a for a in g._group_actions if id(a) in keep]
        shown = [a for a in acts if a.help != argparse.SUPPRESS]
        if acts:
            title = TITLES.get(g.title or "", g.title or "")
            out.append((title, [item(p, a) for a in shown], [a for a in acts if a not in shown]))
    return out


def _slug(title: str) -> str:
    return "shared-" + re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def shared_groups(ps: dict[str, argparse.ArgumentParser]) -> dict[tuple[str, tuple[str, ...]], str]:
    """{(title, items): anchor} of the groups that two or more subcommands declare alike."""
    seen: dict[tuple[str, tuple[str, ...]], int] = {}
    for p in ps.values():
        for title, items, hidden in _groups(p):
            if items and not hidden and title != "arguments":
                seen[(title, tuple(items))] = seen.get((title, tuple(items)), 0) + 1
    out: dict[tuple[str, tuple[str, ...]], str] = {}
    for key, n in seen.items():
        if n > 1:
            slug = _slug(key[0])
            out[key] = slug if slug not in out.values() else f"{slug}-{len(out)}"
    return out


def _group_md(title: str, items: list[str], shared: dict) -> list[str]:
    """A group's lines: its items, or a link to the shared group it equals, contains or is part of."""
    for (s_title, s_items), anchor in shared.items():
        if s_title != title:
            continue
        link = f"(#{anchor})"
        if tuple(items) == s_items:
            return [f"**{md(title)}**: [every flag of the shared group]{link}.", ""]
        if set(s_items) < set(items):
            rest = [i for i in items if i not in s_items]
            return [f"**{md(title)}**: [every flag of the shared group]{link}, and:", "", *rest, ""]
        if set(items) < set(s_items):
            names = [re.match(r"- (`[^`]+`)", i).group(1) for i in items]
            return [f"**{md(title)}**: [these flags of the shared group]{link}: {', '.join(names)}.", ""]
    return [f"**{md(title)}**", "", *items, ""]


def _hidden_md(p: argparse.ArgumentParser, hidden: list[argparse.Action]) -> list[str]:
    lines = []
    for a in hidden:
        twin = next((b for b in documented(p) if b.dest == a.dest and b is not a and b.option_strings), None)
        same = f"the same as `{twin.option_strings[0]}`, " if twin else ""
        names = ", ".join(f"`{s}`" for s in a.option_strings)
        lines.append(f"- {names}: {same}accepted, not shown by --help")
    return ["**Hidden flags** (an older spelling, still accepted)", "", *lines, ""] if lines else []


def _usage(name: str, p: argparse.ArgumentParser) -> str:
    cmd = "infer-compare [compare]" if name == "compare" else f"infer-compare {name}"
    pos = [a for a in documented(p) if not a.option_strings]
    subs = subcommand_help(p)
    words = [("{" + ",".join(subs) + "}") if subs else "", *[a.metavar or a.dest for a in pos], "[flags]"]
    return f"`{cmd} {' '.join(w for w in words if w)}`"


def _text_md(text: str) -> list[str]:
    """A description or epilog: prose as paragraphs; a part laid out as written (a table of subcommands,
    lines indented under a heading line) as a text block, as --help prints it."""
    out: list[str] = []
    for para in re.split(r"\n\s*\n", text.strip("\n")):
        if re.search(r"^ {2}\S", para, re.M):
            out += ["```text", para, "```", ""]
        else:
            out += [md(" ".join(para.split())), ""]
    return out


def summary(description: str) -> str:
    """The first sentence of a description's first prose paragraph (not a heading line over a table)."""
    paras = [q for q in re.split(r"\n\s*\n", description) if q.strip()]
    prose = [q for q in paras if not re.search(r"^ {2}\S", q, re.M)] or paras or [""]
    text = " ".join(prose[0].split())
    text = re.sub(r"^Without a subcommand: (\w)", lambda m: m.group(1).upper(), text)
    return re.split(r"(?<!e\.g)(?<!i\.e)\.(?:\s|$)", text)[0]


def section(name: str, p: argparse.ArgumentParser, shared: dict, intro: str = "") -> list[str]:
    """One subcommand's section: usage, description, epilog, its flags group by group."""
    anchor = name.replace(" ", "-")
    title = "infer-compare (the comparison)" if name == "compare" else f"infer-compare {name}"
    lines = [f"## {title} {{#{anchor}}}", "", _usage(name, p), ""]
    for text in (intro, p.description, p.epilog):
        if text:
            lines += _text_md(text)
    subs = subcommand_help(p)
    if subs:
        lines += [f"- [`{name} {s}`](#{name}-{s}): {md(h)}" for s, h in subs.items()] + [""]
    hidden: list[argparse.Action] = []
    for title_, items, hid in _groups(p):
        hidden += hid
        if items:
            lines += _group_md(title_, items, shared)
    return lines + _hidden_md(p, hidden)


def reference() -> str:
    """The whole generated reference (Markdown)."""
    ps = parsers()
    shared = shared_groups(ps)
    helps = {f"{n} {s}": h for n, p in ps.items() for s, h in subcommand_help(p).items()}
    lines = ["| subcommand | what it does |", "|---|---|"]
    for name, p in ps.items():
        what = helps.get(name) or summary(p.description or "")
        lines.append(f"| [`{name}`](#{name.replace(' ', '-')}) | {md(what).replace('|', '&#124;')} |")
    lines += ["", "Every subcommand also takes `-h`/`--help`: it prints the subcommand's flags and exits.",
              ""]
    for name, p in ps.items():
        lines += section(name, p, shared, helps.get(name, ""))
    lines += ["## Shared option groups {#shared}", "",
              "Groups of flags that several subcommands declare alike; each subcommand above links here.", ""]
    for (title, items), anchor in shared.items():
        users = [n for n, p in ps.items() if any((t, tuple(i)) == (title, items) for t, i, _ in _groups(p))]
        taken = "Taken by " + ", ".join(f"`{u}`" for u in users) + "."
        lines += [f"### {md(title)} {{#{anchor}}}", "", taken, "", *items, ""]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files) -> str:  # the MkDocs event
    if page.file.src_uri == "cli.md":
        if MARKER not in markdown:
            raise RuntimeError(f"docs/cli.md lost its marker {MARKER}: the CLI reference has nowhere to go")
        return markdown.replace(MARKER, reference())
    return markdown
