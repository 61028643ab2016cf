"""A stored cluster with vNPU nodes: a value delta keeps them closed to other jobs, as a
fresh compile does."""

from __future__ import annotations

from heuristics.lifecycle import CacheLifecycle
from models.compiled import compile_scenario
from models.io import load_scenario
from solver.doors import example_path
from solver.service.state import ClusterDelta, apply_delta


def test_value_delta_on_a_vnpu_node_keeps_it_full_for_other_jobs() -> None:
    scenario = load_scenario(example_path("vnpu-inference"))
    problem = compile_scenario(scenario)
    delta = ClusterDelta.model_validate({"node-updates": [
        {"name": "vnpu-310p-1", "free": 3, "health": "subhealthy"},
        {"name": "train-1", "free": 5}]})
    applied = apply_delta(problem, CacheLifecycle.from_model(scenario.affinity_cache), delta)
    assert applied.tier == "values"
    fresh = compile_scenario(applied.problem.scenario)
    assert applied.problem.free.tolist() == fresh.free.tolist()
    at = problem.node_index["vnpu-310p-1"]
    assert applied.problem.free[at] == 0 and applied.problem.free[problem.node_index[
        "train-1"]] == 5
