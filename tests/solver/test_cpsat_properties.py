"""Property tests: CP-SAT on random scenarios of every family (workers=1, small limits)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from heuristics.greedy import EngineNotAvailable, available_families
from models.compiled import Problem
from solver.facade import solve
from tests.solver.answers import assert_sound_answer
from tests.strategies import ALL_FAMILIES, problems


@settings(max_examples=40)
@given(problems(families=ALL_FAMILIES, max_nodes=24, max_jobs=3))
def test_cpsat_is_valid_never_worse_than_greedy_and_exact(problem: Problem) -> None:
    if {job.family for job in problem.jobs} - available_families():
        pytest.skip("a greedy family is not available")
    try:
        result = solve(problem, engine="cpsat", time_limit=10.0, workers=1, seed=0,
                       deterministic_time=3.0)
    except EngineNotAvailable as exc:  # pragma: no cover - guarded above
        pytest.skip(str(exc))
    assert_sound_answer(problem, result)
