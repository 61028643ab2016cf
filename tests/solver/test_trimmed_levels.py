"""Both engines on a node that lacks only the label of a trimmed level.

Greedy keeps such a node in the tree, as upstream (``removeRedundantLayers`` runs before
any label is read); the CP-SAT model only knows fully labelled nodes, so greedy's warm
start is not representable there.  The facade must still answer, validly, with the better
plan and no BUG note.
"""

from __future__ import annotations

import pytest

from models.check import check
from models.compiled import compile_scenario
from models.objective import evaluate
from models.scenario import Scenario
from solver.facade import solve

NOW = 1_764_400_000


def _scenario(tasks: int) -> Scenario:
    labels = [{"rack": "r0", "switch": "s0"}, {"rack": "r0", "switch": "s0"}, {"rack": "r0"}]
    return Scenario.model_validate({
        "now": NOW,
        "config": {"resource-level-config": {"default": {
            "level1": {"label": "rack"}, "level2": {"label": "switch"}}}},
        "nodes": [{"name": f"n{i}", "npus": 8, "free": 8, "labels": lab}
                  for i, lab in enumerate(labels)],
        "jobs": [{"name": "j", "policy": "multilevel", "tasks": tasks, "npu-per-task": 8,
                  "affinity-config": f"level1={tasks}"}],
    })


@pytest.mark.parametrize("engine", ["greedy", "auto", "cpsat"])
@pytest.mark.parametrize("tasks", [1, 3])
def test_every_engine_answers_validly(engine: str, tasks: int) -> None:
    problem = compile_scenario(_scenario(tasks))
    result = solve(problem, engine=engine, time_limit=5.0, workers=1, seed=0)
    assert check(problem, result.placement) == []
    assert result.metrics.placed_jobs == 1  # greedy places it on n0..n2 when it needs n2
    assert result.objective == evaluate(problem, result.plan.as_mapping()).objective
    assert not [note for note in result.notes if "BUG" in note]
