"""The manual's deterministic figures are what their commands give now.

Each figure block of ``docs/`` is made by ``python -m benchmarks.doc_figures NAME``; these
tests make every figure again and compare it with the committed page, so a replay row, an
example's objective or a line of the import walkthrough that the code no longer gives
fails here (the replay days take a few seconds of CPU each: marked slow).

Plots are checked through their data: every PNG records the hash of the data file it was
drawn from.  The measured figures (runs too long for CI) are checked against their stored
runs: table and plot against the data file, the plotted series against the page's table,
and one (seed, engine) day of each many-seed replay run again against its stored row.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from benchmarks import doc_figures, measured_figures
from benchmarks.doc_figures import (
    DOCS,
    FIGURES,
    Figure,
    block_text,
    blocks,
    plots_drawn_from_series,
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


# ------------------------------------------------------------------ plots and measured runs


def _measured(plot: bool = False) -> list[str]:
    return [name for name, figure in FIGURES.items() if figure.measured is not None
            and (not plot or figure.measured.plot is not None)]


@pytest.mark.parametrize("name", [n for n, f in FIGURES.items() if f.plots])
def test_the_replay_plots_were_drawn_from_their_stored_series(name: str) -> None:
    """Each replay PNG records the hash of ``docs/figures/NAME.json`` (drawn from it as it
    is), and that file holds what the code draws now (the slow test above)."""
    assert plots_drawn_from_series(FIGURES[name]), (
        f"{', '.join(FIGURES[name].plots)}: drawn from other data; run "
        f"python -m benchmarks.doc_figures {name}")


@pytest.mark.parametrize("name", _measured(plot=True))
def test_each_measured_plot_was_drawn_from_its_data_file(name: str) -> None:
    assert measured_figures.png_is_current(name, DOCS), (
        f"docs/figures/{name}.png was not drawn from docs/figures/{name}.json as it is; run "
        f"python -m benchmarks.doc_figures {name}")


@pytest.mark.parametrize("name", _measured(plot=True))
def test_each_measured_plot_draws_the_table_of_its_page(name: str) -> None:
    """The series the plot draws, computed from the data file, are the table the page
    shows: parsed back from the committed block, cell by cell."""
    figure = FIGURES[name]
    spec = figure.measured
    assert spec is not None and spec.plotted is not None and spec.table_series is not None
    table = measured_figures.parse_table(blocks((DOCS / figure.page).read_text("utf-8"))[name])
    plotted = spec.plotted(measured_figures.rows_of(measured_figures.read_data(name, DOCS)))
    shown = spec.table_series(table)
    assert plotted.keys() == shown.keys()
    for line, points in plotted.items():
        assert points.keys() == shown[line].keys(), line
        for x, y in points.items():
            assert y == pytest.approx(shown[line][x], abs=0.051, nan_ok=True), (line, x)


def test_a_measured_figure_records_its_run() -> None:
    for name in _measured():
        data = measured_figures.read_data(name, DOCS)
        spec = FIGURES[name].measured
        assert spec is not None
        assert data["figure"] == name and data["command"] == spec.command()
        assert re.fullmatch(r"[0-9a-f]{40}\+?", data["commit"]), name
        assert data["columns"] == list(spec.columns) and data["rows"], name


_SEED_ROWS = [("replay-seeds-sharing-850", 31, "rfc"),
              ("replay-seeds-faults-950-multilevel", 30, "upstream"),
              ("replay-seeds-vnpu-inference-day", 13, "rfc-no-image")]


@pytest.mark.parametrize(("name", "seed", "engine"), _SEED_ROWS, ids=[n for n, *_ in _SEED_ROWS])
def test_a_stored_many_seed_row_is_what_the_code_gives(name: str, seed: int,
                                                       engine: str) -> None:
    """One (seed, engine) day of each many-seed table replayed again (a few tenths of a
    second: no CP-SAT) equals its stored row: the data the tables are made from is this
    code's."""
    stored = [row for row in measured_figures.rows_of(measured_figures.read_data(name, DOCS))
              if row["seed"] == str(seed) and row["engine"] == engine]
    assert len(stored) == 1
    assert measured_figures.seed_row(name.removeprefix("replay-seeds-"), seed,
                                     engine) == stored[0]


def test_the_check_fails_on_changed_measured_data(tmp_path: Path) -> None:
    """A data file changed after its table and plot were made: --check reports both the
    block and the PNG (and writes nothing)."""
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    name = "scale-bench"
    assert doc_figures.main([name, "--check", "--docs", str(docs)]) == 0
    stored = measured_figures.data_path(name, docs)
    data = json.loads(stored.read_text("utf-8"))
    hits = data["columns"].index("origin-hits")
    data["rows"][-1][hits] = str(int(data["rows"][-1][hits]) - 1)
    stored.write_text(json.dumps(data, indent=1) + "\n", "utf-8")
    page = (docs / FIGURES[name].page).read_text("utf-8")
    assert not measured_figures.png_is_current(name, docs)
    assert doc_figures.main([name, "--check", "--docs", str(docs)]) == 1
    assert (docs / FIGURES[name].page).read_text("utf-8") == page


def test_measure_is_refused_for_a_figure_the_code_makes() -> None:
    with pytest.raises(SystemExit):
        doc_figures.main(["examples", "--measure"])


def test_every_png_of_the_manual_is_a_checked_figure() -> None:
    """No plot outside the checked ones: every PNG under docs/ and benchmarks/ is one of a
    replay figure's plots or a measured figure's, and each of those is in its page."""
    root = DOCS.parent
    pngs = {p.relative_to(root).as_posix() for folder in (DOCS, root / "benchmarks")
            for p in folder.rglob("*.png")}
    checked = {f"docs/figures/{png}" for f in FIGURES.values() for png in f.plots}
    checked |= {f"docs/figures/{name}.png" for name in _measured(plot=True)}
    assert pngs == checked
    for figure in FIGURES.values():
        block = blocks((DOCS / figure.page).read_text("utf-8"))[figure.name]
        for png in figure.plots or ((f"{figure.name}.png",) if figure.name in
                                    _measured(plot=True) else ()):
            assert f"](figures/{png})" in block, (figure.name, png)


def test_a_replay_plot_drawn_from_other_series_is_seen(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(DOCS / "figures", docs / "figures")
    figure = FIGURES["replay-sharing-850"]
    assert plots_drawn_from_series(figure, docs)
    stored = series_file(figure, docs)
    data = json.loads(stored.read_text("utf-8"))
    data["series"]["pulled-gb"]["rfc"]["gb"][-1] += 1  # the series, not the PNG, changed
    stored.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    assert not plots_drawn_from_series(figure, docs)
