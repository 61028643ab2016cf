"""Answers of a neighbourhood search on a large batch carry a bound, so a gap.

Neighbourhoods prove nothing; :func:`solver.phases.neighbourhood_bound` gives such an
answer a bound before the search (the origin-hit LP, or the sum of achievable hits when
the budget is short).  The batches here are small (the rule's node count is lowered for
the test); the bound must hold for the answer and for every fallback.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import solver.phases as phases
from benchmarks.generators import GenParams, generate_case
from heuristics.greedy import greedy_plan
from models.compiled import Problem, compile_scenario
from models.objective import resolve_weights
from solver.engine import solve_cpsat
from solver.facade import solve
from solver.phases import hits_bound
from solver.request import SolveRequest


def _problem(family: str, nodes: int, seed: int, jobs: int) -> Problem:
    return compile_scenario(generate_case(GenParams(family, nodes=nodes, seed=seed,
                                                    jobs=jobs)).scenario)


def test_a_neighbourhood_answer_reports_a_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = _problem("950", 2048, 3, 4)
    monkeypatch.setattr(phases, "GAP_MIN_NODES", 1024)
    result = solve(problem, engine="auto", time_limit=120.0, workers=1, seed=0,
                   deterministic_time=0.2)
    assert phases.search_mode(problem) in ("lns", "hybrid")
    assert result.bound is not None and result.gap is not None
    assert result.bound >= result.objective
    cheap = hits_bound(problem, resolve_weights(problem))
    assert cheap is not None and result.bound <= cheap


def test_a_short_wall_clock_budget_gets_the_cheap_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    problem = _problem("950", 2048, 3, 5)
    monkeypatch.setattr(phases, "GAP_MIN_NODES", 1024)
    # no room for the LP before the search's end: the sum of achievable hits is the bound
    monkeypatch.setattr(phases, "LP_BOUND_MIN_SECONDS", 1e9)
    weights = resolve_weights(problem)
    greedy = greedy_plan(problem)
    outcome = solve_cpsat(SolveRequest(problem, greedy, weights, time_limit=0.5, workers=1,
                                       seed=0, warm_start=greedy, mode="lns"))
    assert outcome.bound is not None and outcome.bound == hits_bound(problem, weights)



def test_an_answer_given_without_the_worker_keeps_the_bound(
        monkeypatch: pytest.MonkeyPatch, stall_cpsat: Callable[[], threading.Event]) -> None:
    # CP-SAT ignores its limit: the call gives up on its worker at the deadline, and the
    # bound computed before the neighbourhoods is still the answer's (a loaded machine
    # reaches this path; the suite once saw a 0.5-s call return without its bound)
    problem = _problem("950", 2048, 3, 5)
    monkeypatch.setattr(phases, "GAP_MIN_NODES", 1024)
    monkeypatch.setattr(phases, "LP_BOUND_MIN_SECONDS", 1e9)
    weights = resolve_weights(problem)
    greedy = greedy_plan(problem)
    release = stall_cpsat()
    try:
        outcome = solve_cpsat(SolveRequest(problem, greedy, weights, time_limit=0.5,
                                           workers=1, seed=0, warm_start=greedy, mode="lns"))
    finally:
        release.set()
    assert outcome.solver_status in ("OVERRAN", "LNS", "NOT_RUN")
    assert outcome.bound is not None and outcome.bound == hits_bound(problem, weights)


def test_a_multilevel_neighbourhood_answer_has_the_hits_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # multilevel jobs have no LP rows: the LP's bound is the sum of achievable hits
    problem = _problem("multilevel", 1024, 3, 4)
    monkeypatch.setattr(phases, "GAP_MIN_NODES", 512)
    weights = resolve_weights(problem)
    greedy = greedy_plan(problem)
    outcome = solve_cpsat(SolveRequest(problem, greedy, weights, time_limit=120.0, workers=1,
                                       seed=0, deterministic_time=0.2, warm_start=greedy,
                                       mode="lns"))
    assert outcome.plan is not None and outcome.objective is not None
    assert outcome.bound == hits_bound(problem, weights)
    assert outcome.bound is not None and outcome.bound >= outcome.objective


def test_answers_given_without_a_search_have_the_cheap_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # CP-SAT gave nothing (its model was not ready within the budget): the answer is the
    # fallback's and reports its gap all the same, and so does greedy's early answer; the
    # bound is computed right after greedy, before the construction or the search could
    # use up the budget
    import solver.engine as engine
    from models.placement import Status
    from solver.request import CpsatOutcome

    problem = _problem("950", 2048, 3, 5)
    monkeypatch.setattr(phases, "GAP_MIN_NODES", 1024)

    def not_ready(request: SolveRequest) -> CpsatOutcome:
        return CpsatOutcome(None, Status.GREEDY, None, None, 0.0,
                            ["the CP-SAT model was not ready within the budget"], None,
                            "NOT_RUN")

    monkeypatch.setattr(engine, "solve_cpsat", not_ready)
    early: list[int | None] = []
    result = solve(problem, engine="auto", time_limit=120.0, workers=1, seed=0,
                   deterministic_time=0.2, on_fallback=lambda r: early.append(r.bound))
    cheap = hits_bound(problem, resolve_weights(problem))
    assert result.engine != "cpsat" and result.bound == cheap and result.gap is not None
    assert cheap is not None and cheap >= result.objective
    assert early and all(bound == cheap for bound in early)
    monkeypatch.setattr(phases, "GAP_MIN_NODES", 4096)  # below the rule's node count: none
    assert solve(problem, engine="auto", time_limit=120.0, workers=1, seed=0,
                 deterministic_time=0.2).bound is None
