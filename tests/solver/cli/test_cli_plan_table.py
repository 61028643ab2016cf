"""The plan table shows what matters: every rank's node with origin hits marked, what each
objective term contributed, and bundled examples by name (``example:NAME``)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from models.objective import evaluate
from solver.cli import main
from solver.cli.output import (
    COLUMNS_NOTE,
    FAULT_MARK,
    HIT_MARK,
    RANK_MAP_LEGEND,
    objective_sum,
    rank_map,
    render_result_table,
    wrap_items,
)
from solver.doors import example_names, example_path, load_problem, source_label
from solver.facade import solve


def _expand(items: list[str]) -> list[tuple[int, str, str]]:
    """The ``(rank, node, mark)`` entries a rank map stands for (its inverse)."""
    entries = []
    for item in items:
        mark = item[-1] if item[-1] in (HIT_MARK, FAULT_MARK) else ""
        body = item[:-1] if mark else item
        ranks, node = body.split(":", 1)
        first, _, last = ranks.partition("-")
        span = range(int(first), int(last or first) + 1)
        if ".." in node:
            start, end = node.split("..")
            prefix, number = re.fullmatch(r"(.*?)(\d+)", start).groups()  # type: ignore[union-attr]
            nodes = [f"{prefix}{n}" for n in range(int(number), int(end) + 1)]
        else:
            nodes = [node] * len(span)
        assert len(nodes) == len(span), item
        entries += [(r, n, mark) for r, n in zip(span, nodes, strict=True)]
    return entries


def test_rank_map_runs_of_nodes_and_of_one_node() -> None:
    entries = [(0, "sp0-node-0", "*"), (1, "sp0-node-1", "*"), (2, "sp0-node-2", "*"),
               (3, "sp0-node-10", ""), (4, "sp0-node-8", ""), (5, "sp0-node-9", ""),
               (6, "n0", ""), (7, "n0", ""), (8, "n1", "!"), (9, "x", "")]
    items = rank_map(entries)
    assert items == ["0-2:sp0-node-0..2*", "3:sp0-node-10", "4-5:sp0-node-8..9", "6-7:n0",
                     "8:n1!", "9:x"]
    assert _expand(items) == entries


def test_rank_map_splits_a_run_where_the_mark_changes() -> None:
    entries = [(0, "a1", "*"), (1, "a2", ""), (2, "a3", "")]
    assert rank_map(entries) == ["0:a1*", "1-2:a2..3"]


def test_rank_map_keeps_every_rank_of_a_large_job() -> None:
    """No ``(+12)`` or ``... (4 blocks)`` cut: 512 ranks, every one recoverable."""
    entries = [(r, f"sp{r // 16}-node-{(r * 7) % 16}", "*" if r % 3 == 0 else "")
               for r in range(512)]
    items = rank_map(entries)
    assert _expand(items) == entries
    lines = wrap_items(items, 90)
    assert len(lines) > 1 and all(len(line) <= 91 for line in lines)
    assert _expand([i.rstrip(",") for line in lines for i in line.split(", ")]) == entries


def _rank_cells(text: str) -> dict[str, list[str]]:
    """Each placed job's rank-map items, read back from the job table of ``text``."""
    lines = text.splitlines()
    header = next(k for k, line in enumerate(lines) if line.startswith("job "))
    offset = lines[header].index("rank:node / reason")
    placed_at = lines[header].index("placed")
    cells: dict[str, list[str]] = {}
    job = ""
    for line in lines[header + 2:]:
        if not line.strip() or line == RANK_MAP_LEGEND:
            break
        if not line.startswith(" "):
            job = line.split()[0]
            if line[placed_at:].split()[0] != "yes":
                continue
            cells[job] = []
        cell = line[offset:]
        if job in cells and "running rank" not in cell:
            cells[job] += [item.rstrip(",") for item in cell.split(", ")]
    return cells


@pytest.mark.parametrize("name", example_names())
def test_the_table_marks_exactly_the_origin_hits_and_lists_every_rank(name: str) -> None:
    problem = load_problem(example_path(name))
    result = solve(problem, engine="greedy")
    text = render_result_table(problem, result)
    cells = _rank_cells(text)
    placed = [jp for jp in result.placement.jobs if jp.placed]
    assert sorted(cells) == sorted(jp.name for jp in placed)
    for jp in placed:
        entries = _expand(cells[jp.name])
        assert {str(r): n for r, n, _ in entries} == jp.ranks  # every rank, its node
        hits = sum(1 for _, _, mark in entries if mark == HIT_MARK)
        assert hits == jp.origin_hits, (jp.name, cells[jp.name])
    assert RANK_MAP_LEGEND in text


def test_the_table_ends_with_the_page_that_explains_it() -> None:
    problem = load_problem(example_path("rack-950"))
    text = render_result_table(problem, solve(problem, engine="greedy"))
    assert text.rstrip("\n").splitlines()[-1] == COLUMNS_NOTE
    page = Path(__file__).resolve().parents[3] / "docs" / "plan-output.md"
    assert page.is_file() and "(docs/plan-output.md)" in COLUMNS_NOTE


@pytest.mark.parametrize("name", example_names())
def test_the_objective_line_sums_its_terms(name: str) -> None:
    problem = load_problem(example_path(name))
    result = solve(problem, engine="greedy")
    metrics = evaluate(problem, result.placement)
    assert sum(t.value for t in metrics.terms) == metrics.objective == result.objective
    assert [t.name for t in metrics.terms] == [
        "placed-jobs", "origin-hits", "fault-returns", "affinity-spill", "subhealthy-nodes",
        "reserve-used", "fragment-score", "image-hits"]
    line = objective_sum(metrics.objective, metrics.terms)
    head, _, rest = line.partition(" = ")
    assert int(head) == metrics.objective
    signed = re.findall(r"(?:^|([+-]) )?(-?\d+) ([a-z-]+) \(", rest.split(";")[0])
    total = sum((-1 if sign == "-" else 1) * int(value) for sign, value, _ in signed)
    assert total == metrics.objective, line
    assert f"objective         {line}" in render_result_table(problem, result)


def test_the_objective_line_names_the_weights() -> None:
    problem = load_problem(example_path("superpod-850"))
    metrics = evaluate(problem, solve(problem, engine="greedy").placement)
    line = objective_sum(metrics.objective, metrics.terms)
    hits = next(t for t in metrics.terms if t.name == "origin-hits")
    assert f"origin-hits ({hits.count} x {hits.weight})" in line
    assert "placed-jobs (2 jobs)" in line
    assert line.endswith("0 from fault-returns, affinity-spill, subhealthy-nodes, "
                         "reserve-used, image-hits")


def test_a_bundled_example_is_shown_by_name(tmp_path: object) -> None:
    assert source_label(example_path("rack-950")) == "example:rack-950"
    assert source_label("my/cluster.yaml") == "my/cluster.yaml"
    out, err = io.StringIO(), io.StringIO()
    assert main(["plan", "example:rack-950", "--engine", "greedy"], out, err) == 0, err
    assert out.getvalue().startswith("scenario: example:rack-950\n")
    assert str(example_path("rack-950")) not in out.getvalue()


def test_plan_names_a_replay_day_and_the_command_that_runs_it() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(["plan", "--example", "sharing-850"], out, err) == 2
    assert err.getvalue().splitlines()[0] == (
        "error: 'sharing-850' is a replay day, not a scenario: run it with npu-place replay "
        "--example sharing-850 (scenario examples: " + ", ".join(example_names()) + ")")
    out, err = io.StringIO(), io.StringIO()
    assert main(["plan", "example:nope"], out, err) == 2
    assert "no bundled example named 'nope'" in err.getvalue()


def test_a_partly_running_job_lists_its_placed_ranks_and_counts_the_running_ones() -> None:
    """Pod-level rescheduling: rank 5 is placed, the 7 running ranks stay (and are said to)."""
    from tests.models.builders import OLD, SP_CONFIG, problem, scenario, sp_cache, sp_job, sp_nodes

    busy = {n for r, n in OLD.items() if r != 5}
    p = problem(scenario(sp_nodes(busy), [sp_job([5], [])], SP_CONFIG, cache=sp_cache()))
    result = solve(p, engine="greedy")
    jp = result.placement.jobs[0]
    assert jp.placed and list(jp.ranks) == ["5"]
    text = render_result_table(p, result)
    row = next(line for line in text.splitlines() if line.startswith("t "))
    assert row.endswith(f"5:{jp.ranks['5']}" + (HIT_MARK if jp.origin_hits else ""))
    assert "(+7 running ranks stay on their nodes)" in text
