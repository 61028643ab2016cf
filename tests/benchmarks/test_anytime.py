"""The anytime curve module: rows, the budget table, the goal line and the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.anytime import (
    BUDGET_HEADER,
    AnytimeInstance,
    budget_table,
    goal_summary,
    main,
    run_instance,
    write_report,
)
from benchmarks.generators import GenParams, case_name, generate_case
from models.compiled import compile_scenario


def _row(instance: str, family: str, budget: float, gain: int, engine: str = "cpsat",
         overrun: float = 1.0) -> dict[str, Any]:
    return {"instance": instance, "family": family, "nodes": 64, "jobs": 2, "budget": budget,
            "wall-seconds": budget + overrun / 1000, "overrun-ms": overrun, "engine": engine,
            "status": "feasible", "objective": 100 + gain, "greedy-objective": 100,
            "gain": gain, "origin-hits": 1, "origin-candidates": 2, "threads-after": 1}


def test_goal_counts_instances_improved_at_the_long_budget() -> None:
    rows = [_row("a", "850", 1, 5), _row("a", "850", 10, 7),
            _row("b", "850", 1, 0, "greedy"), _row("b", "850", 10, 3),
            _row("c", "950", 1, 0, "greedy"), _row("c", "950", 10, 0, "greedy")]
    text = goal_summary(rows)
    assert "at 10 s: 2;" in text
    assert "at 1 s: 1 (50 %)" in text


def test_budget_table_shares_and_overruns() -> None:
    rows = [_row("a", "850", 1, 5, overrun=10), _row("b", "850", 1, 0, "greedy", overrun=-5),
            _row("c", "950", 1, 4, "origin-first", overrun=30)]
    table = {(r[0], r[1]): r for r in budget_table(rows)}
    assert len(BUDGET_HEADER) == len(table[("1", "all")])
    assert table[("1", "850")][3] == "1/2"  # beats greedy
    assert table[("1", "850")][4] == "1/2"  # by CP-SAT's own search
    assert table[("1", "950")][4] == "0/1"  # origin-first is not CP-SAT
    assert table[("1", "all")][3] == "2/3"
    assert table[("1", "all")][8] == "30.0"  # the largest overrun
    assert table[("1", "all")][9] == "0/3"  # no search left running


def test_budget_table_counts_searches_left_running() -> None:
    rows = [{**_row("a", "a3", 1, 5), "search-after": 1}, _row("b", "a3", 1, 5)]
    table = {(r[0], r[1]): r for r in budget_table(rows)}
    assert table[("1", "a3")][9] == "1/2"


def test_rows_of_a_small_instance_and_the_report(tmp_path: Path) -> None:
    params = GenParams("850", nodes=64, seed=1, jobs=2)
    instance = AnytimeInstance(case_name(params), "850", 64, 2, params)
    problem = compile_scenario(generate_case(params).scenario)
    rows = run_instance(instance, problem, [0.2, 0.5])
    assert [r["budget"] for r in rows] == [0.2, 0.5]
    for row in rows:
        assert row["gain"] == row["objective"] - row["greedy-objective"] >= 0
        assert row["search-after"] == 0
        assert row["engine"] in ("greedy", "origin-first", "cpsat")
    report = write_report(rows, tmp_path, "test")
    text = report.read_text(encoding="utf-8")
    assert "| budget s |" in text and "instances improved" in text
    assert (tmp_path / "anytime.csv").read_text(encoding="utf-8").count("\n") == 3
    assert (tmp_path / "anytime.png").stat().st_size > 0


def test_command_line_runs_a_tiny_curve(tmp_path: Path) -> None:
    code = main(["--out", str(tmp_path), "--budgets", "0.2", "--scales", "64",
                 "--seeds", "1", "--families", "a3"])
    assert code == 0
    assert (tmp_path / "anytime.md").exists()
