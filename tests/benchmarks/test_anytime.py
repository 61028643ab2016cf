"""The anytime curve module: rows, the budget table, the goal line and the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.anytime import (
    BUDGET_HEADER,
    AnytimeInstance,
    add_shares,
    budget_table,
    family_gap_table,
    goal_summary,
    main,
    run_instance,
    size_table,
    violations,
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


def test_share_captured_is_the_gain_over_the_best_gain_of_the_instance() -> None:
    rows = [_row("a", "850", 1, 5), _row("a", "850", 10, 10),
            _row("b", "850", 1, 0, "greedy"), _row("b", "850", 10, 0, "greedy")]
    add_shares(rows)
    assert [r["share-captured"] for r in rows] == [0.5, 1.0, None, None]
    assert all(r["hits-lost"] == 0 for r in rows)


def test_goal_line_gives_the_median_share_and_the_violations() -> None:
    rows = [_row("a", "850", 1, 8), _row("a", "850", 10, 10),
            _row("b", "850", 1, 2), _row("b", "850", 10, 10),
            _row("c", "950", 1, 9), _row("c", "950", 10, 3)]
    text = goal_summary(rows)
    assert "at 1 s: 80 % (over 3 instances with a gain)" in text  # median of 80, 20, 100 %
    assert "monotonicity violations: 1;" in text


def test_the_size_table_gives_each_familys_share_per_node_count() -> None:
    rows = [{**r, "nodes": nodes} for nodes, r in [
        (4096, _row("a", "850", 1, 8)), (4096, _row("a", "850", 10, 10)),
        (4096, _row("b", "a3", 1, 2)), (4096, _row("b", "a3", 10, 10)),
        (8192, _row("c", "a3", 1, 0, "greedy")), (8192, _row("c", "a3", 10, 0, "greedy"))]]
    header, table = size_table(rows, 1.0)
    assert header == ["nodes", "a3", "850", "median / worst"]
    assert table == [["4,096", "20 %", "80 %", "50 % / 20 %"], ["8,192", "-", "-", "-"]]


def test_the_gap_table_gives_each_familys_median_gap_per_size_and_budget() -> None:
    rows = [{**r, "nodes": 65536, "gap": gap} for r, gap in [
        (_row("a", "850", 1, 8), 0.02), (_row("b", "850", 1, 9), 0.04),
        (_row("a", "850", 10, 10), 0.001), (_row("b", "850", 10, 10), 0.003),
        (_row("c", "a3", 1, 2), None), (_row("c", "a3", 10, 3), 0.5)]]
    header, table = family_gap_table(rows)
    assert header == ["nodes", "budget s", "a3", "850"]
    assert table == [["65,536", "1", "no bound", "3.00 %"],
                     ["65,536", "10", "50.00 %", "0.20 %"]]


def test_every_pair_of_budgets_that_goes_down_is_listed() -> None:
    rows = [{**_row("a", "a3", 1, 7), "origin-hits": 9}, {**_row("a", "a3", 5, 4),
                                                          "origin-hits": 8},
            _row("a", "a3", 10, 6), _row("b", "a3", 1, 1), _row("b", "a3", 10, 2)]
    found = [(v["instance"], v["budget-low"], v["budget-high"]) for v in violations(rows)]
    assert found == [("a", 1.0, 5.0), ("a", 1.0, 10.0)]
    assert violations(rows)[0]["hits-low"] == 9 and violations(rows)[0]["hits-high"] == 8


def test_budget_table_shares_hits_lost_and_overruns() -> None:
    rows = [{**_row("a", "850", 1, 5, overrun=10), "origin-hits": 3},
            {**_row("a", "850", 10, 10), "origin-hits": 7},
            _row("b", "850", 1, 0, "greedy", overrun=-5), _row("b", "850", 10, 0, "greedy"),
            _row("c", "950", 1, 4, "origin-first", overrun=30),
            _row("c", "950", 10, 2, overrun=3)]
    table = {(r[0], r[1]): r for r in budget_table(rows)}
    assert len(BUDGET_HEADER) == len(table[("1", "all")])
    column = {name: i for i, name in enumerate(BUDGET_HEADER)}
    assert table[("1", "850")][column["median share captured"]] == "50 %"  # b has no gain
    assert table[("1", "850")][column["hits lost (sum)"]] == "4"
    assert table[("1", "850")][column["improved by CP-SAT search"]] == "1/2"
    assert table[("1", "950")][column["improved by CP-SAT search"]] == "0/1"
    assert table[("1", "all")][column["overrun max ms"]] == "30.0"
    assert table[("1", "all")][column["search still running"]] == "0/3"
    assert table[("10", "950")][column["worse than a shorter budget"]] == "1"
    assert table[("10", "850")][column["worse than a shorter budget"]] == "0"


def test_budget_table_counts_searches_left_running() -> None:
    rows = [{**_row("a", "a3", 1, 5), "search-after": 1}, _row("b", "a3", 1, 5)]
    table = {(r[0], r[1]): r for r in budget_table(rows)}
    assert table[("1", "a3")][BUDGET_HEADER.index("search still running")] == "1/2"


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
    assert "| budget s |" in text and "share of the best-known gain" in text
    assert "Monotonicity violations" in text
    assert (tmp_path / "anytime.csv").read_text(encoding="utf-8").count("\n") == 3
    assert (tmp_path / "anytime.png").stat().st_size > 0


def test_command_line_runs_a_tiny_curve(tmp_path: Path) -> None:
    code = main(["--out", str(tmp_path), "--budgets", "0.2", "--scales", "64",
                 "--seeds", "1", "--families", "a3"])
    assert code == 0
    assert (tmp_path / "anytime.md").exists()


def test_command_line_runs_a_tiny_deterministic_curve(tmp_path: Path) -> None:
    code = main(["--out", str(tmp_path), "--budgets", "0.2,0.4", "--scales", "64",
                 "--seeds", "1", "--families", "850", "--deterministic"])
    assert code == 0
    text = (tmp_path / "anytime.md").read_text(encoding="utf-8")
    assert "monotonicity violations: 0;" in text


def test_checkpoint_gaps_reports_every_family_and_restores_the_solver(
        capsys: pytest.CaptureFixture[str]) -> None:
    import solver.cpsat
    import solver.engine
    from benchmarks import checkpoint_gaps

    token, search = solver.engine.CancelToken, solver.cpsat.cp_model.CpSolver.solve
    assert checkpoint_gaps.main(["--nodes", "256", "--seed", "5", "--families", "950,a3",
                                 "--deterministic-time", "0.05", "--report-ms", "0"]) == 0
    out = capsys.readouterr().out
    assert "950 256 nodes, seed 5: longest stretch" in out and "a3 256 nodes" in out
    assert solver.engine.CancelToken is token
    assert solver.cpsat.cp_model.CpSolver.solve is search
