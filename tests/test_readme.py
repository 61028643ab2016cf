"""The README's command list is the command line: every subcommand and every option.

A newcomer reads the list at the top of "Command line" before anything else; an option
that exists only in ``--help`` (``plan --deterministic-time``, ``replay --wall-clock``)
or a subcommand missing from it sends them to the wrong place.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from solver.cli.main import build_parser

README = Path(__file__).resolve().parent.parent / "README.md"


def _synopses(text: str) -> dict[str, str]:
    """Each subcommand's lines of the README's command list (its first code block)."""
    block = text.split("## Command line", 1)[1].split("```", 2)[1]
    synopses: dict[str, str] = {}
    name = None
    for line in block.splitlines():
        match = re.match(r"npu-place (\w+)", line)
        if match:
            name = match.group(1)
            synopses[name] = synopses.get(name, "") + line + "\n"
        elif name is not None and line.startswith(" "):
            synopses[name] += line + "\n"
        else:
            name = None
    return synopses


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _options(parser: argparse.ArgumentParser) -> list[str]:
    """Long options, without ``--help`` and deprecated names."""
    return [o for a in parser._actions for o in a.option_strings
            if o.startswith("--") and o != "--help"
            and not (a.help or "").startswith("deprecated")]


def test_the_synopsis_parser_reads_the_list() -> None:
    synopses = _synopses("## Command line\n\n```\nnpu-place plan [--a]\n"
                         "               [--b]\nnpu-place serve [--c]\n```\n")
    assert synopses == {"plan": "npu-place plan [--a]\n               [--b]\n",
                        "serve": "npu-place serve [--c]\n"}


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_subcommand_and_option_is_in_the_readme_command_list(name: str) -> None:
    synopses = _synopses(README.read_text(encoding="utf-8"))
    assert name in synopses, f"npu-place {name} is not in the README's command list"
    missing = [o for o in _options(_subcommands()[name])
               if not re.search(re.escape(o) + r"(?![\w-])", synopses[name])]
    assert not missing, f"npu-place {name}: {missing} not in the README's command list"


def test_the_readme_sends_nobody_outside_the_repository() -> None:
    text = README.read_text(encoding="utf-8")
    assert "../shared" not in text and "shared/reference" not in text
    root = README.parent
    for target in re.findall(r"\]\(([^)#][^)]*)\)", text):
        if not target.startswith("http"):
            assert (root / target).exists(), target
