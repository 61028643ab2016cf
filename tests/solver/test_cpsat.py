"""CP-SAT engine: validity, exact objective, warm start, optimum beats greedy, budget.

CP-SAT runs with ``workers=1``, fixed seeds and small instances.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from ortools.sat.python import cp_model

from heuristics.greedy import greedy_plan
from models.check import check
from models.compiled import Problem, compile_scenario
from models.io import load_scenario
from models.objective import evaluate, resolve_weights
from models.placement import Status
from models.plan import Plan, to_placement
from models.scenario import Scenario
from solver.cpsat import add_hint, build_model
from solver.doors import example_path
from solver.engine import solve_cpsat
from solver.facade import solve
from solver.request import SolveRequest
from tests.solver.answers import objective_fixed_to_hint

NOW = 1764400000
EXAMPLES = ["ordinary-8npu", "superpod-850", "rack-950", "multilevel", "rfc-inference-training"]


def _problem(data: dict[str, Any]) -> Problem:
    data.setdefault("now", NOW)
    return compile_scenario(Scenario.model_validate(data))


def _example(name: str) -> Problem:
    return compile_scenario(load_scenario(example_path(name)))


def _cpsat(problem: Problem, limit: float = 20.0) -> Any:
    return solve(problem, engine="cpsat", time_limit=limit, workers=1, seed=0)


# ----------------------------------------------------------------------------- examples


@pytest.mark.parametrize("name", EXAMPLES)
def test_examples_are_valid_optimal_and_exact(name: str) -> None:
    problem = _example(name)
    greedy_plan(problem)
    result = _cpsat(problem)
    assert check(problem, result.placement) == []
    assert result.status is Status.OPTIMAL
    assert result.solver_status == "OPTIMAL"
    metrics = evaluate(problem, result.placement)
    # the objective CP-SAT reports equals evaluate() of the placement returned
    assert result.solver_objective == metrics.objective == result.objective
    assert result.bound == result.objective
    assert result.greedy_objective is not None
    assert result.objective >= result.greedy_objective
    assert not [n for n in result.notes if n.startswith("BUG")]


@pytest.mark.parametrize("name", EXAMPLES)
def test_warm_start_hint_is_complete_and_exact(name: str) -> None:
    problem = _example(name)
    greedy = greedy_plan(problem)
    weights = resolve_weights(problem)
    built = build_model(problem, weights, greedy)
    hint_objective = add_hint(built, greedy)
    # every variable, auxiliaries included, is hinted
    hinted = list(built.model.proto.solution_hint.vars)
    assert len(hinted) == len(built.variables.reg.variables)
    assert sorted(hinted) == sorted(v.index for v in built.variables.reg.variables)
    assert hint_objective == evaluate(problem, greedy.as_mapping(), weights).objective
    assert objective_fixed_to_hint(built) == hint_objective


class _FirstSolution(cp_model.CpSolverSolutionCallback):
    def __init__(self) -> None:
        super().__init__()
        self.objectives: list[float] = []

    def on_solution_callback(self) -> None:
        self.objectives.append(self.objective_value)


@pytest.mark.parametrize("name", ["superpod-850", "ordinary-8npu"])
def test_hint_is_accepted_as_the_first_solution(name: str) -> None:
    problem = _example(name)
    greedy = greedy_plan(problem)
    weights = resolve_weights(problem)
    built = build_model(problem, weights, greedy)
    hint_objective = add_hint(built, greedy)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.cp_model_presolve = False  # the hint then maps 1:1 to the search
    callback = _FirstSolution()
    solver.solve(built.model, callback)
    assert callback.objectives, "no solution reported"
    assert round(callback.objectives[0]) == hint_objective


def test_an_unrepresentable_hint_is_reported_not_hidden() -> None:
    problem = _example("ordinary-8npu")
    weights = resolve_weights(problem)
    # a plan putting ranks on a node with no free chip cannot be hinted
    bad = Plan.empty(problem)
    job = problem.jobs[0]
    busy = next(n for n in range(problem.num_nodes) if problem.free[n] == 0)
    bad.nodes[0] = np.full(job.tasks, busy, dtype=np.int32)
    outcome = solve_cpsat(SolveRequest(problem, bad, weights, time_limit=5, workers=1, seed=0))
    assert any("warm start not used" in n for n in outcome.notes)
    assert outcome.plan is not None
    assert check(problem, to_placement(problem, outcome.plan, engine="cpsat",
                                       status=outcome.status)) == []


# ----------------------------------------------------------------------- beats greedy


TWO_LEVEL_CONFIG = {"resource-level-config": {"default": {
    "level1": {"label": "rack"}, "level2": {"label": "switch"}}}}


def _ml_node(name: str, rack: str) -> dict[str, Any]:
    """A 16-NPU node in ``rack`` under switch s0 of the default tree."""
    return {"name": name, "npus": 16, "free": 16, "labels": {"rack": rack, "switch": "s0"}}


def _sp_nodes(prefix: str, sp: int, count: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"name": f"{prefix}{k}", "npus": 8, "free": 8, "super-pod-id": sp, **extra}
            for k in range(count)]


def test_superpod_greedy_spends_the_origin_super_pod_on_the_wrong_job() -> None:
    # SP0 fits one block exactly and holds job B's origins; job A (higher priority, no
    # cache) takes it by best fit, so B lands in SP1 with no hit.  Joint optimum: A in
    # SP1, B back on its two nodes.
    problem = _problem({
        "config": {"super-pod-size": 8, "reserve-nodes": 0},
        "nodes": _sp_nodes("a", 0, 2) + _sp_nodes("b", 1, 4),
        "affinity-cache": {"entries": [
            {"owner-uid": "uid-b", "rank": 0, "node": "a0", "updated": NOW},
            {"owner-uid": "uid-b", "rank": 1, "node": "a1", "updated": NOW}]},
        "jobs": [
            {"name": "A", "owner-uid": "uid-a", "policy": "chip8-node8-sp", "tasks": 2,
             "npu-per-task": 8, "sp-block": 16, "priority": 1},
            {"name": "B", "owner-uid": "uid-b", "policy": "chip8-node8-sp", "tasks": 2,
             "npu-per-task": 8, "sp-block": 16},
        ],
    })
    greedy = evaluate(problem, greedy_plan(problem).as_mapping())
    assert greedy.placed_jobs == 2 and greedy.origin_hits == 0
    result = _cpsat(problem)
    assert result.status is Status.OPTIMAL
    assert result.metrics.origin_hits == 2
    assert result.placement.job("B").ranks == {"0": "a0", "1": "a1"}  # type: ignore[union-attr]
    assert result.objective > greedy.objective
    assert result.solver_objective == result.objective


def test_batch_greedy_blocks_a_second_job_that_a_joint_placement_fits() -> None:
    # A (ordinary, first in the queue) takes the first node of SP0 by natural order; B
    # (two whole nodes in one super pod) then has no room.  Jointly, A goes to the node
    # outside the super pod.
    problem = _problem({
        "config": {"super-pod-size": 8, "reserve-nodes": 0},
        "nodes": [*_sp_nodes("n", 0, 2), {"name": "n2", "npus": 8, "free": 8}],
        "jobs": [
            {"name": "A", "policy": "chip8-node8", "tasks": 1, "npu-per-task": 4,
             "priority": 1},
            {"name": "B", "policy": "chip8-node8-sp", "tasks": 2, "npu-per-task": 8,
             "sp-block": 16},
        ],
    })
    greedy = evaluate(problem, greedy_plan(problem).as_mapping())
    assert greedy.placed_jobs == 1
    result = _cpsat(problem)
    assert result.status is Status.OPTIMAL
    assert result.metrics.placed_jobs == 2
    assert result.placement.job("A").ranks == {"0": "n2"}  # type: ignore[union-attr]
    assert check(problem, result.placement) == []


def test_rack_window_whose_origin_rack_is_partly_taken() -> None:
    # Rack 0 has three free nodes: a0 (window 0's origin; a1 is taken) and b0, b1
    # (window 1's origins).  Filling window 0 first spends b0 on it, so window 1 cannot
    # come back.  Optimum: window 1 returns to b0, b1 (2 hits), window 0 goes elsewhere.
    nodes = []
    names = ["a0", "a1", "b0", "b1", "x0", "x1", "x2", "x3"]
    for k, name in enumerate(names):
        nodes.append({"name": name, "npus": 8, "free": 0 if name == "a1" else 8,
                      "super-pod-id": 0, "rack-id": 0 if k < 4 else 1})
    # rack 1 has four more free nodes (x0..x3)
    problem = _problem({
        "config": {"super-pod-size": 16},
        "nodes": nodes,
        "affinity-cache": {"entries": [
            {"owner-uid": "u", "rank": r, "node": n, "updated": NOW}
            for r, n in enumerate(["a0", "a1", "b0", "b1"])]},
        "jobs": [{"name": "J", "owner-uid": "u", "policy": "chip8-node8-ra64-sp",
                  "tasks": 4, "npu-per-task": 8, "sp-block": 32, "ra-block": 16}],
    })
    greedy = evaluate(problem, greedy_plan(problem).as_mapping())
    result = _cpsat(problem)
    assert result.status is Status.OPTIMAL
    assert result.metrics.origin_hits == 2
    ranks = result.placement.job("J").ranks  # type: ignore[union-attr]
    assert (ranks["2"], ranks["3"]) == ("b0", "b1")
    # greedy fills window 0 first (a0 plus b0, a node window 1 prefers, taken last but
    # still taken) and window 1 must leave the rack
    assert greedy.origin_hits == 1
    assert result.objective > greedy.objective


def test_multilevel_greedy_best_fit_takes_another_jobs_origin_rack() -> None:
    # Rack r0 (2 free) holds job B's origins; job A (higher priority, no cache) takes it
    # because it is the tightest fit.  Optimum: A in r1, B back in r0.
    problem = _problem({
        "config": TWO_LEVEL_CONFIG,
        "nodes": [_ml_node("x0", "r0"), _ml_node("x1", "r0"), _ml_node("y0", "r1"),
                  _ml_node("y1", "r1"),
                  _ml_node("y2", "r1")],
        "affinity-cache": {"entries": [
            {"owner-uid": "uid-b", "rank": 0, "node": "x0", "updated": NOW},
            {"owner-uid": "uid-b", "rank": 1, "node": "x1", "updated": NOW}]},
        "jobs": [
            {"name": "A", "owner-uid": "uid-a", "policy": "multilevel", "tasks": 2,
             "npu-per-task": 16, "affinity-config": "level1=2", "priority": 1},
            {"name": "B", "owner-uid": "uid-b", "policy": "multilevel", "tasks": 2,
             "npu-per-task": 16, "affinity-config": "level1=2"},
        ],
    })
    greedy = evaluate(problem, greedy_plan(problem).as_mapping())
    result = _cpsat(problem)
    assert result.status is Status.OPTIMAL
    assert result.metrics.origin_hits == 2
    assert result.placement.job("B").ranks == {"0": "x0", "1": "x1"}  # type: ignore[union-attr]
    assert greedy.origin_hits == 0
    assert result.objective > greedy.objective


def test_fault_rank_avoids_its_old_node_in_the_solver() -> None:
    problem = _problem({
        "config": {"super-pod-size": 8, "reserve-nodes": 0},
        "nodes": _sp_nodes("a", 0, 3),
        "affinity-cache": {"entries": [
            {"owner-uid": "u", "rank": r, "node": f"a{r}", "updated": NOW} for r in range(2)]},
        "jobs": [{"name": "J", "owner-uid": "u", "policy": "chip8-node8-sp", "tasks": 2,
                  "npu-per-task": 8, "sp-block": 16, "fault-ranks": [1]}],
    })
    result = _cpsat(problem)
    ranks = result.placement.job("J").ranks  # type: ignore[union-attr]
    assert ranks["0"] == "a0" and ranks["1"] == "a2"
    assert result.metrics.fault_returns == 0


def test_forced_fault_return_is_counted_exactly() -> None:
    # one node per block and only the fault rank's old node left: a forced return
    problem = _problem({
        "config": {"super-pod-size": 8, "reserve-nodes": 0},
        "nodes": _sp_nodes("a", 0, 1),
        "affinity-cache": {"entries": [{"owner-uid": "u", "rank": 0, "node": "a0",
                                        "updated": NOW}]},
        "jobs": [{"name": "J", "owner-uid": "u", "policy": "chip8-node8-sp", "tasks": 1,
                  "npu-per-task": 8, "sp-block": 8, "fault-ranks": [0]}],
    })
    result = _cpsat(problem)
    assert result.metrics.placed_jobs == 1
    assert result.metrics.fault_returns == 1
    assert result.solver_objective == result.objective


# ----------------------------------------------------------------------- budget & seeds


def test_same_inputs_same_answer_with_one_worker() -> None:
    problem = _example("rack-950")
    first = solve(problem, engine="cpsat", time_limit=20, workers=1, seed=3,
                  deterministic_time=5.0)
    second = solve(problem, engine="cpsat", time_limit=20, workers=1, seed=3,
                   deterministic_time=5.0)
    assert first.placement.jobs == second.placement.jobs
    assert first.objective == second.objective


def test_a_short_wall_clock_budget_gives_a_valid_answer() -> None:
    # the deadline itself is tested with a measured margin in test_deadline.py
    problem = _example("superpod-850")
    result = solve(problem, engine="auto", time_limit=2.0, workers=1, seed=0)
    assert check(problem, result.placement) == []


def test_overrunning_solver_falls_back_to_greedy(
        stall_cpsat: Callable[[], threading.Event], caplog: pytest.LogCaptureFixture) -> None:
    # Simulate a search that ignores its limit: the call still returns on time.
    problem = _example("superpod-850")
    release = stall_cpsat()
    started = time.perf_counter()
    with caplog.at_level(logging.DEBUG, logger="npu_place.cpsat"):
        result = solve(problem, engine="cpsat", time_limit=1.0, workers=1, seed=0)
    elapsed = time.perf_counter() - started
    release.set()
    # one line at warning level for the operator; the stack only at debug level
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING
                and "did not stop" in r.getMessage()]
    assert len(warnings) == 1 and "\n" not in warnings[0].getMessage()
    assert "abandoned in stuck (" in warnings[0].getMessage()
    assert any(r.levelno == logging.DEBUG and "File " in r.getMessage() for r in caplog.records)
    assert result.status is Status.GREEDY
    assert result.engine == "greedy"
    assert any("did not stop" in n for n in result.notes)
    assert elapsed < 1.0 + 5.0


# ----------------------------------------------------------------------- explanations


def test_unplaced_job_reason_names_the_binding_constraint() -> None:
    problem = _problem({
        "config": {"super-pod-size": 8, "reserve-nodes": 0},
        "nodes": _sp_nodes("a", 0, 3) + _sp_nodes("b", 1, 3),
        "jobs": [{"name": "J", "policy": "chip8-node8-sp", "tasks": 4, "npu-per-task": 8,
                  "sp-block": 32}],
    })
    result = _cpsat(problem)
    job = result.placement.job("J")
    assert job is not None and not job.placed
    assert job.reason is not None and "spBlock 4" in job.reason
    assert "largest: 3 free nodes" in job.reason


def test_unplaced_job_reason_names_the_jobs_that_took_the_capacity() -> None:
    problem = _problem({
        "config": {"super-pod-size": 8, "reserve-nodes": 0},
        "nodes": _sp_nodes("a", 0, 2),
        "jobs": [
            {"name": "high", "policy": "chip8-node8-sp", "tasks": 2, "npu-per-task": 8,
             "sp-block": 16, "priority": 5},
            {"name": "low", "policy": "chip8-node8-sp", "tasks": 2, "npu-per-task": 8,
             "sp-block": 16},
        ],
    })
    result = _cpsat(problem)
    low = result.placement.job("low")
    assert low is not None and not low.placed
    assert low.reason is not None and "higher-priority jobs high" in low.reason


def test_ub_memory_job_stays_in_one_ub_domain() -> None:
    # racks 0..31 of 2 nodes: UB domains 0 (racks 0-15) and 1 (racks 16-31).  The job's
    # two blocks ran in different UB domains; only one domain may host it now.
    nodes = [{"name": f"r{r}n{k}", "npus": 8, "free": 8, "super-pod-id": 0, "rack-id": r}
             for r in range(32) for k in range(2)]
    origins = ["r0n0", "r0n1", "r1n0", "r1n1", "r16n0", "r16n1", "r17n0", "r17n1"]
    problem = _problem({
        "config": {"super-pod-size": 64},
        "nodes": nodes,
        "affinity-cache": {"entries": [
            {"owner-uid": "u", "rank": r, "node": n, "updated": NOW}
            for r, n in enumerate(origins)]},
        "jobs": [{"name": "J", "owner-uid": "u", "policy": "chip8-node8-ra64-sp", "tasks": 8,
                  "npu-per-task": 8, "sp-block": 32, "ra-block": 16, "ub-memory": True}],
    })
    result = _cpsat(problem)
    assert check(problem, result.placement) == []
    assert result.status is Status.OPTIMAL
    assert result.metrics.origin_hits == 4
    assert not [n for n in result.notes if n.startswith("BUG")]
    assert result.solver_objective == result.objective


def test_group_with_origins_in_two_domains_is_explicit_in_one() -> None:
    # level1 group 0 (ranks 0, 1) ran split over racks ra and rb (stale layout); both
    # racks sit under one switch.  The group must land in one rack.
    problem = _problem({
        "config": TWO_LEVEL_CONFIG,
        "nodes": [_ml_node(f"a{k}", "ra") for k in range(3)] + [_ml_node(f"b{k}", "rb")
                                                           for k in range(3)],
        "affinity-cache": {"entries": [
            {"owner-uid": "u", "rank": 0, "node": "a0", "updated": NOW},
            {"owner-uid": "u", "rank": 1, "node": "b0", "updated": NOW}]},
        "jobs": [{"name": "J", "owner-uid": "u", "policy": "multilevel", "tasks": 4,
                  "npu-per-task": 16, "affinity-config": "level1=2,level2=4"}],
    })
    result = _cpsat(problem)
    assert check(problem, result.placement) == []
    assert result.status is Status.OPTIMAL
    assert result.metrics.origin_hits == 1  # the two origins are in different racks
    assert result.solver_objective == result.objective


def test_three_level_job_counts_children_of_counted_groups() -> None:
    # Only rank 0 has an origin, so the top group and its first level2 group are explicit;
    # the second level2 group is counted, and its level1 groups must be placed too.
    nodes = []
    for w in range(2):
        for r in range(2):
            for k in range(2):
                nodes.append({"name": f"w{w}r{r}n{k}", "npus": 16, "free": 16,
                              "labels": {"rack": f"w{w}r{r}", "switch": f"w{w}",
                                         "spine": "s0"}})
    problem = _problem({
        "config": {"resource-level-config": {"default": {
            "level1": {"label": "rack"}, "level2": {"label": "switch"},
            "level3": {"label": "spine"}}}},
        "nodes": nodes,
        "affinity-cache": {"entries": [
            {"owner-uid": "u", "rank": 0, "node": "w0r0n0", "updated": NOW}]},
        "jobs": [{"name": "J", "owner-uid": "u", "policy": "multilevel", "tasks": 8,
                  "npu-per-task": 16, "affinity-config": "level1=2,level2=4,level3=8"}],
    })
    result = _cpsat(problem)
    assert check(problem, result.placement) == []
    assert result.engine == "cpsat" and result.status is Status.OPTIMAL
    assert result.metrics.placed_jobs == 1 and result.metrics.origin_hits == 1
    assert result.solver_objective == result.objective


# ----------------------------------------------------------------------------- aggregate rows


def _crowded(ordinary: bool) -> Problem:
    """Four free 8-chip nodes; three jobs of 2 ranks (whole nodes, or 8-chip ordinary
    ranks): two of them fill the cluster exactly, all three do not fit."""
    policy, extra = (("chip8-node8", {}) if ordinary
                     else ("chip8-node8-sp", {"sp-block": 8}))
    return _problem({
        "config": {"super-pod-size": 8, "reserve-nodes": 0},
        "nodes": _sp_nodes("n", 0, 4),
        "jobs": [{"name": name, "policy": policy, "tasks": tasks, "npu-per-task": 8,
                  **({"sp-block": 8 * tasks} if not ordinary else extra)}
                 for name, tasks in (("A", 2), ("B", 2), ("C", 2))],
    })


@pytest.mark.parametrize("ordinary", [False, True])
def test_aggregate_rows_accept_a_batch_that_fills_the_cluster(ordinary: bool) -> None:
    # feasible side: A and B on all four nodes is a solution of the model
    problem = _crowded(ordinary)
    names = problem.node_names
    plan = Plan.empty(problem)
    plan.nodes[problem.job_index["A"]] = np.array([0, 1], dtype=np.int32)
    plan.nodes[problem.job_index["B"]] = np.array([2, 3], dtype=np.int32)
    plan.reasons[problem.job_index["C"]] = "no room"
    assert check(problem, to_placement(problem, plan, engine="t", status=Status.FEASIBLE)) == []
    assert {names[0], names[1], names[2], names[3]} == set(names)
    built = build_model(problem, resolve_weights(problem), plan)
    expected = add_hint(built, plan)
    assert objective_fixed_to_hint(built) == expected


@pytest.mark.parametrize("ordinary", [False, True])
def test_aggregate_rows_state_the_cluster_capacity(ordinary: bool) -> None:
    # the row over the jobs' placed literals: 6 whole nodes (or 48 chips) asked, 4 (32) free
    problem = _crowded(ordinary)
    built = build_model(problem, resolve_weights(problem))
    placed = {var.index: problem.jobs[j].tasks for j, var in built.variables.placed.items()}
    rows = []
    for ct in built.model.proto.constraints:
        if not ct.has_linear():
            continue
        if set(ct.linear.vars) == set(placed) and len(ct.linear.vars) == len(placed):
            rows.append((dict(zip(ct.linear.vars, ct.linear.coeffs, strict=True)),
                         list(ct.linear.domain)[-1]))
    # chips (6 ranks x 8 of 32), and whole nodes or 8-chip slots (6 of 4)
    assert ({v: t * 8 for v, t in placed.items()}, 32) in rows
    assert (placed, 4) in rows


@pytest.mark.parametrize(("nodes", "added"), [(8, 0), (4, 3)])
def test_aggregate_rows_are_added_only_when_they_can_bind(
    nodes: int, added: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from solver.model.constraints import Constraints

    problem = _problem({
        "config": {"super-pod-size": 8, "reserve-nodes": 0},
        "nodes": _sp_nodes("n", 0, nodes),
        "jobs": [{"name": name, "policy": "chip8-node8-sp", "tasks": 2, "npu-per-task": 8,
                  "sp-block": 16} for name in ("A", "B", "C")],
    })
    weights = resolve_weights(problem)
    with_rows = len(build_model(problem, weights).model.proto.constraints)
    monkeypatch.setattr(Constraints, "aggregate_capacity", lambda self: None)
    without = len(build_model(problem, weights).model.proto.constraints)
    # 4 nodes: the chip, whole-node and block rows; 8 nodes: none
    assert with_rows - without == added
