"""The origin-first construction (a second CP-SAT warm start, not an upstream strategy)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.generators import GenParams, generate
from heuristics.greedy import greedy_plan
from heuristics.origin_first import origin_first_plan
from models.check import check
from models.compiled import compile_scenario
from models.objective import evaluate
from models.placement import Status
from models.plan import to_placement
from models.scenario import Scenario

NOW = 1764400000


@pytest.mark.parametrize("family", ["a3", "850", "950"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plans_are_valid_and_keep_other_jobs(family: str, seed: int) -> None:
    problem = compile_scenario(generate(GenParams(family=family, nodes=256, seed=seed,
                                                  jobs=4)))
    base = greedy_plan(problem)
    plan = origin_first_plan(problem, base)
    assert check(problem, to_placement(problem, plan, engine="of", status=Status.GREEDY)) == []
    for job in problem.jobs:
        redone = job.whole_node and not job.soft and not job.ub_memory
        if not redone and base.nodes[job.index] is not None:
            assert (plan.nodes[job.index] == base.nodes[job.index]).all()


def test_windows_with_most_origins_go_home_first() -> None:
    # Rack 0 has three free nodes: a0 (window 0's only free origin; a1 is taken) and b0,
    # b1 (window 1's origins).  Greedy fills window 0 first and spends b0 on it (1 hit);
    # origin first returns window 1 whole and sends window 0 to rack 1 (2 hits).
    names = ["a0", "a1", "b0", "b1", "x0", "x1", "x2", "x3"]
    nodes: list[dict[str, Any]] = [
        {"name": name, "npus": 8, "free": 0 if name == "a1" else 8, "super-pod-id": 0,
         "rack-id": 0 if k < 4 else 1} for k, name in enumerate(names)]
    problem = compile_scenario(Scenario.model_validate({
        "now": NOW, "config": {"super-pod-size": 16}, "nodes": nodes,
        "affinity-cache": {"entries": [{"owner-uid": "u", "rank": r, "node": n,
                                        "updated": NOW}
                                       for r, n in enumerate(["a0", "a1", "b0", "b1"])]},
        "jobs": [{"name": "J", "owner-uid": "u", "policy": "chip8-node8-ra64-sp",
                  "tasks": 4, "npu-per-task": 8, "sp-block": 32, "ra-block": 16}],
    }))
    base = greedy_plan(problem)
    plan = origin_first_plan(problem, base)
    assert check(problem, to_placement(problem, plan, engine="of", status=Status.GREEDY)) == []
    assert evaluate(problem, base.as_mapping()).origin_hits == 1
    assert evaluate(problem, plan.as_mapping()).origin_hits == 2
    names_of = [problem.node_names[int(n)] for n in plan.nodes[0]]  # type: ignore[union-attr]
    assert names_of[2:] == ["b0", "b1"]
