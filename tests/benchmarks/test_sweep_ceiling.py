"""The sweep-ceiling benchmark's pairing: interleaved runs, the median of the pairs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks import sweep_ceiling
from benchmarks.generators import GenParams
from benchmarks.sweep_ceiling import Pair, Run, measure_pair, pairs_table, solve_spread

CELLS = [("950-a", GenParams("950", nodes=64, seed=0, jobs=2), Path("a.json")),
         ("a3-b", GenParams("a3", nodes=64, seed=0, jobs=2), Path("b.json"))]


def _pair(first: str, ceiling: float, sweep: float, solves: tuple[float, float]) -> Pair:
    rows = {name: {"cell-cpu-seconds": str(solve + 0.2), "solve-cpu-seconds": str(solve),
                   "valid": "yes"} for (name, _, _), solve in zip(CELLS, solves, strict=True)}
    runs = [Run(name, 0, 1.0, solve + 0.5, 100.0, 0)
            for (name, _, _), solve in zip(CELLS, solves, strict=True)]
    return Pair(first, ceiling, 2 * ceiling, sweep, 2 * sweep, 1.0, (0.5, 0.6), runs, rows,
                "sweep ...", 0)


def test_the_first_of_each_pair_alternates(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    """Pair 1 runs the ceiling first, pair 2 the sweep first, pair 3 the ceiling again:
    neither way always runs on a machine the other has just warmed."""
    order: list[str] = []

    def lanes(*args: Any) -> tuple[float, list[Run]]:
        order.append("ceiling")
        return 10.0, []

    def sweep(*args: Any) -> tuple[float, float, float, int, str]:
        order.append("sweep")
        return 11.0, 20.0, 1.0, 0, "sweep summary"

    monkeypatch.setattr(sweep_ceiling, "run_lanes", lanes)
    monkeypatch.setattr(sweep_ceiling, "run_sweep", sweep)
    monkeypatch.setattr(sweep_ceiling, "read_rows", lambda path: {})
    pairs = [measure_pair(i, CELLS, tmp_path / "grid.yaml", tmp_path, 2.0, 60.0)
             for i in range(3)]
    assert order == ["ceiling", "sweep", "sweep", "ceiling", "ceiling", "sweep"]
    assert [p.first for p in pairs] == ["ceiling", "sweep", "ceiling"]
    assert pairs[0].ratio == pytest.approx(10.0 / 11.0)


def test_the_figure_is_the_median_of_the_pairs_with_its_spread() -> None:
    pairs = [_pair("ceiling", 30.0, 30.0, (5.0, 1.0)), _pair("sweep", 30.0, 32.0, (5.5, 1.0)),
             _pair("ceiling", 30.0, 40.0, (6.0, 1.0))]
    text = pairs_table(pairs)
    assert "median **0.938** (min 0.750, max 1.000)" in text  # 30/32, not the mean
    spread = solve_spread(CELLS, pairs)
    # the 950 cell's solve moved 20 % between runs, the A3 cell's not at all
    assert "median 10.0%, max 20.0%" in spread
    assert solve_spread(CELLS, pairs[:1]) == ""
