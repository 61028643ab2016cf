"""The combinatorial bound on origin hits (:mod:`solver.bounds.group_hits`).

It adds nothing to the model: it must never fall below what a valid placement scores
(the valid side, checked against CP-SAT's optimum on small generated batches), and it
must cut what the LP of the model's rows allows (the bound side).
"""

from __future__ import annotations

from typing import Any

import pytest
from ortools.sat.python import cp_model

from benchmarks.generators import GenParams, generate
from models.compiled import Problem, compile_scenario
from models.objective import resolve_weights
from models.placement import Status
from models.scenario import Scenario
from solver.bounds.group_hits import (
    _best_assignment,
    combinatorial_bound,
    hit_bound_reduction,
    job_hit_bound,
)
from solver.cpsat import build_model
from solver.facade import solve
from tests.solver.model.test_gap_rows import _split_origins, lp_max_hits

NOW = 1764400000
THREE_LEVEL_CONFIG = {"resource-level-config": {"default": {
    "level1": {"label": "rack"}, "level2": {"label": "switch"}, "level3": {"label": "zone"}}}}


def _crowded_rack() -> Problem:
    """Two groups of 2 (one level2 group of 4) whose four cached nodes sit in rack r0.

    Racks r0 = {a0..a3} (a2, a3 busy) and r1 = {b0, b1}, r2 = {c0, c1}, all in switch s0.
    Ranks 0..3 ran on a0, a1, a2, a3: a0, a1 are free, and rack r0 holds one group of 2
    only, so at most 2 hits; every rank has a hit variable on a free node only for a0, a1.
    """
    def node(name: str, rack: str, free: int = 16) -> dict[str, Any]:
        return {"name": name, "npus": 16, "free": free,
                "labels": {"rack": rack, "switch": "s0", "zone": "z0"}}

    nodes = [node("a0", "r0"), node("a1", "r0"), node("a2", "r0", 0), node("a3", "r0", 0),
             node("b0", "r1"), node("b1", "r1"), node("c0", "r2"), node("c1", "r2")]
    return compile_scenario(Scenario.model_validate({
        "now": NOW, "config": THREE_LEVEL_CONFIG, "nodes": nodes,
        "affinity-cache": {"entries": [
            {"owner-uid": "u", "rank": r, "node": n, "updated": NOW}
            for r, n in enumerate(["a0", "b0", "a1", "c0"])]},
        "jobs": [{"name": "J", "owner-uid": "u", "policy": "multilevel", "tasks": 4,
                  "npu-per-task": 16, "affinity-config": "level1=2,level2=4"}],
    }))


def test_a_group_split_over_racks_gets_one_hit_where_the_lp_takes_two() -> None:
    problem = _split_origins()
    weights = resolve_weights(problem)
    built = build_model(problem, weights)
    assert lp_max_hits(built) == pytest.approx(2.0)  # the LP takes both cached nodes
    js = built.structure.jobs[problem.job_index["B"]]
    assert job_hit_bound(problem, built.structure, built.variables, js) == 1
    assert hit_bound_reduction(problem, built.structure, built.variables) == 1
    assert combinatorial_bound(built, weights) == built.best_possible - weights.origin_hit
    result = solve(problem, engine="cpsat", time_limit=20.0, workers=1, seed=0)
    assert result.status is Status.OPTIMAL and result.metrics.origin_hits == 1


def test_children_compete_for_a_rack_that_holds_one_of_them() -> None:
    # group 0 (ranks 0, 1: a0, b0) and group 1 (ranks 2, 3: a1, c0) under one level2
    # group; each alone scores 1 in r0, r1 or r2, and r0 holds one group: 2 in all
    problem = _crowded_rack()
    weights = resolve_weights(problem)
    built = build_model(problem, weights)
    js = built.structure.jobs[0]
    assert len(built.variables.hit) == 4
    assert lp_max_hits(built) == pytest.approx(4.0)  # the LP returns every rank
    assert job_hit_bound(problem, built.structure, built.variables, js) == 2
    result = solve(problem, engine="cpsat", time_limit=20.0, workers=1, seed=0)
    assert result.status is Status.OPTIMAL and result.metrics.origin_hits == 2


def test_best_assignment_respects_domain_capacity() -> None:
    # two items both best in domain 0 (capacity 1): one goes to domain 1
    assert _best_assignment([{0: 3, 1: 1}, {0: 3, 1: 2}], {0: 1, 1: 1}) == 5
    assert _best_assignment([{0: 3, 1: 1}, {0: 3, 1: 2}], {0: 2, 1: 1}) == 6
    assert _best_assignment([{0: 3}, {0: 3}], {0: 0}) == 0
    assert _best_assignment([{}, {}], {}) == 0


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("nodes", [64, 256])
def test_the_bound_covers_the_optimum_of_generated_batches(seed: int, nodes: int) -> None:
    problem = compile_scenario(generate(GenParams(family="multilevel", nodes=nodes, seed=seed,
                                                  jobs=4)))
    weights = resolve_weights(problem)
    built = build_model(problem, weights)
    bound = combinatorial_bound(built, weights)
    assert bound <= built.best_possible
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = 20.0
    code = solver.solve(built.model)
    assert code in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    # a solution of the model (the optimum when proved) never scores above the bound
    assert round(solver.objective_value) <= bound
    per_job = {j: sum(1 for (jj, _r) in built.variables.hit if jj == j)
               for j in built.structure.jobs}
    for j, js in built.structure.jobs.items():
        hits = sum(solver.value(var) for (jj, _r), var in built.variables.hit.items()
                   if jj == j)
        assert hits <= job_hit_bound(problem, built.structure, built.variables, js) \
            <= per_job[j]
