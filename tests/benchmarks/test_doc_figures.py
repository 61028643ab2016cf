"""The manual's deterministic figures are what their commands give now.

Each figure block of ``docs/`` is made by ``python -m benchmarks.doc_figures NAME``; these
tests make every figure again and compare it with the committed page, so a replay row, an
example's objective or a line of the import walkthrough that the code no longer gives
fails here (the replay days take a few seconds of CPU each: marked slow).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from benchmarks import doc_figures
from benchmarks.doc_figures import DOCS, FIGURES, blocks, replace_block


def _params() -> list[object]:
    return [pytest.param(name, marks=[pytest.mark.slow] if figure.slow else [], id=name)
            for name, figure in FIGURES.items()]


def test_every_block_is_a_known_figure_on_its_page_once() -> None:
    found: dict[str, list[str]] = {}
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text("utf-8")
        assert text.count("<!-- figure ") == len(blocks(text)), f"{page.name}: a broken marker"
        for name in blocks(text):
            found.setdefault(name, []).append(page.name)
    assert set(found) == set(FIGURES), "figures without a block or blocks without a figure"
    for name, pages in found.items():
        assert pages == [FIGURES[name].page], (name, pages)


@pytest.mark.parametrize("name", _params())
def test_the_committed_figure_is_what_its_command_gives(name: str) -> None:
    figure = FIGURES[name]
    committed = blocks((DOCS / figure.page).read_text("utf-8"))[name]
    assert committed == figure.make(), (
        f"docs/{figure.page}, figure {name}: the code gives other numbers now; run "
        f"python -m benchmarks.doc_figures {name} and say in the text what changed")


def test_the_check_fails_on_a_changed_replay_row(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    name = "replay-recorded-850"
    assert doc_figures.main([name, "--check", "--docs", str(docs)]) == 0
    page = docs / FIGURES[name].page
    text = page.read_text("utf-8")
    row = next(line for line in blocks(text)[name].splitlines() if line.startswith("| rfc |"))
    changed = re.sub(r"\| (\d+) \|", lambda m: f"| {int(m.group(1)) + 1} |", row, count=1)
    page.write_text(text.replace(row, changed), "utf-8")
    assert doc_figures.main([name, "--check", "--docs", str(docs)]) == 1
    assert page.read_text("utf-8") != text  # --check wrote nothing
    assert doc_figures.main([name, "--docs", str(docs)]) == 0  # rewritten
    assert page.read_text("utf-8") == text


def test_a_page_without_the_block_is_refused() -> None:
    with pytest.raises(KeyError, match="no figure block"):
        replace_block("# A page\n", "examples", "| a |")
