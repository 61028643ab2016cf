"""Property tests: CP-SAT on random scenarios of every family (workers=1, small limits)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from models.compiled import Problem
from solver.facade import solve
from tests.solver.answers import assert_plan_is_a_model_solution, assert_sound_answer
from tests.strategies import ALL_FAMILIES, problems, random_plan


@settings(max_examples=40)
@given(problems(families=ALL_FAMILIES, max_nodes=24, max_jobs=3))
def test_cpsat_is_valid_never_worse_than_greedy_and_exact(problem: Problem) -> None:
    result = solve(problem, engine="cpsat", time_limit=10.0, workers=1, seed=0,
                   deterministic_time=3.0)
    assert_sound_answer(problem, result)


@settings(max_examples=60, deadline=None)
@given(problem=problems(families=ALL_FAMILIES, max_nodes=24, max_jobs=4),
       seed=st.integers(0, 2**31 - 1), greedy_packing=st.booleans())
def test_every_valid_placement_is_a_solution_of_the_model(problem: Problem, seed: int,
                                                         greedy_packing: bool) -> None:
    """No rule of the model cuts off a placement the validator accepts.

    A random valid placement (the validator is the specification) is given as the hint and
    CP-SAT is made to keep it: the model must accept it, with the objective ``evaluate``
    gives.  This guards the implied rows that only tighten the bound (aggregate
    capacities, domain capacity cuts) as much as the rules themselves.
    """
    # place_probability 1: every job is tried, so capacity is often used up exactly
    mapping = random_plan(problem, random.Random(seed),
                          place_probability=1.0 if greedy_packing else 0.85)
    assert_plan_is_a_model_solution(problem, mapping)
