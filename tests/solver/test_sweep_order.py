"""The order in which a large-neighbourhood sweep visits jobs (:func:`solver.lns.sweep_order`)."""

from __future__ import annotations

import pytest

from benchmarks.generators import GenParams, generate_case
from heuristics.greedy import greedy_plan
from models.compiled import Problem, compile_scenario
from models.plan import Plan
from models.scenario import Family
from solver import lns
from solver.lns import _blockers, job_potential, sweep_order


def _batch(family: str) -> tuple[Problem, Plan]:
    problem = compile_scenario(generate_case(GenParams(family, nodes=256, seed=5,
                                                       jobs=8)).scenario)
    return problem, greedy_plan(problem)


def _hood_ranks(problem: Problem, plan: Plan, j: int) -> int:
    return sum(problem.jobs[k].tasks for k in [j, *_blockers(problem, plan, j)]
               if problem.jobs[k].family is Family.MULTILEVEL)


def test_large_multilevel_steps_go_after_the_smaller_ones_of_their_tier(
        monkeypatch: pytest.MonkeyPatch) -> None:
    problem, plan = _batch("multilevel")
    potential = job_potential(problem, plan)
    tier = {j: t for t, _, j in potential}
    first = [j for t, _, j in potential if t == 0]
    sizes = {j: _hood_ranks(problem, plan, j) for j in first}
    # a threshold between the steps' sizes, so that some are large and some are not
    limit = sorted(sizes.values())[len(sizes) // 2]
    assert min(sizes.values()) <= limit < max(sizes.values())
    monkeypatch.setattr(lns, "LARGE_STEP_RANKS", limit)
    order = sweep_order(problem, plan)
    assert sorted(order) == sorted(j for _, _, j in potential)
    visited = [j for j in order if tier[j] == 0]
    small = [j for j in first if sizes[j] <= limit]
    large = [j for j in first if sizes[j] > limit]
    assert visited == small + large  # each part in the potential's order
    assert order == sweep_order(problem, plan)  # a function of the plan


def test_other_families_keep_the_potential_order() -> None:
    problem, plan = _batch("a3")
    assert sweep_order(problem, plan) == [j for _, _, j in job_potential(problem, plan)]
