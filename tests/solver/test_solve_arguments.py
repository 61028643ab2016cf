"""``solve()`` checks the kind of every argument before any work, naming the argument."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import solver.facade as facade_module
from models.compiled import Problem, compile_scenario
from models.io import load_scenario
from models.objective import Weights
from solver.doors import example_path
from solver.facade import solve


@pytest.fixture
def problem() -> Problem:
    return compile_scenario(load_scenario(example_path("ordinary-8npu")))


@pytest.fixture
def no_greedy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if greedy runs: the arguments must be refused before it."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("greedy ran before the arguments were checked")

    monkeypatch.setattr(facade_module, "greedy_plan", refuse)


@pytest.mark.usefixtures("no_greedy")
@pytest.mark.parametrize("engine", ["greedy", "cpsat", "auto"])
@pytest.mark.parametrize(("bad", "error", "named"), [
    ({"workers": 2.5}, TypeError, "workers"),
    ({"workers": True}, TypeError, "workers"),
    ({"seed": 1.5}, TypeError, "seed"),
    ({"seed": None}, TypeError, "seed"),
    ({"seed": "1"}, TypeError, "seed"),
    ({"time_limit": "10"}, TypeError, "time_limit"),
    ({"time_limit": None}, TypeError, "time_limit"),
    ({"deterministic_time": "1"}, TypeError, "deterministic_time"),
    ({"weights": {"origin-hit": 5}}, TypeError, "weights"),
    ({"on_fallback": 3}, TypeError, "on_fallback"),
    ({"cache": {}}, TypeError, "cache"),
    ({"workers": 0}, ValueError, "workers"),
    ({"seed": -1}, ValueError, "seed"),
])
def test_a_wrong_argument_is_refused_by_name_before_greedy_runs(
        problem: Problem, engine: str, bad: dict[str, Any], error: type[Exception],
        named: str) -> None:
    arguments: dict[str, Any] = {"engine": engine, "time_limit": 5.0, "workers": 1, "seed": 0}
    arguments.update(bad)
    with pytest.raises(error, match=named.replace("_", "[-_]")):
        solve(problem, **arguments)


@pytest.mark.usefixtures("no_greedy")
@pytest.mark.parametrize("scenario", ["models/examples/ordinary-8npu.yaml", {"nodes": []}, None])
def test_a_scenario_that_is_not_a_scenario_is_refused_by_name(scenario: Any) -> None:
    with pytest.raises(TypeError, match="scenario must be"):
        solve(scenario, engine="greedy")


@pytest.mark.usefixtures("no_greedy")
def test_a_path_string_is_pointed_to_load_scenario() -> None:
    with pytest.raises(TypeError, match="load_scenario"):
        solve("models/examples/ordinary-8npu.yaml")


@pytest.mark.usefixtures("no_greedy")
def test_an_unknown_engine_is_refused_by_name(problem: Problem) -> None:
    with pytest.raises(ValueError, match="unknown engine"):
        solve(problem, engine="fast")
    with pytest.raises(TypeError, match="engine"):
        solve(problem, engine=None)  # type: ignore[arg-type]


def test_numpy_numbers_are_accepted_and_recorded_as_python_numbers(problem: Problem) -> None:
    result = solve(problem, engine="greedy", time_limit=np.float64(5.0), workers=np.int64(1),
                   seed=np.int32(3), weights=Weights())
    assert result.placement.seed == 3
    assert type(result.placement.seed) is int
