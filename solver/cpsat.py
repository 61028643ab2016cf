"""The CP-SAT engine: build the counted model, warm-start it, solve within a hard budget.

The model (``solver/model/``) decides blocks, windows and level groups per domain and
counts interchangeable nodes per cell; only nodes that some rank prefers or avoids are
decided one by one.  A post-pass turns the counts into ranks → nodes exactly.

Wall-clock guarantee: model building checks the clock between phases, and the search
runs in a worker thread with CP-SAT's own limit; if it has not returned at the deadline
the search is stopped, and if it still does not return within a small margin the call
gives up on it and returns without a plan (the facade then answers with greedy).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from heuristics.origin_first import origin_first_plan
from models.check import check
from models.compiled import Problem
from models.objective import ResolvedWeights, block_spill, evaluate
from models.placement import Status
from models.plan import Plan, to_placement
from models.scenario import Family
from solver.explain import fill_reasons
from solver.model.constraints import Constraints
from solver.model.hints import HintError, plan_to_assignment
from solver.model.objective import ObjectiveBuilder, ObjectiveTerms
from solver.model.recover import recover_plan
from solver.model.structure import Structure, build_structure
from solver.model.variables import Lin, ModelVariables, create_variables

log = logging.getLogger("npu_place.cpsat")

#: Extra seconds allowed for CP-SAT to honour a stop request before the call gives up.
STOP_MARGIN_SECONDS = 0.5


@dataclass
class CpsatOutcome:
    """What a CP-SAT run produced."""

    plan: Plan | None
    status: Status
    objective: int | None  # CP-SAT's objective of the returned plan
    bound: int | None
    wall_seconds: float
    notes: list[str] = field(default_factory=list)
    hint_objective: int | None = None
    solver_status: str = ""
    num_variables: int = 0


@dataclass
class BuiltModel:
    """A built CP-SAT model with everything needed to hint, solve and recover."""

    problem: Problem
    model: cp_model.CpModel
    structure: Structure
    variables: ModelVariables
    terms: ObjectiveTerms
    objective: Lin
    pinned: dict[int, np.ndarray]
    build_seconds: float
    best_possible: int  # every term at its best value: a valid upper bound

def pinned_jobs(problem: Problem, hint: Plan) -> dict[int, np.ndarray]:
    """Soft jobs whose warm-start blocks spill across super pods or racks.

    The model keeps blocks and windows inside one super pod / rack; such a job keeps the
    greedy answer as a fixed part of the batch so the warm start stays representable.
    """
    out: dict[int, np.ndarray] = {}
    for job in problem.jobs:
        nodes = hint.nodes[job.index]
        if nodes is None or not job.soft or job.family not in (Family.SUPERPOD, Family.RACK):
            continue
        if block_spill(problem, job, [int(n) for n in nodes]) > 0:
            out[job.index] = np.asarray(nodes, dtype=np.int32)
    return out


def build_model(problem: Problem, weights: ResolvedWeights, hint: Plan | None = None) -> BuiltModel:
    """Build the counted CP-SAT model of every pending job of ``problem``."""
    started = time.perf_counter()
    hint = hint or Plan.empty(problem)
    pinned = pinned_jobs(problem, hint)
    extra = {j: [int(n) for n in nodes] for j, nodes in enumerate(hint.nodes)
             if nodes is not None and j not in pinned}
    structure = build_structure(problem, pinned, extra)
    model = cp_model.CpModel()
    mv = create_variables(model, problem, structure)
    pinned_use = np.zeros(problem.num_nodes, dtype=np.int64)
    for j, nodes in pinned.items():
        np.add.at(pinned_use, nodes.astype(np.int64), problem.jobs[j].npu_per_task)
    Constraints(model, problem, structure, mv, pinned_use).add_all()
    terms = ObjectiveBuilder(mv.reg, problem, structure, mv, weights, pinned).build()
    objective = terms.total(weights)
    model.maximize(objective.expr())
    # CP-SAT's own objective domain can be far looser than the sum of the terms' best
    # values after presolve substitutes variables; state that sum as a bound
    _, best_possible = mv.reg.range_of(objective)
    model.add(objective.expr() <= best_possible)
    return BuiltModel(problem, model, structure, mv, terms, objective, pinned,
                      time.perf_counter() - started, best_possible)


def add_hint(built: BuiltModel, plan: Plan) -> int:
    """Hint every variable with the values encoding ``plan``; return the hint's objective."""
    values = plan_to_assignment(built.problem, built.structure, built.variables, plan)
    built.model.clear_hints()
    for var in built.variables.reg.variables:
        built.model.add_hint(var, values[var.index])
    return built.objective.value(values)


def better_start(problem: Problem, hint: Plan, weights: ResolvedWeights) -> Plan:
    """The better of ``hint`` and its origin-first reconstruction (validated)."""
    if not any(job.family in (Family.SUPERPOD, Family.RACK) for job in problem.jobs):
        return hint
    candidate = origin_first_plan(problem, hint)
    placement = to_placement(problem, candidate, engine="origin-first", status=Status.GREEDY)
    if check(problem, placement):
        log.error("origin-first construction produced an invalid plan; ignored")
        return hint
    if evaluate(problem, candidate.as_mapping(), weights).objective > evaluate(
            problem, hint.as_mapping(), weights).objective:
        return candidate
    return hint


def _status(code: cp_model.CpSolverStatus) -> Status | None:
    if code == cp_model.OPTIMAL:
        return Status.OPTIMAL
    if code == cp_model.FEASIBLE:
        return Status.FEASIBLE
    return None


def solve_cpsat(
    problem: Problem,
    hint: Plan,
    weights: ResolvedWeights,
    *,
    time_limit: float,
    workers: int = 1,
    seed: int = 0,
    deterministic_time: float | None = None,
    fix_to_hint: bool = False,
) -> CpsatOutcome:
    """Run CP-SAT warm-started from ``hint`` within ``time_limit`` wall-clock seconds.

    Parameters
    ----------
    problem
        The compiled scenario.
    hint
        The warm start (greedy's plan); every variable is hinted from it.
    weights
        The resolved objective weights.
    time_limit
        Wall-clock budget for building and solving.
    workers, seed, deterministic_time
        CP-SAT search parameters.
    fix_to_hint
        Fix every variable to its hinted value (tests use it to show the hint is exact).

    Returns
    -------
    CpsatOutcome
        The plan (``None`` when the solver found nothing in time), status, objective and
        bound as CP-SAT reports them.
    """
    started = time.perf_counter()
    deadline = started + time_limit
    box: dict[str, object] = {}
    stop = threading.Event()
    holder: dict[str, cp_model.CpSolver] = {}

    def work() -> None:
        try:
            box["outcome"] = _run(problem, hint, weights, started, deadline, workers, seed,
                                  deterministic_time, fix_to_hint, stop, holder)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=work, name="cpsat", daemon=True)
    thread.start()
    thread.join(max(0.0, deadline - time.perf_counter()) + 0.05)
    if thread.is_alive():
        stop.set()
        solver = holder.get("solver")
        if solver is not None:  # searching: CP-SAT stops within milliseconds when asked
            solver.stop_search()
            thread.join(STOP_MARGIN_SECONDS)
        # still building: do not wait; the worker sees the stop flag and discards its work
    if thread.is_alive():
        return CpsatOutcome(None, Status.GREEDY, None, None, time.perf_counter() - started,
                            ["CP-SAT did not stop within its budget (model building or "
                             "search); its answer was abandoned"], None, "OVERRAN")
    error = box.get("error")
    if isinstance(error, BaseException):
        raise error
    outcome = box["outcome"]
    assert isinstance(outcome, CpsatOutcome)
    return outcome


def _run(problem: Problem, hint: Plan, weights: ResolvedWeights, started: float,
         deadline: float, workers: int, seed: int, deterministic_time: float | None,
         fix_to_hint: bool, stop: threading.Event,
         holder: dict[str, cp_model.CpSolver]) -> CpsatOutcome:
    """Build, hint and solve; runs in the worker thread of :func:`solve_cpsat`."""
    notes: list[str] = []
    built = build_model(problem, weights, hint)
    if stop.is_set():
        return CpsatOutcome(None, Status.GREEDY, None, None, time.perf_counter() - started,
                            ["no time left after building the CP-SAT model"], None, "NOT_RUN")
    start = better_start(problem, hint, weights)
    if start is not hint:
        notes.append("warm start: the origin-first construction beat greedy")
    hint_objective: int | None = None
    try:
        hint_objective = add_hint(built, start)
    except HintError as exc:
        log.warning("warm start not representable: %s", exc)
        notes.append(f"warm start not used: {exc}")
    remaining = deadline - time.perf_counter()
    if remaining <= 0.01 or stop.is_set():
        return CpsatOutcome(None, Status.GREEDY, None, None, time.perf_counter() - started,
                            [*notes, "no time left after building the CP-SAT model"],
                            hint_objective, "NOT_RUN", len(built.variables.reg.variables))
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.max_time_in_seconds = max(0.01, remaining)
    params.num_workers = max(1, workers)
    params.random_seed = seed
    # mod/div terms (fragment score) only reach the LP at level 2; without them the bound
    # of a batch stays at the trivial sum of positive coefficients
    params.linearization_level = 2
    # one presolve round: on 50k+ variable batches the default three rounds of probing
    # take most of a 10 s budget and find little more than the first
    params.max_presolve_iterations = 1
    # the counted model has no symmetry left to find; CP-SAT's symmetry detection can
    # spend minutes on large node-level batches and does not honour the time limit
    params.symmetry_level = 0
    if deterministic_time is not None:
        params.max_deterministic_time = deterministic_time
    if fix_to_hint:
        params.fix_variables_to_their_hinted_value = True
    holder["solver"] = solver
    code = solver.solve(built.model)
    status = _status(code)
    name = solver.status_name(code)
    if code == cp_model.MODEL_INVALID:
        log.error("CP-SAT reported MODEL_INVALID: %s", built.model.validate())
        notes.append("BUG: CP-SAT reported MODEL_INVALID")
    if status is None:
        if code == cp_model.INFEASIBLE:
            notes.append("BUG: the CP-SAT model is infeasible (placing nothing is always "
                         "feasible)")
        return CpsatOutcome(None, Status.GREEDY, None, None, time.perf_counter() - started,
                            notes, hint_objective, name, len(built.variables.reg.variables))
    values = {var.index: int(solver.value(var)) for var in built.variables.reg.variables}
    plan = fill_reasons(problem, recover_plan(problem, built.structure, built.variables, values,
                                              built.pinned))
    objective = round(solver.objective_value)
    bound = min(int(np.floor(solver.best_objective_bound + 1e-6)), built.best_possible)
    if status is Status.OPTIMAL:
        bound = objective
    return CpsatOutcome(plan, status, objective, bound, time.perf_counter() - started, notes,
                        hint_objective, name, len(built.variables.reg.variables))
