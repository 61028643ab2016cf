"""Batches of pending jobs: queue order, priority, shared capacity, gang all-or-nothing."""

from __future__ import annotations

from typing import Any

import numpy as np

from heuristics.greedy import greedy_plan
from heuristics.state import ClusterState
from models.check import Rule, check
from models.compiled import Problem, compile_scenario
from models.placement import JobPlacement, PlacementFile, Status
from models.plan import to_placement
from models.scenario import Scenario


def make(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> Problem:
    data = {
        "now": 1000,
        "nodes": [{"npus": 8, "free": 8, **n} for n in nodes],
        "jobs": [{"policy": "chip8-node8", **j} for j in jobs],
    }
    return compile_scenario(Scenario.model_validate(data))


def names(problem: Problem, nodes: np.ndarray | None) -> list[str] | None:
    return None if nodes is None else [problem.node_names[n] for n in nodes]


def valid(problem: Problem, plan: Any) -> bool:
    return check(problem, to_placement(problem, plan, engine="greedy",
                                       status=Status.GREEDY)) == []


def test_priority_beats_file_order() -> None:
    problem = make([{"name": "n1"}],
                   [{"name": "low", "tasks": 1, "npu-per-task": 8, "priority": 0},
                    {"name": "high", "tasks": 1, "npu-per-task": 8, "priority": 5}])
    assert problem.queue == (1, 0)
    plan = greedy_plan(problem)
    assert names(problem, plan.nodes[1]) == ["n1"]
    assert plan.nodes[0] is None
    reason = plan.reasons[0]
    assert reason is not None and "NPUResourceShortage" in reason
    assert "earlier in the queue: high" in reason
    assert valid(problem, plan)


def test_equal_priority_keeps_file_order() -> None:
    problem = make([{"name": "n1"}],
                   [{"name": "first", "tasks": 1, "npu-per-task": 8, "priority": 3},
                    {"name": "second", "tasks": 1, "npu-per-task": 8, "priority": 3}])
    plan = greedy_plan(problem)
    assert names(problem, plan.nodes[0]) == ["n1"]
    assert plan.nodes[1] is None


def test_later_jobs_see_the_chips_earlier_jobs_took() -> None:
    problem = make([{"name": "a", "free": 6}, {"name": "b"}],
                   [{"name": "j1", "tasks": 3, "npu-per-task": 2},
                    {"name": "j2", "tasks": 1, "npu-per-task": 4},
                    {"name": "j3", "tasks": 1, "npu-per-task": 4}])
    plan = greedy_plan(problem)
    # j1 packs a (6 -> 0); j2 must use b; j3 takes the rest of b
    assert names(problem, plan.nodes[0]) == ["a", "a", "a"]
    assert names(problem, plan.nodes[1]) == ["b"]
    assert names(problem, plan.nodes[2]) == ["b"]
    assert valid(problem, plan)


def test_gang_rollback_leaves_no_half_placed_job() -> None:
    # big needs 3 nodes but only 2 are free: none of its ranks take anything, so the
    # following job still gets a whole node.
    problem = make([{"name": "a"}, {"name": "b"}, {"name": "c", "free": 4}],
                   [{"name": "big", "tasks": 3, "npu-per-task": 8, "priority": 9},
                    {"name": "small", "tasks": 2, "npu-per-task": 8}])
    start = ClusterState.initial(problem)
    before = start.free.copy()
    plan = greedy_plan(problem, start)
    assert plan.nodes[0] is None
    assert names(problem, plan.nodes[1]) == ["a", "b"]
    assert np.array_equal(start.free, before)  # the caller's state is not modified
    placement = to_placement(problem, plan, engine="greedy", status=Status.GREEDY)
    assert placement.jobs[0].ranks == {}
    assert check(problem, placement) == []


def test_validator_checks_capacity_across_jobs() -> None:
    problem = make([{"name": "a", "free": 6}],
                   [{"name": "j1", "tasks": 1, "npu-per-task": 4},
                    {"name": "j2", "tasks": 1, "npu-per-task": 4}])
    bad = PlacementFile(jobs=[JobPlacement(name="j1", placed=True, ranks={"0": "a"}),
                              JobPlacement(name="j2", placed=True, ranks={"0": "a"})])
    rules = [v.rule for v in check(problem, bad)]
    assert rules == [Rule.CAPACITY]
    plan = greedy_plan(problem)
    assert plan.placed_count() == 1 and valid(problem, plan)
