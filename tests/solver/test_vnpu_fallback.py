"""vNPU jobs in the service's early answer (``solve(on_fallback=...)``) and in the reuse
cache (``solve(cache=...)``): the hook sees whole answers (the other jobs'
fallback joined with greedy's vNPU answer), and the other jobs' last answer is a warm
start although the scenario has vNPU jobs."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

import heuristics.vnpu as greedy_vnpu_module
from models.check import check
from models.compiled import Problem, compile_scenario
from models.io import load_scenario
from models.joblist import job_names
from models.placement import PlacementFile
from solver.doors import example_path
from solver.facade import VNPU_PENDING_REASON, Result, solve
from solver.reuse import SolveCache
from solver.service.messages import FallbackAnswer, FinalAnswer, Parsed, PlanRequest
from solver.service.worker import DEFAULT_SOLVE, Worker


def _problem(without_jobs: bool = False) -> Problem:
    scenario = load_scenario(example_path("vnpu-inference"))
    if without_jobs:
        scenario = scenario.model_copy(update={"jobs": []})
    return compile_scenario(scenario)


def _vnpu_names(problem: Problem) -> set[str]:
    return {job.name for job in problem.scenario.vnpu_jobs}


@pytest.mark.parametrize("engine", ["auto", "cpsat"])
def test_the_early_answer_holds_every_vnpu_job_and_passes_the_validator(
        engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = _problem()
    calls: list[int] = []
    original = greedy_vnpu_module.greedy_vnpu  # the facade imports it when used

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(greedy_vnpu_module, "greedy_vnpu", counted)
    published: list[Result] = []
    result = solve(problem, engine=engine, time_limit=10, workers=1, seed=0,
                   deterministic_time=0.5, on_fallback=published.append)
    assert len(calls) == 1  # greedy's vNPU answer: computed once, early and final
    assert len(published) >= 2 and published[0].engine == published[1].engine == "greedy"
    # first the other jobs' greedy answer with every vNPU job pending, at once ...
    first = {jp.name: jp for jp in published[0].placement.jobs}
    assert all(not first[name].placed and first[name].reason == VNPU_PENDING_REASON
               for name in _vnpu_names(problem))
    # ... then, once the vNPU greedy ran (before any search), the whole greedy answer
    greedy_alone = solve(problem, engine="greedy")
    assert published[1].placement.to_dict()["jobs"] == greedy_alone.placement.to_dict()["jobs"]
    assert published[1].objective == greedy_alone.objective
    for answer in published:
        assert check(problem, answer.placement) == []  # every job, vNPU jobs included
        names = [jp.name for jp in answer.placement.jobs]
        assert sorted(names) == sorted(job_names(problem.scenario))  # each exactly once
    for answer in published[1:]:
        assert any(jp.chips for jp in answer.placement.jobs)
    assert check(problem, result.placement) == []
    assert result.objective >= published[-1].objective
    # the final answer is a separate object: the early one was not changed by the join
    assert all(answer is not result for answer in published)


def test_a_scenario_of_vnpu_jobs_only_publishes_its_answer() -> None:
    problem = _problem(without_jobs=True)
    published: list[Result] = []
    result = solve(problem, engine="auto", time_limit=10, workers=1, seed=0,
                   deterministic_time=0.5, on_fallback=published.append)
    # every vNPU job pending at once, then the vNPU greedy's answer
    assert len(published) == 2 and all(a.engine == "greedy" for a in published)
    for answer in published:
        assert [jp.name for jp in answer.placement.jobs] == job_names(problem.scenario)
        assert check(problem, answer.placement) == []
    assert not any(jp.placed for jp in published[0].placement.jobs)
    assert any(jp.placed for jp in published[1].placement.jobs)
    assert result.objective >= published[1].objective


def test_the_other_jobs_last_answer_is_reused_next_to_vnpu_jobs() -> None:
    problem = _problem()
    cache = SolveCache()
    first = solve(problem, engine="auto", time_limit=10, workers=1, seed=0,
                  deterministic_time=0.5, cache=cache)
    assert check(problem, first.placement) == []
    assert set(cache.placed) >= {"train-llm"} and cache.sessions == 1
    again = solve(problem, engine="auto", time_limit=10, workers=1, seed=0,
                  deterministic_time=0.5, cache=cache)
    assert cache.sessions == 2 and cache.reused == 1
    assert any("previous session's answer" in note for note in again.notes)
    assert check(problem, again.placement) == []
    assert _vnpu_names(problem) <= {jp.name for jp in again.placement.jobs}
    assert again.objective >= first.objective


class _Pipe:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    def send(self, message: Any) -> None:
        self.messages.append(message)


def test_the_service_worker_sends_an_early_answer_with_the_vnpu_jobs() -> None:
    problem = _problem()
    pipe = _Pipe()
    worker = Worker(pipe, DEFAULT_SOLVE)  # type: ignore[arg-type]
    body = json.dumps(problem.scenario.to_dict()).encode()
    worker.plan(1, PlanRequest(body, None, "auto", time.monotonic() + 10, 0, 0.5))
    # the job names (the service's empty answer) hold both kinds; then the other jobs'
    # greedy answer with the vNPU jobs pending, the whole greedy answer, the final one
    assert [type(m) for m in pipe.messages] == [Parsed, FallbackAnswer, FallbackAnswer,
                                                FinalAnswer]
    assert pipe.messages[0].jobs == job_names(problem.scenario)
    for message in pipe.messages[1:3]:
        early = PlacementFile.model_validate(message.placement)
        assert early.engine == "greedy" and check(problem, early) == []
        assert [jp.name for jp in early.jobs] == job_names(problem.scenario)
    final = PlacementFile.model_validate(pipe.messages[3].placement)
    assert check(problem, final) == []
    assert pipe.messages[3].greedy_objective == pipe.messages[2].objective


def test_the_vnpu_greedy_stops_at_its_deadline() -> None:
    """Past its deadline the vNPU greedy leaves the job it was placing and every later one
    pending with the out-of-time reason; the facade's answer says so and is valid."""
    from heuristics.vnpu import greedy_vnpu
    from models.vnpu_rules import OUT_OF_TIME_REASON

    problem = _problem()
    done = greedy_vnpu(problem, deadline=time.perf_counter() + 60)
    assert not done.out_of_time and any(n is not None for n in done.nodes)
    late = greedy_vnpu(problem, deadline=time.perf_counter() - 1)
    assert late.out_of_time and all(n is None for n in late.nodes)
    assert set(late.reasons) == {OUT_OF_TIME_REASON}
    result = solve(problem, engine="auto", time_limit=0.001, workers=1, seed=0)
    assert check(problem, result.placement) == []
    assert [jp.name for jp in result.placement.jobs] == job_names(problem.scenario)
    pending = [jp for jp in result.placement.jobs if jp.name in _vnpu_names(problem)]
    assert {jp.reason for jp in pending} == {OUT_OF_TIME_REASON}
    assert any("the vNPU greedy ran out of the time budget" in n for n in result.notes)
