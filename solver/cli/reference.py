"""The command-line reference of the manual, generated from the parser.

``docs/cli.md`` holds two generated regions between marker comments: the command list
(one synopsis per subcommand) and the option tables.  Everything else on the page is
written by hand.  ``python -m solver.cli.reference`` rewrites the regions from
:func:`solver.cli.main.build_parser`; ``--check`` exits 1 when the page differs from what
the parser gives (a test runs the same check), so an option cannot exist in ``--help``
only.  The text is built from the parser's actions, not from argparse's help formatter,
so that it does not depend on the terminal width or the Python version.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from models.documents import read_text
from solver.cli.main import COMMANDS, build_parser

#: The page this module writes, relative to the repository root.
PAGE = Path("docs") / "cli.md"
#: Marker comments around the generated regions: region name -> (begin, end).
MARKERS = {
    "synopsis": ("<!-- generated: synopsis (python -m solver.cli.reference) -->",
                 "<!-- end of generated synopsis -->"),
    "options": ("<!-- generated: options (python -m solver.cli.reference) -->",
                "<!-- end of generated options -->"),
}
#: Width of a synopsis line.
WIDTH = 96


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's parser, in the order ``--help`` lists them."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: sub.choices[name] for name, _module, _help in COMMANDS}


def is_deprecated(action: argparse.Action) -> bool:
    """Whether the option is a deprecated name (listed in the table, not the synopsis)."""
    return (action.help or "").startswith("deprecated")


def documented(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's arguments shown in the manual (not ``--help``, not suppressed)."""
    return [a for a in parser._actions
            if not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS]


def argument_text(action: argparse.Action) -> str:
    """One argument as the synopsis writes it: ``--engine {auto,greedy,cpsat}``, ``SCENARIO``."""
    if action.choices is not None and not isinstance(action.choices, dict):
        value = "{" + ",".join(str(c) for c in action.choices) + "}"
    else:
        metavar = action.metavar
        value = metavar if isinstance(metavar, str) else action.dest.upper()
    if not action.option_strings:
        return value + (" ..." if action.nargs in ("*", "+") else "")
    name = max(action.option_strings, key=len)
    if action.nargs == 0:
        return name
    if action.nargs == "?":
        return f"{name} [{value}]"
    return f"{name} {value}"


def _items(parser: argparse.ArgumentParser) -> list[str]:
    """The synopsis items: positionals, options and mutually exclusive groups, in order."""
    groups = {id(a): g for g in parser._mutually_exclusive_groups for a in g._group_actions}
    items: list[str] = []
    done: set[int] = set()
    for action in documented(parser):
        if is_deprecated(action) or id(action) in done:
            continue
        group = groups.get(id(action))
        if group is not None:
            members = [a for a in group._group_actions
                       if a.help != argparse.SUPPRESS and not is_deprecated(a)]
            done.update(id(a) for a in members)
            text = " | ".join(argument_text(a) for a in members)
            items.append(f"({text})" if group.required else f"[{text}]")
            continue
        text = argument_text(action)
        required = action.required if action.option_strings else action.nargs not in ("?", "*")
        items.append(text if required else f"[{text}]")
    return items


def synopsis(name: str, parser: argparse.ArgumentParser) -> str:
    """``npu-place NAME ...`` wrapped at :data:`WIDTH`, continuation lines indented."""
    head = f"npu-place {name}"
    return textwrap.fill(" ".join([head, *(i.replace(" ", "\0") for i in _items(parser))]),
                         width=WIDTH, subsequent_indent=" " * (len(head) + 1),
                         break_on_hyphens=False).replace("\0", " ")


def synopsis_block() -> str:
    """The command list: a code block with every subcommand's synopsis."""
    lines = ["```", "npu-place --version"]
    lines += [synopsis(name, parser) for name, parser in subcommands().items()]
    return "\n".join([*lines, "```"])


def help_text(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    """The action's help as ``--help`` prints it (``%%`` and ``%(prog)s`` expanded)."""
    text = action.help or ""
    try:
        return text % dict(vars(action), prog=parser.prog)
    except (KeyError, TypeError, ValueError):
        return text


def _cell(text: str) -> str:
    """Table-cell text: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def options_block() -> str:
    """Per subcommand: its help line and a table of its arguments."""
    helps = {name: help_line for name, _module, help_line in COMMANDS}
    parts: list[str] = []
    for name, parser in subcommands().items():
        parts += [f"### npu-place {name}", "", _cell(helps[name]) + ".", "",
                  "| argument | meaning |", "|---|---|"]
        for action in documented(parser):
            text = argument_text(action)
            longest = max(action.option_strings, key=len, default="")
            aliases = [f"`{o}`" for o in action.option_strings if o != longest]
            what = ", ".join([f"`{_cell(text)}`", *aliases])
            parts.append(f"| {what} | {_cell(help_text(action, parser))} |")
        parts.append("")
    return "\n".join(parts).rstrip("\n")


def render(page: str) -> str:
    """``page`` with its generated regions rewritten from the parser.

    Raises
    ------
    ValueError
        When a region's markers are missing or out of order.
    """
    blocks = {"synopsis": synopsis_block(), "options": options_block()}
    for region, (begin, end) in MARKERS.items():
        start, stop = page.find(begin), page.find(end)
        if start < 0 or stop < start:
            raise ValueError(f"{PAGE}: the markers of the generated {region} region are "
                             f"missing or out of order ({begin!r} ... {end!r})")
        page = page[:start] + begin + "\n\n" + blocks[region] + "\n\n" + page[stop:]
    return page


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite (or, with ``--check``, compare) the generated regions of the page."""
    parser = argparse.ArgumentParser(prog="python -m solver.cli.reference",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("page", nargs="?", type=Path, default=PAGE,
                        help=f"the page to rewrite (default: {PAGE})")
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 when the page is not what the parser gives")
    args = parser.parse_args(argv)
    old = read_text(args.page)
    new = render(old)
    if args.check:
        if old != new:
            sys.stderr.write(f"{args.page}: the command-line reference differs from the "
                             "parser; run python -m solver.cli.reference\n")
            return 1
        return 0
    if old != new:
        args.page.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
