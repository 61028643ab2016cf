"""Shared assertions on a solve() answer: the contract every engine's answer obeys."""

from __future__ import annotations

import numpy as np
from hypothesis import assume
from ortools.sat.python import cp_model

from models.check import check
from models.compiled import Problem
from models.objective import evaluate, resolve_weights
from models.placement import Status
from models.plan import Plan, to_placement
from solver.cpsat import BuiltModel, HintError, add_hint, build_model
from solver.facade import Result, solve


def assert_sound_answer(problem: Problem, result: Result) -> None:
    """Valid, never worse than greedy, objective = evaluate(), exact when optimal."""
    assert check(problem, result.placement) == []
    assert result.greedy_objective is not None
    assert result.objective >= result.greedy_objective
    assert result.objective == evaluate(problem, result.placement).objective
    assert not [n for n in result.notes if n.startswith("BUG")], result.notes
    if result.engine == "cpsat" and result.status is Status.OPTIMAL:
        assert result.solver_objective == result.objective
    if result.engine == "cpsat" and result.solver_objective is not None:
        # the post-pass never does worse than the counts it realises
        assert result.objective >= result.solver_objective
    if result.bound is not None:
        assert result.bound >= result.objective


def objective_fixed_to_hint(built: BuiltModel) -> int:
    """Solve ``built`` with every variable fixed to its hint; assert that this is a
    solution and return its objective."""
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.fix_variables_to_their_hinted_value = True
    status = solver.solve(built.model)
    assert status == cp_model.OPTIMAL, solver.status_name(status)
    return round(solver.objective_value)


def assert_plan_is_a_model_solution(problem: Problem, mapping: dict[int, list[int]]) -> None:
    """A valid placement (job index -> node per rank) given as the hint is a solution of
    the CP-SAT model with every variable fixed to it, with the objective ``evaluate``
    gives.  A layout the counted model does not represent (:class:`HintError`) is skipped
    with ``assume`` (reported by hypothesis, not hidden)."""
    nodes: list[np.ndarray | None] = [None] * len(problem.jobs)
    for j, ranks in mapping.items():
        nodes[j] = np.asarray(ranks, dtype=np.int32)
    plan = Plan(nodes, [None if n is not None else "not placed" for n in nodes])
    placement = to_placement(problem, plan, engine="random", status=Status.FEASIBLE)
    assert check(problem, placement) == []
    weights = resolve_weights(problem)
    built = build_model(problem, weights, plan)
    try:
        expected = add_hint(built, plan)
    except HintError:
        assume(False)
    assert objective_fixed_to_hint(built) == expected
    assert expected == evaluate(problem, mapping, weights).objective


def assert_running_ranks_kept(problem: Problem, plan: Plan) -> None:
    """No running rank moved: every placed partly running job keeps its running ranks on
    their nodes."""
    for view in problem.jobs:
        nodes = plan.nodes[view.index]
        if nodes is None or not view.partly_running:
            continue
        fixed = view.running >= 0
        assert np.array_equal(np.asarray(nodes)[fixed], view.running[fixed])


def assert_pod_level_answers(problem: Problem, time_limit: float,
                             deterministic_time: float | None = None) -> list[Result]:
    """Greedy's and CP-SAT's answers (1 worker, seed 0): valid, the objective (and
    CP-SAT's own) equal to ``evaluate``, running ranks never moved.  The answers, for
    further checks."""
    results = []
    for engine in ("greedy", "cpsat"):
        result = solve(problem, engine=engine, time_limit=time_limit, workers=1, seed=0,
                       deterministic_time=deterministic_time)
        assert check(problem, result.placement) == []
        metrics = evaluate(problem, result.placement)
        assert result.objective == metrics.objective
        if result.solver_objective is not None:
            assert result.solver_objective == metrics.objective
        assert_running_ranks_kept(problem, result.plan)
        results.append(result)
    return results
