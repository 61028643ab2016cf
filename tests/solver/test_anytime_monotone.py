"""The anytime rule of :mod:`solver.phases`: a longer budget never answers worse.

Exact under deterministic budgets; under wall-clock budgets, what is testable without
timing: the steps carry the same deterministic limits, and the steps before a cut are the
first steps of a longer run.  CP-SAT here runs with 1 worker and a fixed seed (no timed
assertion: the wall-clock limits are only generous safety nets).
"""

from __future__ import annotations

import inspect
import threading
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from benchmarks.generators import GenParams, generate_case
from heuristics.greedy import greedy_plan
from models.check import check
from models.compiled import Problem, compile_scenario
from models.objective import evaluate, resolve_weights
from models.placement import Status
from models.plan import Plan, to_placement
from solver.engine import solve_cpsat
from solver.facade import solve
from solver.lns import (
    STEP_DETERMINISTIC_SECONDS,
    StepNotStarted,
    large_neighbourhood_search,
)
from solver.phases import FULL_MAX_JOBS, LNS_MIN_NODES, search_mode
from solver.request import CpsatOutcome, SolveRequest


def _generated(family: str, nodes: int, seed: int, jobs: int) -> Problem:
    return compile_scenario(generate_case(GenParams(family, nodes=nodes, seed=seed,
                                                    jobs=jobs)).scenario)


@pytest.fixture(scope="module")
def batch_950() -> Problem:
    # 8 jobs on 1,024 Atlas 950 nodes: before the anytime rule, the neighbourhoods-then-
    # whole-model search answered 15,883,172 at D = 0.3 and 15,883,150 at D = 0.6
    return _generated("950", 1024, 1, 8)


def _answer(problem: Problem, deterministic_time: float, mode: str | None) -> int:
    weights = resolve_weights(problem)
    greedy = greedy_plan(problem)
    outcome = solve_cpsat(SolveRequest(
        problem, greedy, weights, time_limit=600.0, workers=1, seed=0,
        deterministic_time=deterministic_time, warm_start=greedy, mode=mode))
    plan = outcome.plan if outcome.plan is not None else greedy
    assert check(problem, to_placement(problem, plan, engine="cpsat",
                                       status=Status.FEASIBLE)) == []
    assert not any("depends on machine load" in note for note in outcome.notes)
    return evaluate(problem, plan.as_mapping(), weights).objective


def test_a_longer_deterministic_budget_never_answers_worse(batch_950: Problem) -> None:
    answers = {d: _answer(batch_950, d, "hybrid") for d in (0.3, 0.6, 1.2)}
    assert answers[0.6] >= answers[0.3]
    assert answers[1.2] >= answers[0.6]


def test_the_facade_answer_is_monotone_in_the_deterministic_budget() -> None:
    problem = _generated("950", 128, 2, 4)
    answers = [solve(problem, engine="auto", time_limit=600, workers=1, seed=0,
                     deterministic_time=d).objective for d in (0.2, 0.5, 1.0)]
    assert answers == sorted(answers)


def _recording_search(problem: Problem, deterministic_time: float | None,
                      limit: float | None, clock_cut_after: int | None = None,
                      no_room_at: int | None = None) -> tuple[list[int], str]:
    """Run the neighbourhood search with a stand-in step solver; return the steps' jobs.

    ``clock_cut_after`` stands for a wall-clock deadline that falls inside that step (the
    step sets the event the deadline sets), ``no_room_at`` for a step that the clock
    leaves no room to search (the step solver refuses it), without measuring any time.
    """
    weights = resolve_weights(problem)
    greedy = greedy_plan(problem)
    visited: list[int] = []
    stopped = threading.Event()

    def step(incumbent: Plan, keep: np.ndarray, fixed: dict[int, np.ndarray],
             skip: frozenset[int], max_seconds: float,
             deterministic: float | None) -> tuple[Plan | None, float]:
        # the same under every budget, deterministic or wall-clock
        assert deterministic == STEP_DETERMINISTIC_SECONDS
        hood = [j for j in range(len(problem.jobs)) if j not in fixed and j not in skip]
        visited.append(hood[0] if hood else -1)
        if no_room_at is not None and len(visited) >= no_room_at:
            raise StepNotStarted("no time left to search this step")
        if clock_cut_after is not None and len(visited) >= clock_cut_after:
            stopped.set()
        return incumbent, 0.1  # never an improvement: the search converges after a sweep

    result = large_neighbourhood_search(problem, greedy, weights, search_end=float("inf"),
                                        deterministic_time=deterministic_time,
                                        solve_step=step, stopped=stopped, limit=limit)
    assert [min(r.hood) for r in result.log] == visited
    if no_room_at is not None:
        assert [r.outcome for r in result.log][-1:] == ["not started"]
    assert all(r.deterministic_limit == STEP_DETERMINISTIC_SECONDS for r in result.log)
    return visited, result.stopped_by


def test_neighbourhood_steps_of_a_shorter_budget_are_a_prefix_of_a_longer_one() -> None:
    problem = _generated("a3", 256, 3, 3)
    short, why_short = _recording_search(problem, 0.15, None)
    long, why_long = _recording_search(problem, 10.0, None)
    assert why_short == "budget" and why_long == "converged"
    assert len(short) == 2  # steps start while less than D is used: 0.0, 0.1
    assert long[:len(short)] == short
    assert len(long) == len(problem.jobs)  # one sweep without improvement


def test_neighbourhood_search_stops_at_its_own_limit_whatever_the_budget() -> None:
    problem = _generated("a3", 256, 3, 3)
    capped, why = _recording_search(problem, 10.0, 0.15)
    assert why == "capped" and len(capped) == 2


def test_wall_clock_steps_carry_the_deterministic_limit_and_a_cut_is_a_prefix() -> None:
    # under a wall-clock budget (deterministic_time None) every step gets the same
    # deterministic limit as under a deterministic one, and the clock only cuts the plan:
    # the steps before a cut are the first steps of an uncut run
    problem = _generated("a3", 256, 3, 3)
    uncut, why = _recording_search(problem, None, None)
    assert why == "converged" and len(uncut) == len(problem.jobs)
    assert uncut == _recording_search(problem, 10.0, None)[0]  # as under a deterministic one
    for k in range(1, len(uncut)):
        cut, why_cut = _recording_search(problem, None, None, clock_cut_after=k)
        assert why_cut == "budget"
        assert cut == uncut[:k]
        # a step the clock leaves no room to search ends the search: no smaller step
        # after it runs, which a longer budget (searching that step) would never reach
        refused, why_refused = _recording_search(problem, None, None, no_room_at=k)
        assert why_refused == "budget"
        assert refused == uncut[:k]


def _steps(outcome: CpsatOutcome) -> list[tuple[int, tuple[int, ...], float, str, int]]:
    return [(r.job, r.hood, r.deterministic_limit, r.outcome, r.objective)
            for r in outcome.steps]


def test_wall_clock_neighbourhoods_repeat_the_same_steps_under_a_longer_budget() -> None:
    # two generous wall-clock budgets: neither cuts the search (it converges), so the
    # runs must be step for step the same searches; before the steps had fixed
    # deterministic limits, each step's limit was a share of the wall clock left
    problem = _generated("a3", 256, 3, 3)
    weights = resolve_weights(problem)
    greedy = greedy_plan(problem)
    runs = [solve_cpsat(SolveRequest(problem, greedy, weights, time_limit=limit, workers=1,
                                     seed=0, warm_start=greedy, mode="lns"))
            for limit in (60.0, 600.0)]
    for outcome in runs:
        assert outcome.plan is not None
        assert check(problem, to_placement(problem, outcome.plan, engine="cpsat",
                                           status=Status.FEASIBLE)) == []
        assert outcome.steps and all(r.deterministic_limit == STEP_DETERMINISTIC_SECONDS
                                     for r in outcome.steps)
        assert outcome.phases and outcome.phases[0].startswith("neighbourhoods: converged")
    assert _steps(runs[0]) == _steps(runs[1])
    assert runs[0].objective == runs[1].objective
    assert any(r.outcome == "improved" for r in runs[0].steps)  # the search did something


def test_wall_clock_hybrid_repeats_the_neighbourhoods_then_keeps_their_answer() -> None:
    # a longer plan (hybrid: the neighbourhoods and their wide steps, then the whole batch
    # with the 5 s or more that a generous budget leaves) starts with the shorter plan's
    # steps (lns only), and its whole-batch phase keeps their answer when it does not beat it
    problem = _generated("a3", 256, 3, 3)
    weights = resolve_weights(problem)
    greedy = greedy_plan(problem)
    runs = {mode: solve_cpsat(SolveRequest(problem, greedy, weights, time_limit=120.0,
                                           workers=1, seed=0, warm_start=greedy, mode=mode))
            for mode in ("lns", "hybrid")}
    short, long = runs["lns"], runs["hybrid"]
    assert long.plan is not None and short.objective is not None
    assert _steps(long) == _steps(short)
    assert long.phases[0] == short.phases[0]
    assert [p.split(":")[0] for p in long.phases] == ["neighbourhoods", "wide neighbourhoods",
                                                      "whole batch"]
    value = evaluate(problem, long.plan.as_mapping(), weights).objective
    assert value >= short.objective
    assert check(problem, to_placement(problem, long.plan, engine="cpsat",
                                       status=Status.FEASIBLE)) == []


def _shape(nodes: int, jobs: int) -> Problem:
    return cast(Problem, SimpleNamespace(num_nodes=nodes, jobs=[object()] * jobs))


def test_search_mode_depends_on_the_shape_only() -> None:
    assert search_mode(_shape(LNS_MIN_NODES - 1, 10)) == "full"
    assert search_mode(_shape(8192, FULL_MAX_JOBS)) == "full"  # one big job: the model proves
    assert search_mode(_shape(4608, 1)) == "full"
    assert search_mode(_shape(65536, FULL_MAX_JOBS)) == "full"  # one job: the model proves
    # no budget parameter: a budget-dependent choice would break the anytime rule
    # (between hybrid and lns the model's size decides: tests/solver/test_search_mode.py)
    assert list(inspect.signature(search_mode).parameters) == ["problem"]
