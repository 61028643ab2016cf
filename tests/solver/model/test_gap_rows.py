"""Redundant rows that tighten the bound of the counted model (the gaps of batches).

Each row must admit every valid placement (the feasible side, also covered by the
property test ``test_every_valid_placement_is_a_solution_of_the_model``) and must cut a
fractional point the model allowed before (the bound side, measured on the LP of the
model's linear rows).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ortools.linear_solver import pywraplp
from ortools.sat.python import cp_model

from models.check import check
from models.compiled import Problem, compile_scenario
from models.objective import evaluate, resolve_weights
from models.placement import Status
from models.plan import Plan, to_placement
from models.scenario import Scenario
from solver.cpsat import BuiltModel, add_hint, build_model
from solver.facade import solve
from solver.model.constraints import Constraints
from tests.solver.answers import objective_fixed_to_hint

NOW = 1764400000
TWO_LEVEL_CONFIG = {"resource-level-config": {"default": {
    "level1": {"label": "rack"}, "level2": {"label": "switch"}}}}


def _node(name: str, rack: str) -> dict[str, Any]:
    return {"name": name, "npus": 16, "free": 16, "labels": {"rack": rack, "switch": "s0"}}


def _split_origins() -> Problem:
    """A job of one group of 2 (level1 = 2) whose two cached nodes sit in two racks.

    Racks r0 = {a0, a1} and r1 = {b0, b1}; ranks 0 and 1 ran on a0 and b0.  The group
    sits in one rack, so at most one rank returns to its node.
    """
    return compile_scenario(Scenario.model_validate({
        "now": NOW,
        "config": TWO_LEVEL_CONFIG,
        "nodes": [_node("a0", "r0"), _node("a1", "r0"), _node("b0", "r1"), _node("b1", "r1")],
        "affinity-cache": {"entries": [
            {"owner-uid": "uid-b", "rank": 0, "node": "a0", "updated": NOW},
            {"owner-uid": "uid-b", "rank": 1, "node": "b0", "updated": NOW}]},
        "jobs": [{"name": "B", "owner-uid": "uid-b", "policy": "multilevel", "tasks": 2,
                  "npu-per-task": 16, "affinity-config": "level1=2"}],
    }))


def lp_max_hits(built: BuiltModel) -> float:
    """Most origin hits of the LP relaxation of the model's plain linear rows.

    Rows with an enforcement literal or a negated reference, and every non-linear
    constraint, are left out, which only loosens the relaxation.
    """
    proto = built.model.proto
    lp = pywraplp.Solver.CreateSolver("GLOP")
    assert lp is not None
    bounds = [list(v.domain) for v in proto.variables]
    xs = [lp.NumVar(float(b[0]), float(b[-1]), f"v{i}") for i, b in enumerate(bounds)]
    for ct in proto.constraints:
        if not ct.has_linear() or len(ct.enforcement_literal):
            continue
        if any(ref < 0 for ref in ct.linear.vars):
            continue
        domain = list(ct.linear.domain)
        lo, hi = domain[0], domain[-1]
        row = lp.RowConstraint(float(max(lo, -1e12)), float(min(hi, 1e12)))
        for ref, coef in zip(ct.linear.vars, ct.linear.coeffs, strict=True):
            row.SetCoefficient(xs[ref], float(coef))
    goal = lp.Objective()
    for var in built.variables.hit.values():
        goal.SetCoefficient(xs[var.index], 1.0)
    goal.SetMaximization()
    assert lp.Solve() == pywraplp.Solver.OPTIMAL
    return float(goal.Value())


def with_link_rows(built: BuiltModel) -> BuiltModel:
    """``built`` with :meth:`Constraints.explicit_take_links` added for every job (the
    engine's models leave them out: they change the search's path)."""
    rules = Constraints(built.model, built.problem, built.structure, built.variables,
                        np.zeros(built.problem.num_nodes, dtype=np.int64))
    for j, js in built.structure.jobs.items():
        rules.explicit_take_links(j, js)
    return built


def test_link_rows_admit_the_best_placement_and_it_is_exact() -> None:
    problem = _split_origins()
    j = problem.job_index["B"]
    names = list(problem.node_names)
    plan = Plan.empty(problem)
    plan.nodes[j] = np.array([names.index("a0"), names.index("a1")], dtype=np.int32)
    assert check(problem, to_placement(problem, plan, engine="t", status=Status.FEASIBLE)) == []
    weights = resolve_weights(problem)
    built = with_link_rows(build_model(problem, weights, plan))
    expected = add_hint(built, plan)
    assert objective_fixed_to_hint(built) == expected
    assert expected == evaluate(problem, plan.as_mapping(), weights).objective


@pytest.mark.parametrize(("rows", "hits"), [(True, 1.0), (False, 2.0)])
def test_link_rows_bound_the_hits_of_a_group_split_over_racks(
    rows: bool, hits: float
) -> None:
    # without the rows the LP puts half the group in each rack and takes both cached
    # nodes in full (two hits); with them a cached node is taken at most as much as
    # the group sits in its rack (one hit in all)
    problem = _split_origins()
    built = build_model(problem, resolve_weights(problem))
    if rows:
        with_link_rows(built)
    assert lp_max_hits(built) == pytest.approx(hits)


@pytest.mark.parametrize(("multilevel", "follows"), [(True, False), (False, True)])
def test_whole_batch_search_follows_the_hint_except_on_multilevel_batches(
    multilevel: bool, follows: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # multilevel batches take the warm start as the first solution only (CP-SAT's
    # use_optimization_hints off); other families keep branching towards it
    import solver.cpsat as engine

    seen: list[bool] = []

    class Spy(cp_model.CpSolver):
        def solve(self, model: cp_model.CpModel, *args: Any, **kwargs: Any) -> Any:
            seen.append(bool(self.parameters.use_optimization_hints))
            return super().solve(model, *args, **kwargs)

    monkeypatch.setattr(engine.cp_model, "CpSolver", Spy)
    if multilevel:
        problem = _split_origins()
    else:
        problem = compile_scenario(Scenario.model_validate({
            "now": NOW, "config": {"super-pod-size": 8, "reserve-nodes": 0},
            "nodes": [{"name": f"n{k}", "npus": 8, "free": 8, "super-pod-id": 0}
                      for k in range(4)],
            "jobs": [{"name": "A", "policy": "chip8-node8-sp", "tasks": 2, "npu-per-task": 8,
                      "sp-block": 16}],
        }))
    result = solve(problem, engine="cpsat", time_limit=20.0, workers=1, seed=0)
    assert result.status is Status.OPTIMAL
    assert seen and all(flag is follows for flag in seen)


def test_link_rows_are_left_out_of_the_engines_models() -> None:
    # they would change the search's path: neither the whole-batch model nor a
    # large-neighbourhood step's has them
    problem = _split_origins()
    weights = resolve_weights(problem)
    everything = np.ones(problem.num_nodes, dtype=bool)
    whole = len(build_model(problem, weights).model.proto.constraints)
    focused = len(build_model(problem, weights, keep=everything).model.proto.constraints)
    linked = len(with_link_rows(build_model(problem, weights)).model.proto.constraints)
    # cells a0, a1 in rack r0 and b0, b1 in rack r1: one row each
    assert linked - whole == 4
    assert focused == whole
