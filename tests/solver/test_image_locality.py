"""Image locality (issue 34): the CP-SAT image term equals ``evaluate()``'s, on random
scenarios of every family with random node images, and CP-SAT's answers stay sound."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from heuristics.greedy import available_families
from models.check import check
from models.compiled import Problem, compile_scenario
from models.objective import evaluate, resolve_weights
from models.placement import Status
from models.plan import Plan, to_placement
from solver.cpsat import HintError, add_hint, build_model
from solver.facade import solve
from tests.solver.answers import assert_sound_answer, objective_fixed_to_hint
from tests.strategies import ALL_FAMILIES, problems, random_plan

IMAGES = {"llm": 35.0, "cv": 12.5, "ft": 0.4}


@st.composite
def imaged_problems(draw: st.DrawFn, max_nodes: int = 24, max_jobs: int = 4) -> Problem:
    """A generated problem whose nodes hold random images and whose jobs run one."""
    problem = draw(problems(families=ALL_FAMILIES, max_nodes=max_nodes, max_jobs=max_jobs))
    rng = random.Random(draw(st.integers(0, 2**31 - 1)))
    share = draw(st.sampled_from([0.2, 0.5, 0.9]))
    data = problem.scenario.model_dump(by_alias=True, mode="json", exclude_none=True)
    for node in data["nodes"]:
        held = {name: size for name, size in IMAGES.items() if rng.random() < share}
        if held:
            node["images"] = held
    for job in data["jobs"]:
        if rng.random() < 0.85:
            name = rng.choice(sorted(IMAGES))
            job["image"] = {"name": name, "size-gb": IMAGES[name]}
    from models.scenario import Scenario
    return compile_scenario(Scenario.model_validate(data))


@settings(max_examples=60, deadline=None)
@given(problem=imaged_problems(), seed=st.integers(0, 2**31 - 1))
def test_model_objective_equals_evaluate_with_images(problem: Problem, seed: int) -> None:
    """A random valid placement as the fixed hint: the model's objective (image term
    included) is ``evaluate()``'s."""
    mapping = random_plan(problem, random.Random(seed), place_probability=0.9)
    nodes: list[np.ndarray | None] = [None] * len(problem.jobs)
    for j, ranks in mapping.items():
        nodes[j] = np.asarray(ranks, dtype=np.int32)
    plan = Plan(nodes, [None if n is not None else "not placed" for n in nodes])
    placement = to_placement(problem, plan, engine="random", status=Status.FEASIBLE)
    assert check(problem, placement) == []
    weights = resolve_weights(problem)
    built = build_model(problem, weights, plan)
    try:
        expected = add_hint(built, plan)
    except HintError:
        assume(False)
    assert objective_fixed_to_hint(built) == expected
    assert expected == evaluate(problem, mapping, weights).objective


@settings(max_examples=25, deadline=None)
@given(imaged_problems(max_nodes=20, max_jobs=3))
def test_cpsat_answer_sound_with_images(problem: Problem) -> None:
    """CP-SAT's answer with the image term: valid, objective = evaluate(), never below
    the greedy's, exact when optimal."""
    if {job.family for job in problem.jobs} - available_families():
        pytest.skip("a greedy family is not available")
    result = solve(problem, engine="cpsat", time_limit=10.0, workers=1, seed=0,
                   deterministic_time=2.0)
    assert_sound_answer(problem, result)
