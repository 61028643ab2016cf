"""Property tests: CP-SAT on random scenarios of every family (workers=1, small limits)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from heuristics.greedy import EngineNotAvailable, available_families
from models.check import check
from models.compiled import Problem
from models.objective import evaluate
from models.placement import Status
from solver.facade import solve
from tests.strategies import ALL_FAMILIES, problems


@settings(max_examples=40)
@given(problems(families=ALL_FAMILIES, max_nodes=24, max_jobs=3))
def test_cpsat_is_valid_never_worse_than_greedy_and_exact(problem: Problem) -> None:
    if {job.family for job in problem.jobs} - available_families():
        pytest.skip("a greedy family is not available")
    try:
        result = solve(problem, engine="cpsat", time_limit=10.0, workers=1, seed=0,
                       deterministic_limit=3.0)
    except EngineNotAvailable as exc:  # pragma: no cover - guarded above
        pytest.skip(str(exc))
    assert check(problem, result.placement) == []
    assert result.greedy_objective is not None
    assert result.objective >= result.greedy_objective
    assert result.objective == evaluate(problem, result.placement).objective
    assert not [n for n in result.notes if n.startswith("BUG")], result.notes
    if result.engine == "cpsat" and result.status is Status.OPTIMAL:
        assert result.solver_objective == result.objective
    if result.engine == "cpsat" and result.solver_objective is not None:
        # the post-pass never does worse than the counts it realises
        assert result.objective >= result.solver_objective
    if result.bound is not None and result.engine == "cpsat":
        assert result.bound >= result.solver_objective  # type: ignore[operator]
