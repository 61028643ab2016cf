"""Image locality: the CP-SAT image term equals ``evaluate()``'s, on random
scenarios of every family with random node images, and CP-SAT's answers stay sound."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from models.check import check
from models.compiled import Problem, compile_scenario
from models.objective import evaluate
from solver.facade import solve
from tests.solver.answers import assert_plan_is_a_model_solution, assert_sound_answer
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
    assert_plan_is_a_model_solution(problem, mapping)


@settings(max_examples=25, deadline=None)
@given(imaged_problems(max_nodes=20, max_jobs=3))
def test_cpsat_answer_sound_with_images(problem: Problem) -> None:
    """CP-SAT's answer with the image term: valid, objective = evaluate(), never below
    the greedy's, exact when optimal."""
    result = solve(problem, engine="cpsat", time_limit=10.0, workers=1, seed=0,
                   deterministic_time=2.0)
    assert_sound_answer(problem, result)


def _solved(data: dict) -> tuple[Problem, list[str], list[str]]:
    from models.io import scenario_from_data
    problem = compile_scenario(scenario_from_data(data, "<test>"))
    result = solve(problem, engine="cpsat", time_limit=10.0, workers=1, seed=0,
                   deterministic_time=2.0)
    if problem.jobs:
        assert_sound_answer(problem, result)
    else:  # a vNPU-only batch reports no solver_objective (the vNPU model is a part)
        assert check(problem, result.placement) == []
        assert result.objective == evaluate(problem, result.placement).objective
        assert result.greedy_objective is not None
        assert result.objective >= result.greedy_objective
        assert not [n for n in result.notes if n.startswith("BUG")], result.notes
    hosts = {jp.name: sorted(jp.ranks.values()) for jp in result.placement.jobs if jp.placed}
    return problem, hosts.get("a", []), hosts.get("v", [])


def test_cpsat_trades_a_fragment_point_for_an_image_and_not_when_off() -> None:
    """Upstream's score packs the 4-chip rank onto the partly used n1; with the term, CP-SAT
    takes n0, which holds the 30 GB image (one partly used node more: 1 < 30); off, n1."""
    nodes = [{"name": "n0", "npus": 8, "free": 8, "images": {"llm:1": 30.0}},
             {"name": "n1", "npus": 8, "free": 4}]
    job = {"name": "a", "policy": "chip8-node8", "tasks": 1, "npu-per-task": 4,
           "image": {"name": "llm:1", "size-gb": 30.0}}
    data = {"now": 1_764_400_000, "nodes": nodes, "jobs": [job]}
    _, on, _ = _solved(data)
    _, off, _ = _solved({**data, "config": {"image-locality": False}})
    assert on == ["n0"] and off == ["n1"]


def test_cpsat_vnpu_job_goes_to_the_image_holder() -> None:
    """The busier vNPU node gets upstream's score; CP-SAT's image term moves the slice to
    the idle node that holds the image; off, it stays with upstream's choice."""
    busy = {"name": "v1", "npus": 2, "free": 2, "vnpu": {"chip-kind": "Ascend310P", "chips": [
        {"id": 0, "free-cores": 8, "free-cpus": 7},
        {"id": 1, "free-cores": 3, "free-cpus": 3, "segmented": True}]}}
    idle = {"name": "v2", "npus": 2, "free": 2, "vnpu": {"chip-kind": "Ascend310P"},
            "images": {"chat:1": 20.0}}
    data = {"now": 1_764_400_000, "nodes": [busy, idle], "jobs": [],
            "vnpu-jobs": [{"name": "v", "tasks": 1, "ai-cores": 1,
                           "image": {"name": "chat:1", "size-gb": 20.0}}]}
    _, _, on = _solved(data)
    _, _, off = _solved({**data, "config": {"image-locality": False}})
    assert on == ["v2"] and off == ["v1"]
