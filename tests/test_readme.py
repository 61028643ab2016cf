"""The front page and the manual: the two commands first, the command line complete, no
link that leads nowhere.

The README is a front page: its first lines are the two set-up commands a newcomer copies
(install and plan; install and test).  The manual is ``docs/`` (MkDocs); its command list
and option tables are generated from the parser (:mod:`solver.cli.reference`), so an
option that exists only in ``--help`` (``plan --deterministic-time``, ``replay
--wall-clock``) or a subcommand missing from the list fails here.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from solver.cli import reference
from solver.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CLI_PAGE = DOCS / "cli.md"
#: The README's first lines: the two set-up commands in one code block.
SETUP_COMMANDS = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install . && npu-place plan "
    "--example rack-950",
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' "
    "&& python -m pytest -q -n auto",
)


#: The manual's topic pages the front page links (other pages are reached from the site).
TOPICS = {"getting-started.md", "cli.md", "limits.md", "import.md", "library.md",
          "scenario.md", "objective.md",
          "greedy.md", "cpsat.md", "benchmarks.md", "sweeps.md", "replay.md", "service.md",
          "development.md"}


def _synopses(text: str) -> dict[str, str]:
    """Each subcommand's lines of the page's command list (its first code block)."""
    block = text.split("```", 2)[1]
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


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("**/*.md"))]


def test_the_synopsis_parser_reads_the_list() -> None:
    synopses = _synopses("# Command line\n\n```\nnpu-place plan [--a]\n"
                         "               [--b]\nnpu-place serve [--c]\n```\n")
    assert synopses == {"plan": "npu-place plan [--a]\n               [--b]\n",
                        "serve": "npu-place serve [--c]\n"}


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_subcommand_and_option_is_in_the_command_list(name: str) -> None:
    synopses = _synopses(CLI_PAGE.read_text(encoding="utf-8"))
    assert name in synopses, f"npu-place {name} is not in docs/cli.md's command list"
    missing = [o for o in _options(_subcommands()[name])
               if not re.search(re.escape(o) + r"(?![\w-])", synopses[name])]
    assert not missing, f"npu-place {name}: {missing} not in docs/cli.md's command list"


def test_the_committed_cli_reference_is_what_the_parser_generates() -> None:
    page = CLI_PAGE.read_text(encoding="utf-8")
    assert reference.render(page) == page, (
        "docs/cli.md differs from the parser: run python -m solver.cli.reference")


def test_the_generator_sees_a_new_option(tmp_path: Path) -> None:
    page = CLI_PAGE.read_text(encoding="utf-8")
    stale = page.replace("[--time-limit S]", "", 1)
    assert stale != page
    assert reference.render(stale) == page
    path = tmp_path / "cli.md"
    path.write_text(stale, encoding="utf-8")
    assert reference.main([str(path), "--check"]) == 1
    assert reference.main([str(path)]) == 0
    assert path.read_text(encoding="utf-8") == page
    assert reference.main([str(path), "--check"]) == 0


def test_every_argument_of_the_cli_reference_has_a_meaning() -> None:
    """An argument without a help string leaves its row's "meaning" cell empty."""
    page = CLI_PAGE.read_text(encoding="utf-8")
    empty = re.findall(r"^\| (`[^`]+`) \|\s*\|$", page, flags=re.MULTILINE)
    assert not empty, f"docs/cli.md: arguments without a help string: {empty}"


def test_the_generator_refuses_a_page_without_markers() -> None:
    with pytest.raises(ValueError, match="markers"):
        reference.render("# Command line\n")


def test_the_readme_starts_with_the_two_setup_commands() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert lines[:4] == ["```", *SETUP_COMMANDS, "```"]


def test_the_readme_is_a_front_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings[:3] == ["What-if planning", "Regression suite", "In a scheduler daemon"]
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)", text))
    assert linked >= TOPICS, f"pages the README does not link: {sorted(TOPICS - linked)}"


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_sends_anybody_outside_the_repository(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert "../shared" not in text and "shared/reference" not in text
    for target in re.findall(r"\]\(([^)#\s][^)\s]*)\)", text):
        if not target.startswith(("http://", "https://")):
            path = target.split("#", 1)[0]
            assert (page.parent / path).exists(), f"{page.name}: {target}"


def _command_lines() -> list[tuple[str, str]]:
    """Every ``npu-place ...`` line of a code block of the README and the manual (not the
    synopses, whose ``[--option VALUE]`` brackets are notation)."""
    lines = []
    for page in _pages():
        if page == CLI_PAGE:
            continue
        for block in re.findall(r"```[a-z]*\n(.*?)```", page.read_text(encoding="utf-8"),
                                re.DOTALL):
            for line in block.splitlines():
                line = line.strip().removeprefix("$ ")
                if line.startswith("npu-place ") and " [--" not in line:
                    line = re.sub(r"\s+#.*$", "", line).rstrip("&").strip()
                    line = re.split(r"\s[>|]\s", line)[0]  # a redirection or a pipe
                    lines.append((str(page.relative_to(ROOT)), line))
    return lines


@pytest.mark.parametrize(("page", "line"), _command_lines())
def test_every_command_the_pages_show_parses(page: str, line: str) -> None:
    parser = build_parser()
    try:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            parser.parse_args(shlex.split(line)[1:])
    except SystemExit:
        pytest.fail(f"{page}: {line}: {err.getvalue().strip().splitlines()[-1]}")


def _nav_pages(items: object) -> list[str]:
    """The pages of an ``mkdocs.yml`` nav, in order."""
    if isinstance(items, str):
        return [items]
    if isinstance(items, list):
        return [p for item in items for p in _nav_pages(item)]
    if isinstance(items, dict):
        return [p for value in items.values() for p in _nav_pages(value)]
    return []


def _nav() -> list[object]:
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    assert isinstance(nav, list)
    return nav


def test_every_page_of_the_manual_is_linked_from_its_home_page() -> None:
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([\w-]+\.md)", home))
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert pages <= linked, f"docs/index.md does not link {sorted(pages - linked)}"
    assert set(_nav_pages(_nav())) == pages | {"index.md"}


def test_the_navigation_goes_install_guides_concepts_reference_development() -> None:
    sections = [next(iter(item)) for item in _nav() if isinstance(item, dict)]
    assert sections == ["Home", "Install", "Guides", "Concepts", "Reference", "Development"]
    install = next(item["Install"] for item in _nav()
                   if isinstance(item, dict) and "Install" in item)
    assert _nav_pages(install)[0] == "getting-started.md"
    # a section's page is not called what its section is called ("Development → Development")
    for item in _nav():
        if isinstance(item, dict) and isinstance(next(iter(item.values())), list):
            (section, pages), = item.items()
            assert section not in {next(iter(p)) for p in pages if isinstance(p, dict)}


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_no_page_title_names_a_work_round_or_a_door(page: Path) -> None:
    title = page.read_text(encoding="utf-8").splitlines()[0]
    assert title.startswith("# ")
    assert not re.search(r"\b(round|door|doors)\b", title, flags=re.IGNORECASE), title


def test_the_manuals_home_shows_the_readmes_two_commands() -> None:
    readme = README.read_text(encoding="utf-8").split("```", 2)[1]
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    assert "```" + readme + "```" in home, "docs/index.md: copy the README's two commands"
