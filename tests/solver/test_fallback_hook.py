"""``solve(on_fallback=...)``: the fallback answers are published as soon as they exist
(greedy's, then origin-first's when better), greedy runs once, and the service's worker
sends them as its early answers instead of running greedy itself."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

import solver.facade as facade
from benchmarks.generators import GenParams, generate_case
from models.check import check
from models.compiled import Problem, compile_scenario
from models.io import load_scenario
from models.placement import PlacementFile
from solver.doors import example_path
from solver.facade import Result, solve
from solver.service.messages import FallbackAnswer, FinalAnswer, Parsed, PlanRequest
from solver.service.worker import DEFAULT_SOLVE, Worker


def _example(name: str) -> Problem:
    return compile_scenario(load_scenario(example_path(name)))


def _count_greedy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = facade.greedy_plan

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(facade, "greedy_plan", counted)
    return calls


@pytest.mark.parametrize("engine", ["auto", "cpsat"])
def test_greedy_is_published_first_and_runs_once(monkeypatch: pytest.MonkeyPatch,
                                                 engine: str) -> None:
    problem = _example("superpod-850")
    greedy_alone = solve(problem, engine="greedy")
    calls = _count_greedy(monkeypatch)
    published: list[Result] = []
    result = solve(problem, engine=engine, time_limit=5, workers=1, seed=0,
                   on_fallback=published.append)
    assert len(calls) == 1
    assert published and published[0].engine == "greedy"
    assert published[0].objective == greedy_alone.objective
    assert published[0].placement.to_dict()["jobs"] == greedy_alone.placement.to_dict()["jobs"]
    for answer in published:
        assert check(problem, answer.placement) == []
    assert result.objective >= published[-1].objective  # never worse than a fallback


def test_origin_first_is_published_when_it_beats_greedy() -> None:
    # the case of tests/solver/test_deadline.py where origin-first beats greedy
    problem = compile_scenario(generate_case(GenParams("a3", nodes=256, seed=3,
                                                       jobs=3)).scenario)
    published: list[Result] = []
    result = solve(problem, engine="auto", time_limit=5, workers=1, seed=0,
                   deterministic_time=0.5, on_fallback=published.append)
    assert [r.engine for r in published] == ["greedy", "origin-first"]
    assert published[1].objective > published[0].objective
    assert published[1].objective == result.origin_first_objective
    for answer in published:
        assert check(problem, answer.placement) == []


def test_greedy_engine_publishes_its_one_answer() -> None:
    problem = _example("superpod-850")
    published: list[Result] = []
    result = solve(problem, engine="greedy", on_fallback=published.append)
    assert published == [result]


def test_a_failing_callback_does_not_break_the_solve() -> None:
    problem = _example("superpod-850")

    def broken(_: Result) -> None:
        raise RuntimeError("caller bug")

    result = solve(problem, engine="auto", time_limit=5, workers=1, seed=0, on_fallback=broken)
    assert check(problem, result.placement) == []


class _Pipe:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    def send(self, message: Any) -> None:
        self.messages.append(message)


def test_the_worker_sends_the_facades_fallback_and_runs_greedy_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    problem = _example("superpod-850")
    body = json.dumps(problem.scenario.to_dict()).encode()
    pipe = _Pipe()
    worker = Worker(pipe, DEFAULT_SOLVE)  # type: ignore[arg-type]
    calls = _count_greedy(monkeypatch)
    worker.plan(1, PlanRequest(body, None, "auto", time.monotonic() + 5, 0, None))
    assert [type(m) for m in pipe.messages] == [Parsed, FallbackAnswer, FinalAnswer]
    assert len(calls) == 1
    early = PlacementFile.model_validate(pipe.messages[1].placement)
    assert early.engine == "greedy" and check(problem, early) == []
    final = PlacementFile.model_validate(pipe.messages[2].placement)
    assert check(problem, final) == []
    assert pipe.messages[2].greedy_objective == pipe.messages[1].objective


@pytest.mark.parametrize("engine", ["auto", "cpsat"])
def test_the_fallback_handed_back_unchanged_is_not_checked_again(
        monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    """When the search hands the fallback back as it is (no neighbourhood improved it), the
    end of the budget is not spent checking, scoring and assembling it again;
    the answer is the fallback with the search's notes and bound, and still valid."""
    import solver.engine as cpsat_engine
    from solver.request import CpsatOutcome, SolveRequest

    problem = _example("superpod-850")
    greedy_alone = solve(problem, engine="greedy")
    checked: list[str] = []
    original = facade._checked

    def counted(problem: Problem, plan: Any, engine: str) -> Any:
        checked.append(engine)
        return original(problem, plan, engine)

    def unchanged(request: SolveRequest) -> CpsatOutcome:
        return CpsatOutcome(request.warm_start, facade.Status.FEASIBLE, None, 10**12, 0.0,
                            ["large-neighbourhood search: 0 steps (time up)"], None, "LNS")

    monkeypatch.setattr(facade, "_checked", counted)
    monkeypatch.setattr(cpsat_engine, "solve_cpsat", unchanged)
    result = solve(problem, engine=engine, time_limit=5, workers=1, seed=0)
    assert "cpsat" not in checked and checked[0] == "greedy"
    assert result.objective >= greedy_alone.objective
    assert result.engine in ("greedy", "origin-first", "cpsat")
    assert result.bound == result.placement.bound == 10**12
    assert result.gap is not None and result.placement.gap == result.gap
    assert "large-neighbourhood search: 0 steps (time up)" in result.placement.notes
    assert result.placement.wall_seconds == pytest.approx(result.wall_seconds, abs=1e-5)
    assert check(problem, result.placement) == []
