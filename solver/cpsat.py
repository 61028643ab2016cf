"""The CP-SAT engine: build the counted model, warm-start it, solve within a hard budget.

The model (``solver/model/``) decides blocks, windows and level groups per domain and
counts interchangeable nodes per cell; only nodes that some rank prefers or avoids are
decided one by one.  A post-pass turns the counts into ranks → nodes exactly.

Wall-clock guarantee: model building checks the clock between phases, and the search
runs in a worker thread with CP-SAT's own limit; if it has not returned at the deadline
the search is stopped, and if it still does not return within a small margin the call
gives up on it and returns without a plan (the facade then answers with greedy).

The anytime rule: more budget never gives a worse answer
----------------------------------------------------------
The search is a fixed plan of phases whose choice and lengths do not depend on the
budget; the budget only decides where the plan is cut.  So for budgets ``T1 < T2`` the run
under ``T2`` first does exactly what the run under ``T1`` did, then goes on from the best
answer so far, and every phase returns the better of its own answer and the one it
started from.

* **Which search** depends on the problem's shape only (:func:`search_mode`): small
  problems and single jobs get one model of the whole batch (``full``), which can prove
  optimality; large batches get large neighbourhoods first, then the whole-batch model
  (``hybrid``).
* **Neighbourhoods** (:mod:`solver.lns`) visit jobs in an order that depends only on the
  incumbent, and every step gets the same :data:`solver.lns.STEP_DETERMINISTIC_SECONDS`
  of CP-SAT's deterministic time under every budget, deterministic or wall-clock (with
  the CP-SAT parameters of the budget's kind: clique merging is off under a wall clock,
  whose deadline it ignores).  Under a deterministic budget a step starts while the time
  used is below the budget; under a wall-clock budget it starts while the clock leaves
  room to search (the first step without room ends the phase: a smaller step after it
  would be one that a longer budget never reaches), and the step running at the deadline
  is stopped there and offers the best solution it found so far (accepted only when
  better, as every step's).  The phase ends when a sweep improves nothing, when it has
  used :data:`LNS_LIMIT_DETERMINISTIC` (deterministic budgets only), or when the budget
  runs out.
* **The whole-batch phase** runs only when the neighbourhoods ended by their own rule
  (not by the budget) and at least :data:`FULL_MIN_DETERMINISTIC` (or
  :data:`FULL_MIN_SECONDS` of wall clock) is left; it is hinted with, and keeps, their
  answer, and gets all the rest of the budget.  That this phase too gives at least as
  much under a longer limit assumes that one CP-SAT search with one worker and a fixed
  seed follows the same path under any limit; CP-SAT does not promise it (some of its
  work limits may scale with the time left), so the phase is kept to long budgets (at
  least :data:`LNS_LIMIT_DETERMINISTIC` + :data:`FULL_MIN_DETERMINISTIC`, or 5 s left
  after the neighbourhoods converged).

Every run records its phases (:attr:`CpsatOutcome.phases`) and its steps
(:attr:`CpsatOutcome.steps`: job, neighbourhood, deterministic limit, outcome).

What holds where
~~~~~~~~~~~~~~~~
*Deterministic budget* (``deterministic_time``), one worker: ``answer(D2) >= answer(D1)``
for ``D2 > D1`` exactly, up to the whole-batch phase (tested in
``tests/solver/test_anytime_monotone.py``), independent of machine load.

*Wall-clock budget*, one worker: the run under ``T2`` starts the same steps, with the same
deterministic limits and parameters, as the run under ``T1`` (tested there through the
step log); every step that ``T1`` completed, ``T2`` completes identically, and the step
``T1`` was cutting is the same search that ``T2`` runs further.  So ``answer(T2) >=
answer(T1)`` holds as far as one CP-SAT search cut later is at least as good, which
CP-SAT's sequential search gives but does not promise.  It does not hold when

- the load differs so much between the two runs that the clock cuts ``T2``'s plan
  earlier than ``T1``'s (the plan is the same, where the clock cuts it is not): fewer
  steps, or the same step cut during model building or presolve (nothing from it is
  kept) where ``T1``'s was cut during its search;
- the plan recovered from a cut step's solution scores (by
  :func:`models.objective.evaluate`, which decides acceptance) above the model's
  objective: the post-pass can do that, so a later cut with a better model objective
  can, rarely, be accepted with less;
- the whole-batch phase runs under both budgets: its length is the clock's, and whether
  it runs at all depends on the wall clock left after the neighbourhoods converged;
- the facade's own fallbacks differ: under a short budget the origin-first
  construction may be cut (greedy is then the start), or CP-SAT's answer may come too
  late to be checked (:mod:`solver.facade`).

*Several workers*: they share solutions in a way that depends on timing (under a wall
clock) or on the limit (under a deterministic budget); no rule is promised there.

What holds for every budget: the answer is never worse than the fallback (greedy or the
origin-first construction), passes the validator, and the call returns at its deadline
with no search left running (unless a worker had to be abandoned, see above).
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field, replace

import numpy as np
from ortools.sat.python import cp_model

from heuristics.origin_first import ORIGIN_FIRST_FAMILIES, origin_first_plan
from models.check import check
from models.compiled import Problem
from models.objective import ResolvedWeights, block_spill, evaluate
from models.placement import Status
from models.plan import Plan, to_placement
from models.scenario import Family
from solver.explain import fill_reasons
from solver.hit_lp_bound import POD_FAMILIES, objective_bound
from solver.lns import LnsResult, StepNotStarted, StepRecord, large_neighbourhood_search
from solver.model.cancel import (
    BuildCancelled,
    CancelToken,
    cancellable,
    checked,
    checkpoint,
    retain,
)
from solver.model.cancellable import CancellableModel
from solver.model.constraints import Constraints
from solver.model.group_hit_bound import hit_bound_reduction
from solver.model.hints import HintError, plan_to_assignment
from solver.model.objective import ObjectiveBuilder, ObjectiveTerms
from solver.model.podscope import pod_scope
from solver.model.recover import recover_plan
from solver.model.reuse import ModelCache, ModelCounts, plan_digest
from solver.model.structure import Structure, build_structure
from solver.model.variables import Lin, ModelVariables, create_variables

log = logging.getLogger("npu_place.cpsat")

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
    #: the phases run, in order, each with how it ended (see the module docstring)
    phases: list[str] = field(default_factory=list)
    #: every large-neighbourhood step started, in order
    steps: list[StepRecord] = field(default_factory=list)
    #: the models this run took from its model cache or built (``None``: none counted)
    models: ModelCounts | None = None
    #: :func:`solver.hit_lp_bound.objective_bound` when it was computed (``bound`` is the
    #: smaller of it and the search's own)
    lp_bound: int | None = None
    #: CP-SAT's deterministic time used, summed over every phase and step (``None``: not
    #: known, e.g. a run abandoned at its deadline); reproducible with one worker and a seed
    deterministic_seconds: float | None = None


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
    focused: bool = False  # built on a focus mask: no optimality, no bound

def pinned_jobs(problem: Problem, hint: Plan) -> dict[int, np.ndarray]:
    """Soft jobs whose warm-start blocks spill across super pods or racks.

    The model keeps blocks and windows inside one super pod / rack; such a job keeps the
    greedy answer as a fixed part of the batch so the warm start stays representable.
    """
    out: dict[int, np.ndarray] = {}
    for job in problem.jobs:
        checkpoint()
        nodes = hint.nodes[job.index]
        if nodes is None or not job.soft or job.family not in (Family.SUPERPOD, Family.RACK):
            continue
        if block_spill(problem, job, [int(n) for n in nodes]) > 0:
            out[job.index] = np.asarray(nodes, dtype=np.int32)
    return out


def ordinary_pending_view(problem: Problem) -> tuple[Problem, dict[int, np.ndarray]] | None:
    """``problem`` with every partly running ordinary job replaced by the view of its
    pending ranks (an ordinary job of those ranks, with their cache entries and fault
    flags), and the pending ranks per such job; ``None`` when there is none.

    Every objective term of an ordinary job depends on its placed ranks only (hits, fault
    returns, sub-healthy hosts, partly used hosts), so a plan of the view scores exactly
    as the full plan does.  Other partly running jobs stay as they are (pinned).
    """
    subs = {job.index: np.flatnonzero(job.to_place) for job in problem.jobs
            if job.partly_running and job.family is Family.ORDINARY}
    if not subs:
        return None
    jobs = tuple(
        replace(job, tasks=len(subs[job.index]), origin=job.origin[subs[job.index]],
                fault=job.fault[subs[job.index]], running=np.zeros(0, dtype=np.int32))
        if job.index in subs else job for job in problem.jobs)
    return replace(problem, jobs=jobs), subs


def _to_view(plan: Plan, subs: dict[int, np.ndarray]) -> Plan:
    nodes = [None if n is None else (np.asarray(n)[subs[j]] if j in subs else n)
             for j, n in enumerate(plan.nodes)]
    return Plan(nodes, list(plan.reasons))


def _from_view(plan: Plan, problem: Problem, subs: dict[int, np.ndarray]) -> Plan:
    nodes: list[np.ndarray | None] = []
    for j, n in enumerate(plan.nodes):
        if n is None or j not in subs:
            nodes.append(n)
            continue
        full = problem.jobs[j].running.astype(np.int32).copy()
        full[subs[j]] = np.asarray(n, dtype=np.int32)
        nodes.append(full)
    return Plan(nodes, list(plan.reasons))


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
    # Partly running super-pod / 950 / multilevel jobs (issue 24) are modelled around
    # their running ranks (solver.model.podlevel); those whose running ranks break their
    # own group tree keep the warm start's pod-level answer as a fixed part of the batch,
    # or stay unplaced without one.  Ordinary ones are modelled through
    # :func:`ordinary_pending_view` by solve_cpsat (here, when called directly, pinned).
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
    # the bound-only rows would change the steps' search paths for no use: a focused
    # model reports no bound (multilevel-n8192-batch11-d4-s0 at D = 10: 388 origin hits
    # with them in the steps, against 679 without)
    Constraints(model, problem, structure, mv, pinned_use, bound_rows=not focused).add_all()
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


def better_start(problem: Problem, hint: Plan, weights: ResolvedWeights,
                 multilevel: bool = True) -> Plan:
    """The better of ``hint`` and its origin-first reconstruction (validated).

    A hint that is not a valid placement itself (a caller's own warm start) is returned
    as it is: the reconstruction builds on the hint's other jobs.  ``multilevel`` off
    leaves the multilevel jobs as the hint has them (see :data:`FULL_MODEL_OLD_START`).
    """
    if not any(job.family in ORIGIN_FIRST_FAMILIES for job in problem.jobs):
        return hint
    if check(problem, to_placement(problem, hint, engine="hint", status=Status.GREEDY),
             include_vnpu=False):
        return hint
    candidate = origin_first_plan(problem, hint, weights=weights, multilevel=multilevel)
    placement = to_placement(problem, candidate, engine="origin-first", status=Status.GREEDY)
    if check(problem, placement, include_vnpu=False):
        log.error("origin-first construction produced an invalid plan; ignored")
        return hint
    if evaluate(problem, candidate.as_mapping(), weights).objective > evaluate(
            problem, hint.as_mapping(), weights).objective:
        return candidate
    return hint


def combinatorial_bound(built: BuiltModel, weights: ResolvedWeights) -> int:
    """``best_possible`` less the origin hits no solution of the model reaches
    (:mod:`solver.model.group_hit_bound`); adds nothing to the model, so it cannot change the
    search.  Focused models report no bound: their ``best_possible`` is returned."""
    if built.focused or weights.origin_hit <= 0:
        return built.best_possible
    missed = hit_bound_reduction(built.problem, built.structure, built.variables)
    return built.best_possible - weights.origin_hit * missed


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
    start: Plan | None = None,
    recover_reserve: float = 0.0,
    mode: str | None = None,
    models: ModelCache | None = None,
) -> CpsatOutcome:
    """Run CP-SAT warm-started from ``hint`` within ``time_limit`` wall-clock seconds.

    Building, hinting, searching and recovering the plan run in one worker thread that
    is always joined before this function returns: the search is stopped at its end
    (``stop_search``) and building or recovery is cancelled at checkpoints
    (:mod:`solver.model.cancel`), so no work started here outlives the call.

    Parameters
    ----------
    problem
        The compiled scenario.
    hint
        Greedy's plan: soft jobs whose blocks spill are pinned to it, and its nodes stay
        candidates of node-level jobs, so it is always representable.
    weights
        The resolved objective weights.
    time_limit
        Wall-clock budget for building, solving and recovering.
    workers, seed
        CP-SAT search parameters.
    deterministic_time
        Bound the search by CP-SAT's deterministic time (reproducible under any load);
        the wall-clock limit stays as a safety net, and a note says when it was hit.
    fix_to_hint
        Fix every variable to its hinted value (tests use it to show the hint is exact).
    start
        The warm start to hint (default: the better of ``hint`` and its origin-first
        reconstruction).
    recover_reserve
        Seconds kept at the end of the budget for turning the solution into a plan.
    mode
        ``"lns"`` (large neighbourhoods only, :mod:`solver.lns`), ``"full"`` (one model
        of the whole batch), ``"hybrid"`` (the first, then the second), or ``None``:
        decide with :func:`search_mode`.
    models
        Built models kept between solves of a stored cluster (:mod:`solver.model.reuse`):
        a model whose build would be identical is taken from it, new ones are added.
        Without it the run keeps its models in a cache of its own, dropped at its end,
        so a step the search repeats (its last sweep repeats the one before) is not
        built twice.  The outcome counts them (``CpsatOutcome.models``).

    Returns
    -------
    CpsatOutcome
        The plan (``None`` when the solver found nothing in time), status, objective and
        bound as CP-SAT reports them.
    """
    view = ordinary_pending_view(problem)
    if view is not None:
        # partly running ordinary jobs: the model places their pending ranks as ordinary
        # jobs of their own (same terms, so the same objective), then the plan is mapped
        # back with the running ranks on their nodes
        vproblem, subs = view
        viewed = solve_cpsat(
            vproblem, _to_view(hint, subs), weights, time_limit=time_limit, workers=workers,
            seed=seed, deterministic_time=deterministic_time, fix_to_hint=fix_to_hint,
            start=None if start is None else _to_view(start, subs),
            recover_reserve=recover_reserve, mode=mode, models=models)
        if viewed.plan is not None:
            viewed.plan = _from_view(viewed.plan, problem, subs)
        return viewed
    started = time.perf_counter()
    deadline = started + time_limit
    search_end = deadline - recover_reserve
    # a cache of this run's own when the caller keeps none: repeated steps are handed
    # back, not built again (same proto; solver.model.reuse)
    own_models = models is None
    cache = ModelCache() if models is None else models
    mark = cache.mark()
    if mode is None:
        mode = search_mode(problem)
    elif mode not in SEARCH_MODES:
        raise ValueError(f"unknown search mode {mode!r}; choose one of {SEARCH_MODES}")
    box: dict[str, object] = {}
    # building and recovery stop a little before the deadline, so that unwinding the
    # worker fits inside it even on a busy machine
    token = CancelToken(deadline - min(CANCEL_LEAD_SECONDS, 0.1 * time_limit))
    holder: dict[str, cp_model.CpSolver] = {}
    lock = threading.Lock()  # orders "solver created" against "stop requested"
    stopped = threading.Event()

    def work() -> None:
        try:
            with cancellable(token):
                found = _run(problem, hint, weights, started, search_end, workers, seed,
                             deterministic_time, fix_to_hint, start, holder, lock, stopped,
                             mode, box, cache)
                _tighten_bound(problem, weights, found, search_end)
                box["outcome"] = found
        except BuildCancelled as exc:
            retain(exc)  # its frames hold the half-built model: freed after the deadline
            box["outcome"] = CpsatOutcome(
                None, Status.GREEDY, None, None, time.perf_counter() - started,
                ["the CP-SAT model was not ready within the budget; building was cancelled"],
                None, "NOT_RUN")
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc
        finally:
            _LIVE.pop(threading.current_thread(), None)

    thread = threading.Thread(target=work, name=WORKER_THREAD_NAME, daemon=True)
    _LIVE[thread] = (token, holder, stopped)
    thread.start()
    thread.join(max(0.0, search_end - time.perf_counter()))
    if thread.is_alive():
        with lock:
            stopped.set()
            solver = holder.get("solver")
            if solver is not None:  # CP-SAT stops within milliseconds when asked
                solver.stop_search()
        thread.join(max(0.0, deadline - GIVE_UP_SECONDS - time.perf_counter()))
    if thread.is_alive():
        token.cancel()
        thread.join(GIVE_UP_SECONDS)
    if thread.is_alive():
        # CP-SAT's loading and presolve check for a stop only between steps, which can
        # take longer than the margin on large models or a busy machine
        frame = sys._current_frames().get(thread.ident or -1)
        stack = traceback.extract_stack(frame) if frame is not None else []
        # the innermost frame that is not the thread machinery's own waiting
        own = [f for f in stack if not f.filename.endswith("threading.py")] or stack
        last = f"{own[-1].name} ({own[-1].filename}:{own[-1].lineno})" if own else "?"
        # one line for the operator; the stack only for --log-level debug
        log.warning("the CP-SAT worker did not stop at its deadline; abandoned in %s", last)
        log.debug("where the abandoned CP-SAT worker was:\n%s",
                  "".join(traceback.format_list(stack[-3:])))
        note = ("CP-SAT did not stop within its budget (it was loading or presolving a "
                "model); the call returned without waiting, and the search ends on its own")
        # counted before the models go: no later session may hint a model that the
        # search still reads
        counts = cache.counts_since(mark)
        cache.clear()
        published = box.get("published")
        if isinstance(published, tuple):
            plan, objective = published
            return CpsatOutcome(fill_reasons(problem, plan), Status.FEASIBLE, objective, None,
                                time.perf_counter() - started, [note], None, "LNS",
                                models=counts)
        return CpsatOutcome(None, Status.GREEDY, None, None, time.perf_counter() - started,
                            [note], None, "OVERRAN", models=counts)
    _LIVE.pop(thread, None)
    counts = cache.counts_since(mark)
    if own_models:
        cache.clear()  # freed at a safe time (cancel.retain), never just before a deadline
    error = box.get("error")
    if isinstance(error, BaseException):
        raise error
    outcome = box["outcome"]
    assert isinstance(outcome, CpsatOutcome)
    outcome.models = counts
    return outcome


def _tighten_bound(problem: Problem, weights: ResolvedWeights, outcome: CpsatOutcome,
                   search_end: float) -> None:
    """Lower the search's bound to :func:`solver.hit_lp_bound.objective_bound` when that is
    smaller, once the search is over (recorded in :attr:`CpsatOutcome.lp_bound`).

    Only a bound the search proved is lowered (a run without one keeps none), only for
    batches with a super-pod-family job, and only with at least
    :data:`BOUND_MIN_SECONDS` of the budget left (always under a deterministic budget,
    whose wall clock is a safety net; a wall-clock search uses its budget to the end).
    Nothing the search does depends on it.
    """
    if outcome.bound is None or outcome.status is Status.OPTIMAL:
        return
    if not any(job.family in POD_FAMILIES for job in problem.jobs):
        return
    left = search_end - time.perf_counter()
    if left < BOUND_MIN_SECONDS:
        return
    found = objective_bound(problem, weights, time_limit=min(BOUND_MAX_SECONDS, left / 2))
    outcome.lp_bound = found
    log.debug("origin-hit LP bound %s, the search's %s", found, outcome.bound)
    if found is not None and found < outcome.bound:
        outcome.bound = found


#: The origin-hit LP bound (:func:`_tighten_bound`) is computed only with this many
#: seconds of the budget left after the search ...
BOUND_MIN_SECONDS = 1.0
#: ... and GLOP gets at most this long (about 0.2 s on 950-n8192-batch11-s0).
BOUND_MAX_SECONDS = 5.0


#: Worker threads not yet joined, with what stops them (see :func:`_stop_workers_at_exit`).
_LIVE: dict[threading.Thread, tuple[CancelToken, dict[str, cp_model.CpSolver],
                                    threading.Event]] = {}


@atexit.register
def _stop_workers_at_exit() -> None:
    """Stop and join any abandoned worker before the interpreter exits.

    A CP-SAT search still running in a thread when the interpreter tears down aborts the
    process ("terminate called without an active exception").
    """
    for thread, (token, holder, stopped) in list(_LIVE.items()):
        stopped.set()
        token.cancel()
        solver = holder.get("solver")
        if solver is not None:
            solver.stop_search()
        thread.join(10.0)


#: CP-SAT's loading and presolve answer a stop request (or their own time limit) only
#: between steps that grow with the model: its limit is set this much per variable
#: before the real end, and a search is not started with less than twice that left.
SEARCH_SECONDS_PER_VARIABLE = 2e-5


def min_search_seconds(num_variables: int) -> float:
    """Least time worth starting a search of a model of this size with (seconds)."""
    return 0.01 + SEARCH_SECONDS_PER_VARIABLE * num_variables


SEARCH_MODES = ("lns", "hybrid", "full")
#: Name of the thread a :func:`solve_cpsat` call searches in (it is joined before the call
#: returns unless CP-SAT ignores a stop inside one presolve step; see docs/cpsat.md).
WORKER_THREAD_NAME = "npu-place-cpsat"


def search_mode(problem: Problem, time_limit: float | None = None,
                deterministic_time: float | None = None) -> str:
    """``"hybrid"``, ``"full"`` or ``"lns"``: how :func:`solve_cpsat` searches ``problem``.

    Chosen by the problem's shape only, never by the budget or machine load (see the
    module docstring): problems below :data:`LNS_MIN_NODES` nodes and problems of at most
    :data:`FULL_MAX_JOBS` jobs get one model of the whole batch (``full``), which builds
    fast enough there or proves a single job quickly; larger batches search by large
    neighbourhoods first, then the whole-batch model (``hybrid``); batches of more than
    :data:`LNS_ONLY_NODES` nodes by large neighbourhoods only (``lns``).  ``time_limit`` and
    ``deterministic_time`` are accepted for callers of the earlier signature and ignored.
    """
    del time_limit, deterministic_time
    if (problem.num_nodes < LNS_MIN_NODES or len(problem.jobs) <= FULL_MAX_JOBS):
        return "full"
    if problem.num_nodes > LNS_ONLY_NODES:
        return "lns"
    return "hybrid"


#: A hybrid run whose whole-batch model could not search goes back to large
#: neighbourhoods when at least this much time (seconds) is left.
RESUME_LNS_SECONDS = 0.2
#: Problems with fewer nodes always get the full model (it builds fast enough).
LNS_MIN_NODES = 2048
#: Batches of more nodes search by large neighbourhoods only, without the whole-batch
#: phase: its model of a 65,536-node multilevel batch took the process from 0.7 to 2.6 GB
#: (peak resident memory; deterministic time 10, issue 37's limit is 2 GB), where the
#: neighbourhoods had already converged on most batches of that size.
LNS_ONLY_NODES = 16384
#: Problems with at most this many jobs always get the full model: a single job's whole
#: model proves it in seconds where neighbourhoods prove nothing (a 512-rank job on
#: 4,608 nodes: proved in about 1 s of search).
FULL_MAX_JOBS = 1
#: Under a deterministic budget the large-neighbourhood phase of a hybrid search ends
#: after this much CP-SAT deterministic time, whatever the budget (under a wall-clock
#: budget it goes on while a sweep improves something).
LNS_LIMIT_DETERMINISTIC = 3.0
#: The whole-batch phase of a hybrid search starts only with at least this much
#: deterministic time left (its building costs seconds of wall clock on large batches,
#: and with 2 left on a3-n4096-batch10-s8 its search ran 40 min of wall clock without
#: returning on a loaded machine: LP solves between time checks) ...
FULL_MIN_DETERMINISTIC = 5.0
#: ... or this many wall-clock seconds left; otherwise the neighbourhoods go on.
FULL_MIN_SECONDS = 5.0
#: Batches with a job of these families search the whole-batch model with the warm start
#: as its first solution only (CP-SAT's ``use_optimization_hints = False``): by default
#: CP-SAT keeps branching towards the hinted values, and on multilevel batches the greedy
#: start's layout then holds the search (multilevel-n1024-batch8-d3-s2 at deterministic
#: time 10: 344,099,655 with the hint followed, 354,330,583 without, bound 354,752,758;
#: greedy has 48 origin hits, the answer without it 177).  The answer still starts from,
#: and is never worse than, the warm start.  Other families were not measured this way.
FREE_SEARCH_FAMILIES = frozenset({Family.MULTILEVEL})
#: The whole-batch search of a batch searched in ``full`` mode (small or single-job
#: batches) with multilevel jobs starts from greedy's answer as the origin-first
#: construction without its multilevel part re-placed it (as before the multilevel part
#: existed), even when the facade's fallback is the full construction: with the full
#: construction as its first solution the search of multilevel-n1024-batch8-d3-s2 at
#: deterministic time 10 ended at 354,090,874 (174 hits) against 354,731,198 (182) from
#: the older start (the construction had 353,372,917).  The answer is still never worse
#: than the fallback.  Large batches (``hybrid``) start their neighbourhoods from the
#: full construction (multilevel-n8192-batch11-d4-s0: 1,018 hits against 679).
FULL_MODEL_OLD_START = True
#: Building is cancelled this long before the deadline (at most 10 % of the budget): the
#: worker then unwinds and frees a model of up to ~100k variables inside the deadline.
CANCEL_LEAD_SECONDS = 0.04
#: How long the caller waits for a cancelled worker before it gives up on it (a worker
#: that ignores cancellation is a bug; the deadline wins and a BUG note says so).
GIVE_UP_SECONDS = 0.02


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


def _run(problem: Problem, hint: Plan, weights: ResolvedWeights, started: float,
         search_end: float, workers: int, seed: int, deterministic_time: float | None,
         fix_to_hint: bool, start: Plan | None, holder: dict[str, cp_model.CpSolver],
         lock: threading.Lock, stopped: threading.Event, mode: str,
         box: dict[str, object], models: ModelCache | None = None) -> CpsatOutcome:
    """Build, hint, solve and recover; runs in the worker thread of :func:`solve_cpsat`."""
    notes: list[str] = []
    if start is None:
        start = better_start(problem, hint, weights,
                             multilevel=not (FULL_MODEL_OLD_START and mode == "full"))
        if start is not hint:
            notes.append("warm start: the origin-first construction beat greedy")
    if mode == "full":
        return _run_full(problem, hint, weights, started, search_end, workers, seed,
                         deterministic_time, fix_to_hint, start, holder, lock, stopped, notes,
                         models)
    deterministic = deterministic_time is not None
    # under a wall-clock budget the neighbourhoods go on while they improve: a capped
    # phase handed a 10 s budget's rest to a whole-batch model that, under load, found
    # less than a 5 s budget's neighbourhoods did
    limit = LNS_LIMIT_DETERMINISTIC if mode == "hybrid" and deterministic else None
    first, searched = _run_lns(problem, start, weights, started, search_end, workers, seed,
                               deterministic_time, holder, lock, stopped, notes, box, limit,
                               models)
    assert first.plan is not None
    if mode == "lns" or searched.stopped_by == "budget":
        return first
    # the whole-batch phase: only when the neighbourhoods ended by their own rule (never
    # by the budget) and enough is left, both decided the same way under every budget
    # that gets this far; it starts from their answer, which stays the fallback
    if deterministic:
        assert deterministic_time is not None
        left = deterministic_time - searched.deterministic_time
        enough = left >= FULL_MIN_DETERMINISTIC
    else:
        left = search_end - time.perf_counter()
        enough = left >= FULL_MIN_SECONDS
    if not enough:
        first.phases.append(f"whole batch: not run ({left:.2f} "
                            f"{'deterministic ' if deterministic else ''}s left)")
        log.debug("phase %s", first.phases[-1])
        return first
    # the whole-batch model is built around the incumbent, so it stays representable
    start = hint = first.plan
    full_notes = list(first.notes)
    try:
        outcome = _run_full(problem, hint, weights, started, search_end, workers, seed,
                            left if deterministic else None, fix_to_hint, start, holder,
                            lock, stopped, full_notes, models)
    except BuildCancelled as exc:
        retain(exc)
        first.notes = [*full_notes, "the whole-batch model was not ready within the budget; "
                       "the large-neighbourhood answer stands"]
        first.phases.append("whole batch: building cancelled at the deadline")
        log.debug("phase %s", first.phases[-1])
        first.wall_seconds = time.perf_counter() - started
        return first
    outcome.phases = [*first.phases, *outcome.phases]
    outcome.steps = first.steps
    outcome.deterministic_seconds = _det_sum(first.deterministic_seconds,
                                             outcome.deterministic_seconds)
    if (outcome.plan is None and searched.stopped_by == "capped"
            and time.perf_counter() + RESUME_LNS_SECONDS < search_end):
        # the whole-batch model could not search: the rest of the budget goes back to
        # large neighbourhoods (by wall clock only: a deterministic run gets here only
        # when its safety net cut the model).  Not after neighbourhoods that converged
        # (every wall-clock run): they would repeat their last sweep, step for step.
        again, _ = _run_lns(problem, first.plan, weights, started, search_end, workers,
                            seed, None, holder, lock, stopped, [], box, None, models)
        again.notes = [*outcome.notes, *again.notes]
        again.phases = [*outcome.phases, *again.phases]
        again.steps = [*outcome.steps, *again.steps]
        again.deterministic_seconds = _det_sum(outcome.deterministic_seconds,
                                               again.deterministic_seconds)
        return again
    if outcome.plan is None or (first.objective is not None and evaluate(
            problem, outcome.plan.as_mapping(), weights).objective < first.objective):
        first.notes = outcome.notes
        first.phases = [*outcome.phases[:-1], outcome.phases[-1]
                        + ", the neighbourhoods' answer kept"]
        first.deterministic_seconds = outcome.deterministic_seconds
        log.debug("phase %s", first.phases[-1])
        first.wall_seconds = time.perf_counter() - started
        return first
    return outcome


def _det_sum(a: float | None, b: float | None) -> float | None:
    """The deterministic time of two phases run one after the other (``None``: unknown)."""
    return None if a is None or b is None else a + b


def _run_full(problem: Problem, hint: Plan, weights: ResolvedWeights, started: float,
              search_end: float, workers: int, seed: int, deterministic_time: float | None,
              fix_to_hint: bool, start: Plan, holder: dict[str, cp_model.CpSolver],
              lock: threading.Lock, stopped: threading.Event,
              notes: list[str], models: ModelCache | None = None) -> CpsatOutcome:
    """One model of the whole batch, hinted with ``start``."""
    built = cached_build(models, problem, weights, hint)
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
    search_parameters(solver, max_time=search_end - time.perf_counter() - latency,
                      workers=workers, seed=seed, deterministic_time=deterministic_time)
    if fix_to_hint:
        solver.parameters.fix_variables_to_their_hinted_value = True
    elif any(job.family in FREE_SEARCH_FAMILIES for job in problem.jobs):
        solver.parameters.use_optimization_hints = False
    num_vars = len(built.variables.reg.variables)
    with lock:
        if stopped.is_set() or (deterministic_time is None
                                and time.perf_counter() + 2 * latency >= search_end):
            return CpsatOutcome(None, Status.GREEDY, None, None, time.perf_counter() - started,
                                [*notes, "no time left to search after building the CP-SAT "
                                 "model"], hint_objective, "NOT_RUN", num_vars,
                                ["whole batch: no time left to search after building"],
                                deterministic_seconds=0.0)
        holder["solver"] = solver
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
        return CpsatOutcome(None, Status.GREEDY, None, None, time.perf_counter() - started,
                            notes, hint_objective, name, num_vars, [phase],
                            deterministic_seconds=used)
    values = _solution_values(solver, built)
    plan = fill_reasons(problem, recover_plan(problem, built.structure, built.variables, values,
                                              built.pinned))
    objective = round(solver.objective_value)
    bound: int | None = min(int(np.floor(solver.best_objective_bound + 1e-6)),
                            built.best_possible, combinatorial_bound(built, weights))
    if status is Status.OPTIMAL:
        bound = objective
    if built.focused:  # optimal for the focused model only
        status, bound = Status.FEASIBLE, None
    return CpsatOutcome(plan, status, objective, bound, time.perf_counter() - started, notes,
                        hint_objective, name, num_vars, [phase], deterministic_seconds=used)


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


def _run_lns(problem: Problem, start: Plan, weights: ResolvedWeights, started: float,
             search_end: float, workers: int, seed: int, deterministic_time: float | None,
             holder: dict[str, cp_model.CpSolver], lock: threading.Lock,
             stopped: threading.Event, notes: list[str],
             box: dict[str, object], limit: float | None,
             models: ModelCache | None = None) -> tuple[CpsatOutcome, LnsResult]:
    """Large-neighbourhood search (:mod:`solver.lns`) with CP-SAT solving each step.

    ``limit`` caps the search (see :func:`solver.lns.large_neighbourhood_search`); the
    search's own result is returned next to the outcome.
    """

    def solve_step(incumbent: Plan, keep: np.ndarray, fixed: dict[int, np.ndarray],
                   skip: frozenset[int], max_seconds: float,
                   deterministic: float | None) -> tuple[Plan | None, float]:
        built = cached_build(models, problem, weights, incumbent, keep, fixed, skip)
        retain(built)
        try:
            add_hint(built, incumbent)
        except HintError as exc:  # pragma: no cover - the incumbent is always representable
            log.debug("large-neighbourhood step: hint not representable: %s", exc)
        checkpoint()
        solver = cp_model.CpSolver()
        latency = min_search_seconds(len(built.variables.reg.variables))
        search_parameters(solver, max_time=min(max_seconds,
                                               search_end - time.perf_counter() - latency),
                          workers=workers, seed=seed, deterministic_time=deterministic)
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
        if deterministic_time is None:
            solver.parameters.merge_at_most_one_work_limit = 0.0
        num_vars = len(built.variables.reg.variables)
        with lock:
            if stopped.is_set() or (deterministic_time is None and time.perf_counter()
                                    + 2 * latency >= search_end):
                # the clock cuts the plan here: the search ends rather than going on
                # with a smaller next step that a longer budget would never reach
                raise StepNotStarted("no time left to search this step")
            holder["solver"] = solver
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

    def publish(plan: Plan, objective: int) -> None:
        box["published"] = (plan, objective)

    result = large_neighbourhood_search(
        problem, start, weights, search_end=search_end,
        deterministic_time=deterministic_time, solve_step=solve_step, stopped=stopped,
        publish=publish, limit=limit)
    notes.extend(result.notes)
    if (deterministic_time is not None and result.deterministic_time < deterministic_time
            and time.perf_counter() >= search_end):
        notes.append("the wall-clock limit stopped the large-neighbourhood search before its "
                      "deterministic time: this answer depends on machine load")
    plan = fill_reasons(problem, result.plan)
    phase = (f"neighbourhoods: {result.stopped_by}, {result.steps} steps, "
             f"{result.improved_steps} improved, {result.deterministic_time:.3f} "
             f"deterministic s, objective {result.objective}")
    log.debug("phase %s", phase)
    return CpsatOutcome(plan, Status.FEASIBLE, result.objective, None,
                        time.perf_counter() - started, notes, None, "LNS", phases=[phase],
                        steps=list(result.log),
                        deterministic_seconds=result.deterministic_time), result
