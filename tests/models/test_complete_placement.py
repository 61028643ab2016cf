"""``models.plan.complete_placement``: the same file as ``to_placement`` with the same
arguments, from the placement the validator read (the facade's answers)."""

from __future__ import annotations

import pytest

from heuristics.greedy import greedy_plan
from models.compiled import compile_scenario
from models.io import load_scenario
from models.objective import evaluate, resolve_weights
from models.placement import Status
from models.plan import complete_placement, to_placement
from solver.doors import example_path


@pytest.mark.parametrize("name", ["superpod-850", "multilevel", "rack-950", "ordinary-8npu",
                                  "rfc-inference-training"])
def test_complete_placement_is_to_placement(name: str) -> None:
    problem = compile_scenario(load_scenario(example_path(name)))
    plan = greedy_plan(problem)
    plan.nodes[0] = None  # an unplaced job too
    plan.reasons[0] = "left out by the test"
    metrics = evaluate(problem, plan.as_mapping(), resolve_weights(problem, None))
    fields = {"engine": "cpsat", "status": Status.FEASIBLE, "wall_seconds": 1.2345678,
              "objective": metrics.objective, "bound": metrics.objective + 3, "gap": 0.25,
              "seed": 7, "hits": metrics.per_job_hits, "candidates": metrics.per_job_candidates}
    checked = to_placement(problem, plan, engine="greedy", status=Status.GREEDY)
    before = checked.to_dict()
    completed = complete_placement(checked, **fields)  # type: ignore[arg-type]
    assert completed.to_dict() == to_placement(problem, plan, **fields).to_dict()  # type: ignore[arg-type]
    assert completed.model_fields_set == to_placement(problem, plan, **fields).model_fields_set  # type: ignore[arg-type]
    assert checked.to_dict() == before  # a copy: the validator's placement is unchanged
