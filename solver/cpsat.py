"""Running CP-SAT: build the counted model, warm-start it, set the search parameters, solve.

The model (``solver/model/``) decides blocks, windows and level groups per domain and
counts interchangeable nodes per cell; only nodes that some rank prefers or avoids are
decided one by one.  A post-pass turns the counts into ranks → nodes exactly.

This module runs one model: the whole batch (:func:`run_whole_batch`) or one
large-neighbourhood step (:func:`solve_step`).  A model whose build would be identical
to one built before is taken from the solve's model cache (:func:`cached_build`,
:mod:`solver.model.reuse`).  Which model runs when, and under what budget, is the phase
plan's (:mod:`solver.phases`); :func:`solver.engine.solve_cpsat` runs the plan in a
worker thread held to the deadline.  Both runs take the solve's
:class:`~solver.request.SolveRequest`; building and hinting take only what they read.
"""

from __future__ import annotations

import logging
import time

import numpy as np
from ortools.sat.python import cp_model

from models.compiled import Problem
from models.objective import ResolvedWeights, block_spill
from models.placement import Status
from models.plan import Plan
from solver.bounds.group_hits import combinatorial_bound
from solver.explain import fill_reasons
from solver.families import solver_family
from solver.lns import StepNotStarted
from solver.model.built import BuiltModel
from solver.model.cancel import checked, checkpoint, retain
from solver.model.cancellable import CancellableModel
from solver.model.constraints import Constraints
from solver.model.hints import HintError, plan_to_assignment
from solver.model.objective import ObjectiveBuilder
from solver.model.podscope import pod_scope
from solver.model.recover import recover_plan
from solver.model.reuse import ModelCache, plan_digest
from solver.model.structure import build_structure
from solver.model.variables import create_variables
from solver.request import CpsatOutcome, SolveRequest

log = logging.getLogger("npu_place.cpsat")


def pinned_jobs(problem: Problem, hint: Plan) -> dict[int, np.ndarray]:
    """Soft jobs whose warm-start blocks spill across super pods or racks.

    The model keeps blocks and windows inside one super pod / rack; such a job keeps the
    greedy answer as a fixed part of the batch so the warm start stays representable.
    """
    out: dict[int, np.ndarray] = {}
    for job in problem.jobs:
        checkpoint()
        nodes = hint.nodes[job.index]
        if nodes is None or not job.soft or not job.rules.in_super_pod:
            continue
        if block_spill(problem, job, [int(n) for n in nodes]) > 0:
            out[job.index] = np.asarray(nodes, dtype=np.int32)
    return out


def build_model(problem: Problem, weights: ResolvedWeights, hint: Plan | None = None,
                keep: np.ndarray | None = None, fixed: dict[int, np.ndarray] | None = None,
                skip: frozenset[int] = frozenset()) -> BuiltModel:
    """Build the counted CP-SAT model of every pending job of ``problem``.

    Parameters
    ----------
    problem, weights
        The compiled scenario and the resolved objective weights.
    hint
        The warm start: soft jobs whose blocks spill are pinned to it, and its nodes stay
        candidates of node-level jobs.
    keep
        A node mask (focused model, large-neighbourhood step): free nodes outside it are
        left out.
    fixed
        Jobs kept on the given nodes (large-neighbourhood step: every job outside the
        neighbourhood).
    skip
        Jobs left out (unplaced jobs outside the neighbourhood).
    """
    started = time.perf_counter()
    hint = hint or Plan.empty(problem)
    pinned = pinned_jobs(problem, hint)
    pinned.update(fixed or {})
    # Partly running super-pod / 950 / multilevel jobs are modelled around
    # their running ranks (solver.model.podlevel); those whose running ranks break their
    # own group tree keep the warm start's pod-level answer as a fixed part of the batch,
    # or stay unplaced without one.  Ordinary ones are modelled through
    # :func:`solver.engine.ordinary_pending_view` by :func:`solver.engine.solve_cpsat`
    # (here, when called directly, pinned).
    for job in problem.jobs:
        if (job.partly_running and job.index not in pinned and job.index not in skip
                and pod_scope(problem, job) is None):
            nodes = hint.nodes[job.index]
            if nodes is None:
                skip = skip | {job.index}
            else:
                pinned[job.index] = np.asarray(nodes, dtype=np.int32)
    extra = {j: [int(n) for n in nodes] for j, nodes in enumerate(hint.nodes)
             if nodes is not None and j not in pinned}
    structure = build_structure(problem, pinned, extra, keep, skip)
    model = CancellableModel()
    mv = create_variables(model, problem, structure)
    pinned_use = np.zeros(problem.num_nodes, dtype=np.int64)
    for j, nodes in checked(pinned.items(), 16):
        np.add.at(pinned_use, problem.jobs[j].placed_nodes(nodes), problem.jobs[j].npu_per_task)
    focused = keep is not None or bool(fixed) or bool(skip)
    Constraints(model, problem, structure, mv, pinned_use).add_all()
    terms = ObjectiveBuilder(mv.reg, problem, structure, mv, weights, pinned).build()
    objective = terms.total(weights)
    model.maximize(objective.expr())
    # CP-SAT's own objective domain can be far looser than the sum of the terms' best
    # values after presolve substitutes variables; state that sum as a bound
    _, best_possible = mv.reg.range_of(objective)
    model.add(objective.expr() <= best_possible)
    return BuiltModel(problem, model, structure, mv, terms, objective, pinned,
                      time.perf_counter() - started, best_possible,
                      focused=focused)


def cached_build(models: ModelCache | None, problem: Problem, weights: ResolvedWeights,
                 hint: Plan | None = None, keep: np.ndarray | None = None,
                 fixed: dict[int, np.ndarray] | None = None,
                 skip: frozenset[int] = frozenset()) -> BuiltModel:
    """:func:`build_model`, or the identical model ``models`` kept from an earlier build
    (:mod:`solver.model.reuse`); its ``build_seconds`` is then the lookup's."""
    if models is None:
        return build_model(problem, weights, hint, keep, fixed, skip)
    started = time.perf_counter()
    key = models.digest(problem, hint, keep, fixed, skip)
    found = None if key is None else models.get(key, problem, weights)
    if found is not None:
        found.build_seconds = time.perf_counter() - started
        return found
    built = build_model(problem, weights, hint, keep, fixed, skip)
    if key is not None:
        models.put(key, built, weights)
    built.build_seconds = time.perf_counter() - started
    return built


def add_hint(built: BuiltModel, plan: Plan) -> int:
    """Hint every variable with the values encoding ``plan``; return the hint's objective.

    A kept model (:mod:`solver.model.reuse`) that already holds the hints of the same
    plan keeps them (the same values would be set again)."""
    model = built.model
    own = model if isinstance(model, CancellableModel) else None
    key = None if own is None else plan_digest(plan)
    if own is not None and own.hinted is not None and own.hinted[0] == key:
        return own.hinted[1]
    if own is not None:
        own.hinted = None  # until every hint is set
    values = plan_to_assignment(built.problem, built.structure, built.variables, plan)
    model.clear_hints()
    for var in checked(built.variables.reg.variables, 512):
        model.add_hint(var, values[var.index])
    value = built.objective.value(values)
    if own is not None and key is not None:
        own.hinted = (key, value)
    return value


def _status(code: cp_model.CpSolverStatus) -> Status | None:
    if code == cp_model.OPTIMAL:
        return Status.OPTIMAL
    if code == cp_model.FEASIBLE:
        return Status.FEASIBLE
    return None


#: CP-SAT's loading and presolve answer a stop request (or their own time limit) only
#: between steps that grow with the model: its limit is set this much per variable
#: before the real end, and a search is not started with less than twice that left.
SEARCH_SECONDS_PER_VARIABLE = 2e-5


def min_search_seconds(num_variables: int) -> float:
    """Least time worth starting a search of a model of this size with (seconds)."""
    return 0.01 + SEARCH_SECONDS_PER_VARIABLE * num_variables




def search_parameters(solver: cp_model.CpSolver, *, max_time: float, workers: int, seed: int,
                      deterministic_time: float | None) -> None:
    """Set the CP-SAT parameters of a run (see docs/cpsat.md, *Parameters*)."""
    params = solver.parameters
    params.max_time_in_seconds = max(0.001, max_time)
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
    # the process's own SIGINT handling stays Python's: CP-SAT's handler, installed and
    # removed around each solve from whichever thread solves, aborts a process that gets
    # Ctrl-C while a search runs in a worker thread ("terminate called after throwing an
    # instance of 'std::bad_function_call'", once per Dask worker of an interrupted sweep);
    # every search here is stopped by its budget or stop_search, never by a signal
    params.catch_sigint_signal = False
    if deterministic_time is not None:
        params.max_deterministic_time = deterministic_time

def run_whole_batch(request: SolveRequest, start: Plan, notes: list[str]) -> CpsatOutcome:
    """One model of the whole batch of ``request``, hinted with ``start``, searched until
    ``request.search_end`` (and within ``request.deterministic_time`` when given).

    ``notes`` are the run's notes so far; the outcome carries them with its own.
    """
    problem = request.problem
    built = cached_build(request.models, problem, request.weights, request.anchor)
    retain(built)
    hint_objective: int | None = None
    try:
        hint_objective = add_hint(built, start)
    except HintError as exc:
        log.debug("warm start not representable: %s", exc)  # a note; not for stderr
        notes.append(f"warm start not used: {exc}")
    checkpoint()
    solver = cp_model.CpSolver()
    latency = min_search_seconds(len(built.variables.reg.variables))
    deterministic_time = request.deterministic_time
    search_parameters(solver, max_time=request.search_end - time.perf_counter() - latency,
                      workers=request.workers, seed=request.seed,
                      deterministic_time=deterministic_time)
    if request.fix_to_hint:
        solver.parameters.fix_variables_to_their_hinted_value = True
    elif any(solver_family(job.family).free_search for job in problem.jobs):
        solver.parameters.use_optimization_hints = False
    num_vars = len(built.variables.reg.variables)
    if not request.begin_search(solver, latency):
        return CpsatOutcome(None, Status.GREEDY, None, None,
                            time.perf_counter() - request.started,
                            [*notes, "no time left to search after building the CP-SAT "
                             "model"], hint_objective, "NOT_RUN", num_vars,
                            ["whole batch: no time left to search after building"],
                            deterministic_seconds=0.0)
    code = solver.solve(built.model)
    status = _status(code)
    name = solver.status_name(code)
    log.debug("full model: %d vars, built in %.3f s, %s in %.3f s / %.3f det", num_vars,
              built.build_seconds, name, solver.wall_time, solver.deterministic_time)
    used = float(solver.deterministic_time)
    phase = (f"whole batch: {name}, {solver.deterministic_time:.3f} deterministic s, "
             f"limit {'-' if deterministic_time is None else f'{deterministic_time:g}'}")
    if (deterministic_time is not None and status is not Status.OPTIMAL
            and code != cp_model.INFEASIBLE
            and solver.deterministic_time < deterministic_time * 0.999):
        notes.append(f"the wall-clock limit stopped the search after {solver.wall_time:.2f} s, "
                     f"before its deterministic time {deterministic_time:g}: this answer "
                     "depends on machine load")
    if code == cp_model.MODEL_INVALID:
        log.error("CP-SAT reported MODEL_INVALID: %s", built.model.validate())
        notes.append("BUG: CP-SAT reported MODEL_INVALID")
    if status is None:
        if code == cp_model.INFEASIBLE:
            notes.append("BUG: the CP-SAT model is infeasible (placing nothing is always "
                         "feasible)")
        return CpsatOutcome(None, Status.GREEDY, None, None,
                            time.perf_counter() - request.started, notes, hint_objective, name,
                            num_vars, [phase], deterministic_seconds=used)
    values = _solution_values(solver, built)
    plan = fill_reasons(problem, recover_plan(problem, built.structure, built.variables, values,
                                              built.pinned))
    objective = round(solver.objective_value)
    bound: int | None = min(int(np.floor(solver.best_objective_bound + 1e-6)),
                            built.best_possible, combinatorial_bound(built, request.weights))
    if status is Status.OPTIMAL:
        bound = objective
    if built.focused:  # optimal for the focused model only
        status, bound = Status.FEASIBLE, None
    return CpsatOutcome(plan, status, objective, bound, time.perf_counter() - request.started,
                        notes, hint_objective, name, num_vars, [phase],
                        deterministic_seconds=used)


def _solution_values(solver: cp_model.CpSolver, built: BuiltModel) -> dict[int, int]:
    """The solution's value of every variable of ``built`` (``value[var.index]``), with
    checkpoints: a whole-batch model has tens of thousands of variables."""
    checkpoint()
    solution = solver.response_proto.solution
    checkpoint()
    values = {var.index: int(solution[var.index])
              for var in checked(built.variables.reg.variables, 4096)}
    checkpoint()
    return values


def solve_step(request: SolveRequest, incumbent: Plan, keep: np.ndarray,
               fixed: dict[int, np.ndarray], skip: frozenset[int], max_seconds: float,
               deterministic: float | None) -> tuple[Plan | None, float]:
    """Build, hint, solve and recover one large-neighbourhood step of ``request``.

    With ``request`` bound first it is the step solver of
    :func:`solver.lns.large_neighbourhood_search` (see there for ``keep``, ``fixed``,
    ``skip``, ``max_seconds`` and ``deterministic``, the step's deterministic limit);
    ``request.deterministic_time`` only says which kind of budget the steps run under.
    Returns the step's plan (``None``: it found nothing) and the deterministic time used;
    raises :class:`solver.lns.StepNotStarted` when the clock leaves no room to search it.
    """
    problem = request.problem
    built = cached_build(request.models, problem, request.weights, incumbent, keep, fixed,
                         skip)
    retain(built)
    try:
        add_hint(built, incumbent)
    except HintError as exc:  # pragma: no cover - the incumbent is always representable
        log.debug("large-neighbourhood step: hint not representable: %s", exc)
    checkpoint()
    solver = cp_model.CpSolver()
    latency = min_search_seconds(len(built.variables.reg.variables))
    search_parameters(solver, max_time=min(max_seconds,
                                           request.search_end - time.perf_counter() - latency),
                      workers=request.workers, seed=request.seed, deterministic_time=deterministic)
    # a step has a fraction of a second: probing would spend it before the hint is
    # even loaded as a solution
    solver.parameters.cp_model_probing_level = 0
    # presolve's clique merging ignores the time limit: on a 7k-variable step of an
    # A3 8,192-node batch it took 0.3-0.4 s past a 0.3 s limit (the search then
    # outlived a 1 s call); without it the step keeps its limit and loads the hint.
    # Under a deterministic budget the wall clock is only a safety net and the merged
    # cliques make the steps stronger (multilevel-n8192-batch11-d4-s0 at D = 10: 679
    # origin hits with them, 388 without), so they stay there.  Either way the choice
    # is the budget's kind, the same for every step of every budget of that kind.
    if request.deterministic_time is None:
        solver.parameters.merge_at_most_one_work_limit = 0.0
    num_vars = len(built.variables.reg.variables)
    if not request.begin_search(solver, latency):
        # the clock cuts the plan here: the search ends rather than going on
        # with a smaller next step that a longer budget would never reach
        raise StepNotStarted("no time left to search this step")
    code = solver.solve(built.model)
    used = float(solver.deterministic_time)
    log.debug("lns step: %d vars, built in %.3f s, %s in %.3f s / %.3f det (limit %.3f s"
              " / %s det)", num_vars, built.build_seconds, solver.status_name(code),
              solver.wall_time, used, max_seconds, deterministic)
    if _status(code) is None:
        return None, used
    values = _solution_values(solver, built)
    return recover_plan(problem, built.structure, built.variables, values,
                        built.pinned), used
