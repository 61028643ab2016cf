"""The request of a CP-SAT solve (:mod:`solver.request`): its budget, its derived copies
and the stop channel a search registers with."""

from __future__ import annotations

import dataclasses
import time

import pytest
from ortools.sat.python import cp_model

from benchmarks.generators import GenParams, generate_case
from heuristics.greedy import greedy_plan
from models.compiled import compile_scenario
from models.objective import resolve_weights
from models.placement import Status
from solver.request import CpsatOutcome, SearchControl, SolveRequest


@pytest.fixture(scope="module")
def request_() -> SolveRequest:
    problem = compile_scenario(generate_case(GenParams("950", nodes=64, seed=1,
                                                       jobs=3)).scenario)
    return SolveRequest(problem, greedy_plan(problem), resolve_weights(problem),
                        time_limit=10.0, recover_reserve=2.0, started=100.0)


def test_the_budget_runs_from_started(request_: SolveRequest) -> None:
    assert request_.deadline == 110.0
    assert request_.search_end == 108.0
    before = time.perf_counter()
    made = SolveRequest(request_.problem, request_.anchor, request_.weights, time_limit=1.0)
    assert before <= made.started <= time.perf_counter()


def test_a_derived_request_keeps_the_budget_and_the_stop_channel(
        request_: SolveRequest) -> None:
    phase = dataclasses.replace(request_, deterministic_time=4.0)
    assert phase.search_end == request_.search_end and phase.deterministic
    assert phase.control is request_.control
    assert not request_.deterministic
    with pytest.raises(dataclasses.FrozenInstanceError):
        request_.seed = 1  # type: ignore[misc]


def test_a_search_starts_only_with_room_and_before_the_stop(request_: SolveRequest) -> None:
    now = time.perf_counter()
    roomy = dataclasses.replace(request_, started=now, control=type(request_.control)())
    solver = cp_model.CpSolver()
    assert roomy.begin_search(solver, latency=0.01)
    assert roomy.control.solver is solver
    # a wall-clock budget whose search end has passed: not started
    late = dataclasses.replace(roomy, started=now - 9.9)
    assert not late.begin_search(cp_model.CpSolver(), latency=0.1)
    # a deterministic budget searches whatever the wall clock says (a safety net)
    assert dataclasses.replace(late, deterministic_time=1.0).begin_search(
        cp_model.CpSolver(), latency=0.1)
    roomy.control.stop()
    assert not roomy.begin_search(cp_model.CpSolver(), latency=0.01)


def test_the_solve_stops_the_requests_own_channel(request_: SolveRequest,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # the request is not given a new channel when its solve starts: what its maker holds
    # (request.control) is what the worker's phases publish to and the deadline stops
    import solver.engine as engine

    seen: list[SearchControl] = []

    def phases(request: SolveRequest) -> CpsatOutcome:
        seen.append(request.control)
        return CpsatOutcome(None, Status.GREEDY, None, None, 0.0, [], None, "NOT_RUN")

    monkeypatch.setattr(engine, "run_phases", phases)
    monkeypatch.setattr(engine, "tighten_bound", lambda request, found: found)
    fresh = dataclasses.replace(request_, started=time.perf_counter(), time_limit=5.0)
    engine.solve_cpsat(fresh)
    assert seen == [fresh.control]
    assert seen[0] is fresh.control
