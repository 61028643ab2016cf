"""The manual's deterministic figures are what their commands give now.

Each figure block of ``docs/`` is made by ``python -m benchmarks.doc_figures NAME``; these
tests make every figure again and compare it with the committed page, so a replay row, an
example's objective or a line of the import walkthrough that the code no longer gives
fails here (the replay days take a few seconds of CPU each: marked slow).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from benchmarks import doc_figures
from benchmarks.doc_figures import (
    DOCS,
    FIGURES,
    Figure,
    block_text,
    blocks,
    replace_block,
    series_file,
    series_text,
)


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
    assert committed == block_text(figure), (
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


def _plotted() -> list[object]:
    return [pytest.param(name, marks=[pytest.mark.slow], id=name)
            for name, figure in FIGURES.items() if figure.series is not None]


@pytest.mark.parametrize("name", _plotted())
def test_the_committed_plot_series_are_what_the_code_gives(name: str) -> None:
    """The data series the plots draw (``docs/figures/NAME.json``) are what the code
    draws now: a plot cannot go stale while its table is regenerated."""
    figure = FIGURES[name]
    assert series_file(figure).read_text("utf-8") == series_text(figure), (
        f"docs/figures/{name}.json: the code draws other plots now; run "
        f"python -m benchmarks.doc_figures {name}")


@pytest.mark.parametrize("name", [n for n, f in FIGURES.items() if f.series is not None])
def test_each_plot_agrees_with_the_table_above_it(name: str) -> None:
    """The committed plot series end where the committed table says: each engine's
    cumulative GB pulled at the end of the day is the table's ``pulled-gb``, and the PNG
    files the block shows exist."""
    figure = FIGURES[name]
    block = blocks((DOCS / figure.page).read_text("utf-8"))[name]
    header, _rule, *rows = [line for line in block.splitlines() if line.startswith("|")]
    columns = [c.strip() for c in header.strip("|").split("|")]
    table = {cells[0]: cells for cells in
             ([c.strip() for c in row.strip("|").split("|")] for row in rows)}
    data = json.loads(series_file(figure).read_text("utf-8"))
    pulled = data["series"]["pulled-gb"]
    assert set(pulled) == set(table)
    for engine, line in pulled.items():
        assert round(line["gb"][-1]) == int(table[engine][columns.index("pulled-gb")]), engine
    for image in re.findall(r"\]\((figures/[\w.-]+\.png)\)", block):
        assert (DOCS / image).is_file(), image
    assert len(re.findall(r"\.png\)", block)) == 2


def test_the_check_fails_on_a_changed_plot_series(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    (docs / "figures").mkdir(parents=True)
    drawn: list[Path] = []

    def draw(folder: Path) -> list[str]:
        drawn.append(folder)
        return ["x.png"]

    figure = Figure("toy", "toy.md", False, lambda: "| a |\n|---|\n| 1 |", "a toy",
                    series=lambda: {"pulled-gb": {"rfc": {"hour": [0, 1], "gb": [0, 5]}}},
                    draw=draw)
    monkeypatch.setitem(FIGURES, "toy", figure)
    (docs / "toy.md").write_text("<!-- figure toy: python -m benchmarks.doc_figures toy -->\n"
                               "<!-- end of figure toy -->\n")
    assert doc_figures.main(["toy", "--docs", str(docs)]) == 0
    assert drawn == [docs / "figures"]
    assert doc_figures.main(["toy", "--check", "--docs", str(docs)]) == 0
    stored = series_file(figure, docs)
    data = json.loads(stored.read_text("utf-8"))
    data["series"]["pulled-gb"]["rfc"]["gb"][-1] = 6  # a plot drawn from other numbers
    stored.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    assert doc_figures.main(["toy", "--check", "--docs", str(docs)]) == 1


def test_a_page_without_the_block_is_refused() -> None:
    with pytest.raises(KeyError, match="no figure block"):
        replace_block("# A page\n", "examples", "| a |")
