"""The facade's answer is one immutable :class:`~solver.facade.Result`, built in one place:
its placement file says what it says, and nothing changes it once made."""

from __future__ import annotations

import dataclasses
import json

import pytest

from benchmarks.generators import GenParams, generate_case
from models.check import check
from models.compiled import Problem, compile_scenario
from models.io import load_scenario
from solver.doors import example_path
from solver.facade import RESULT_ENGINES, Result, solve
from solver.reuse import SolveCache


def _example(name: str) -> Problem:
    return compile_scenario(load_scenario(example_path(name)))


def _header(result: Result) -> dict[str, object]:
    return {"engine": result.engine, "status": result.status, "objective": result.objective,
            "bound": result.bound, "gap": result.gap, "notes": list(result.notes),
            "metrics": result.metrics.to_model()}


def _placement_header(result: Result) -> dict[str, object]:
    p = result.placement
    return {"engine": p.engine, "status": p.status, "objective": p.objective,
            "bound": p.bound, "gap": p.gap, "notes": p.notes, "metrics": p.metrics}


@pytest.mark.parametrize("engine", ["greedy", "auto", "cpsat"])
@pytest.mark.parametrize("name", ["superpod-850", "multilevel", "vnpu-inference"])
def test_the_result_is_frozen_and_its_placement_says_the_same(name: str, engine: str) -> None:
    problem = _example(name)
    result = solve(problem, engine=engine, time_limit=20, workers=1, seed=0,
                   deterministic_time=0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.engine = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.notes = ()  # type: ignore[misc]
    assert isinstance(result.notes, tuple)
    assert result.engine in RESULT_ENGINES
    assert result.objective == result.metrics.objective
    assert _header(result) == _placement_header(result)
    assert check(problem, result.placement) == []


def test_published_answers_are_not_changed_by_what_comes_after() -> None:
    # with vNPU jobs each early answer is joined with the vNPU part: a new result each
    # time, and the final one is joined again; none of them is patched afterwards
    problem = _example("vnpu-inference")
    published: list[tuple[Result, str, tuple[str, ...]]] = []

    def keep(answer: Result) -> None:
        published.append((answer, json.dumps(answer.placement.to_dict(), sort_keys=True),
                          answer.notes))

    final = solve(problem, engine="auto", time_limit=20, workers=1, seed=0,
                  deterministic_time=0.5, on_fallback=keep)
    assert published
    for answer, text, notes in published:
        assert json.dumps(answer.placement.to_dict(), sort_keys=True) == text
        assert answer.notes == notes
        assert answer is not final
    assert sum(note.startswith("vNPU jobs:") for note in final.notes) == 1


def test_a_note_added_later_gives_a_new_result() -> None:
    result = solve(_example("superpod-850"), engine="greedy")
    noted = result.with_note("the cache had expired entries")
    assert noted.notes[-1] == "the cache had expired entries"
    assert noted.placement.notes == list(noted.notes)
    assert "the cache had expired entries" not in result.notes
    assert "the cache had expired entries" not in result.placement.notes


def test_the_solve_cache_counts_its_own_sessions() -> None:
    problem = compile_scenario(generate_case(GenParams("a3", nodes=96, seed=1,
                                                       jobs=3)).scenario)
    cache = SolveCache()
    for _ in range(2):
        solve(problem, engine="auto", time_limit=20, workers=1, seed=0,
              deterministic_time=0.3, cache=cache)
    assert cache.sessions == 2 and cache.reused == 1
