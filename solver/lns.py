"""Large-neighbourhood search for short budgets on large batches.

The full counted model of a 4–8k-node batch has 50k–100k variables: Python needs
seconds to build it and CP-SAT's presolve seconds more, so within a daemon's 0.1–1 s it
never searches.  The improvements CP-SAT finds over the warm start are local, though: a
job's blocks move towards its origins, another job that took those origins moves out of
the way, a fault rank moves off its old node.  So this search re-solves one small
neighbourhood at a time with everything else fixed:

* **Neighbourhood of job j**: ``j`` and the (at most :data:`MAX_BLOCKERS`) jobs whose
  current nodes hold ``j``'s cached nodes.  Every other placed job is fixed on its nodes
  (``pinned``), every other unplaced job stays out.
* **Kept nodes**: the *units* (:func:`solver.model.focus.unit_keys`: whole super pods,
  whole multilevel domains) that the neighbourhood's current and cached nodes lie in,
  plus the :data:`solver.model.focus.EXTRA_UNITS` roomiest others; node-level jobs keep
  their current and cached nodes and a few spares per class.  Above
  :data:`solver.model.focus.LEAN_ABOVE_NODES` nodes a step's model is *lean*: a block
  takes, of the nodes that are cells of their own (cached nodes), only its own job's
  (its own ranks' when placed explicitly) and its current ones, which keeps the
  incumbent a solution and the step a fraction of the size; a 950 job's explicitly
  placed blocks count their anonymous windows together, one count per rack, and a
  node-level 950 job keeps off other jobs' cached nodes (see :mod:`solver.model.focus`).
* **Step**: build that small model, hint it with the incumbent, solve it; accept the
  answer when :func:`models.objective.evaluate` says it is better and the independent
  validator passes.
* **Wide steps** (``wide=True``, run by :mod:`solver.phases` after the narrow steps
  converged): job ``j``, its blockers and the jobs in the units of its missed cached
  nodes (:func:`wide_hood`), which make room for the rest of a group there; a step
  whose hood is no wider than the narrow one, or that already ran on the same
  incumbent, is passed over.

Jobs are visited by potential (missed origin hits, fault returns, unplaced jobs first;
in a lean batch a super-pod job's missed ranks only where a step could win them back,
:func:`reachable_misses`; a step of more than :data:`LARGE_STEP_RANKS` multilevel
ranks after the smaller ones of its tier, :func:`sweep_order`), sweep after sweep,
until the budget is spent, a sweep improves nothing (``converged``) or the search
reached its own ``limit`` of deterministic time (``capped``). Every step gets the same
:data:`STEP_DETERMINISTIC_SECONDS` of CP-SAT's deterministic time, whatever the budget
is and whether it is deterministic or wall-clock. The budget only decides whether a step
starts (while less than ``D`` is used, or while the wall clock leaves room to search it:
the first step without room ends the search) and, under a wall-clock budget, stops the
step that is running at the end (the step then offers the best solution it found,
accepted only if better, as always). The steps run under a budget are therefore the
first steps of those run under any larger budget (a prefix), and the answer under a
larger budget is at least as good: the step the shorter budget cut is the same search
run further (one worker, fixed seed: CP-SAT's sequential search does so, though it does
not promise it), and every later step only accepts improvements. Under a deterministic
budget the last step may run up to one step's time past ``D`` and the result does not
depend on machine load; under a wall-clock budget where the plan is cut depends on the
load, what it repeats does not. Every step is recorded in :attr:`LnsResult.log`.

The answer is a valid placement of the whole problem, never worse than the warm start;
it proves nothing, so its status is ``feasible`` and it carries no bound.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from models.check import check
from models.compiled import JobView, Problem
from models.objective import ResolvedWeights, evaluate
from models.placement import Status
from models.plan import Plan, to_placement
from models.scenario import Family
from solver.model.cancel import BuildCancelled, checkpoint, retain
from solver.model.focus import lean_groups, neighbourhood_mask, origin_misses, unit_keys

#: Most other jobs moved together with the job a step is about.
MAX_BLOCKERS = 2
#: Most other jobs moved together with the job a *wide* step is about (the steps after
#: the narrow ones converged: :func:`wide_hood`).
MAX_WIDE_BLOCKERS = 4
#: A step whose neighbourhood holds more multilevel ranks than this goes after the
#: smaller steps of its tier in a sweep (:func:`sweep_order`): on a 16,384-node batch
#: such a step (a 512-rank job, 5,000-12,000 variables) costs about 1 s of CPU, while the
#: steps of the small jobs in its way cost 0.02-0.1 s each and, there, won most of what
#: the first sweep won.
LARGE_STEP_RANKS = 256
#: CP-SAT deterministic time of one step, the same for every budget, deterministic or
#: wall-clock (so that a longer budget repeats a shorter one's steps exactly, then goes
#: on).
STEP_DETERMINISTIC_SECONDS = 0.25


StepSolver = Callable[
    [Plan, np.ndarray, dict[int, np.ndarray], frozenset[int], float, float | None],
    tuple[Plan | None, float],
]


class StepNotStarted(BuildCancelled):
    """Raised by a step solver when the clock leaves no room to search the step.

    The search ends there, as at its deadline: going on with a smaller next step would
    run a step that a longer budget, which searches this one, never reaches.
    """


@dataclass(frozen=True)
class StepRecord:
    """One step of the search, as recorded in :attr:`LnsResult.log`.

    Attributes
    ----------
    job
        The job the step is about.
    hood
        The jobs it re-placed (``job`` and its blockers).
    deterministic_limit
        The CP-SAT deterministic time the step was given.
    outcome
        ``"improved"`` (accepted), ``"not better"``, ``"nothing"`` (the step found no
        solution, or its building was cancelled at the deadline), ``"not started"`` (the
        clock left no room to search it: the search ended there) or ``"invalid"`` (a
        bug: the validator refused it).
    objective
        The incumbent's objective after the step.
    """

    job: int
    hood: tuple[int, ...]
    deterministic_limit: float
    outcome: str
    objective: int


@dataclass
class LnsResult:
    """What the search produced."""

    plan: Plan
    objective: int  # evaluate() of plan
    steps: int = 0
    improved_steps: int = 0
    deterministic_time: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: why the search ended: ``"converged"`` (a sweep improved nothing), ``"capped"`` (it
    #: reached its own ``limit``) or ``"budget"`` (the caller's budget ran out first)
    stopped_by: str = "budget"
    #: every step begun, in order (the last may have been cut by the wall clock)
    log: list[StepRecord] = field(default_factory=list)


def job_potential(problem: Problem, plan: Plan, *,
                  reachable: bool = False) -> list[tuple[int, int, int]]:
    """``(tier, potential, job)`` per job, in visiting order.

    Tier 0: placed jobs that miss cached nodes or return fault ranks (by how many);
    tier 1: unplaced jobs (placing one needs room that is rarely there); tier 2: the
    rest (only fragment, reserve and health can still improve).  With ``reachable`` (the
    search of a lean batch) a super-pod job's missed ranks count only where a step could
    win them back (:func:`reachable_misses`).
    """
    usable = usable_nodes(problem, plan) if reachable else None
    out = []
    for job in problem.jobs:
        nodes = plan.nodes[job.index]
        if nodes is None:
            out.append((1, int((job.origin >= 0).sum()), job.index))
            continue
        missed, returned = origin_misses(job, nodes)
        if usable is not None and job.family is Family.SUPERPOD and missed:
            missed = reachable_misses(problem, job, np.asarray(nodes), usable)
        potential = missed + 4 * returned
        out.append((0 if potential else 2, potential, job.index))
    out.sort(key=lambda t: (t[0], -t[1], t[2]))
    return out


def sweep_order(problem: Problem, plan: Plan, *, reachable: bool = False) -> list[int]:
    """The jobs a sweep visits, in order: :func:`job_potential`'s, except that a job
    whose step would re-place more than :data:`LARGE_STEP_RANKS` ranks of multilevel
    jobs (itself and its blockers, :func:`_blockers`) goes after the other jobs of its
    tier (in their order among themselves).  A function of ``plan`` only, so every
    budget visits the same jobs in the same order."""
    ranked = job_potential(problem, plan, reachable=reachable)
    keyed = []
    for position, (tier, _, j) in enumerate(ranked):
        hood = [j, *_blockers(problem, plan, j)] if tier == 0 else [j]
        ranks = sum(problem.jobs[k].tasks for k in hood
                    if problem.jobs[k].family is Family.MULTILEVEL)
        keyed.append((tier, ranks > LARGE_STEP_RANKS, position, j))
    keyed.sort()
    return [j for *_, j in keyed]


def usable_nodes(problem: Problem, plan: Plan) -> np.ndarray:
    """Nodes a step could hand to a batch job: whole free ones and the batch's own."""
    usable = problem.whole_free.copy()
    for nodes in plan.nodes:
        if nodes is not None and len(nodes):
            usable[np.asarray(nodes, dtype=np.int64)] = True
    return usable


def reachable_misses(problem: Problem, job: JobView, nodes: np.ndarray,
                     usable: np.ndarray) -> int:
    """Missed ranks of a placed super-pod job that a step could put on their cached node.

    A rank counts when its cached node is usable (:func:`usable_nodes`, of the job's NPU
    count) and its super-pod group (``sp_block`` consecutive ranks, all in one super
    pod) is cached in one super pod that has room for the whole group; a group whose
    super pod has fewer usable nodes than the group's size must sit elsewhere, and its
    cached nodes earn nothing.  (A3 32,768 nodes, seed 211: the 1,024-rank job with 412
    missed ranks could win back 17 of them, as its 32-rank groups' super pods have 30-31
    usable nodes, while the job after it won back 102.)
    """
    origin = job.origin
    cached = (origin >= 0) & ~job.fault
    missed = cached & (nodes != origin)
    fits = np.zeros(problem.num_nodes, dtype=bool)
    fits[origin[cached]] = True
    fits &= usable & (problem.npus == job.npu_per_task)
    block = job.sp_block
    if block <= 0 or job.tasks % block:
        return int((missed & fits[np.maximum(origin, 0)]).sum())
    count = 0
    pods = problem.super_pod
    room = np.bincount(pods[usable & (pods >= 0) & (problem.npus == job.npu_per_task)],
                       minlength=int(pods.max(initial=-1)) + 1)
    for g in range(job.tasks // block):
        ranks = slice(g * block, (g + 1) * block)
        lost = missed[ranks]
        if not lost.any():
            continue
        group_pods = np.unique(pods[origin[ranks][cached[ranks]]])
        if len(group_pods) != 1 or group_pods[0] < 0 or room[group_pods[0]] < block:
            continue
        count += int((lost & fits[np.maximum(origin[ranks], 0)]).sum())
    return count


def _blockers(problem: Problem, plan: Plan, j: int) -> list[int]:
    """Jobs whose current nodes hold job ``j``'s cached nodes, most held first."""
    job = problem.jobs[j]
    wanted = {int(n) for n in job.origin[(job.origin >= 0) & ~job.fault]}
    if not wanted:
        return []
    held: list[tuple[int, int]] = []
    for k, nodes in enumerate(plan.nodes):
        if k == j or nodes is None:
            continue
        count = sum(1 for n in nodes.tolist() if n in wanted)
        if count:
            held.append((-count, k))
    return [k for _, k in sorted(held)[:MAX_BLOCKERS]]


def wide_hood(problem: Problem, plan: Plan, narrow: list[int], units: np.ndarray) -> list[int]:
    """The jobs a wide step on job ``j = narrow[0]`` re-places: its narrow hood
    ``narrow`` (``j`` and its blockers, :func:`_blockers`) and the jobs whose current
    nodes lie in the units
    (:func:`solver.model.focus.unit_keys`) of ``j``'s missed cached nodes, most nodes
    there first, at most :data:`MAX_WIDE_BLOCKERS` others in all.

    A cached node can be free and still out of reach: a job whose ranks must share one
    super pod (or rack, or multilevel domain) gets back a missed rank's cached node only
    with the room of the rest of its group in that unit, and the jobs holding that room
    hold none of ``j``'s cached nodes, so no narrow step moves them (A3, 4,096 nodes,
    seed 8803: a 160-rank job missed 40 cached nodes, all free, behind a 32-rank job in
    their super pods; the step on both and one more won 11 of them in 0.05 deterministic
    seconds where the whole-batch model needed about 4 s of wall clock).  ``narrow``
    itself when no other job is in those units.
    """
    j = narrow[0]
    job = problem.jobs[j]
    nodes = plan.nodes[j]
    wanted = (job.origin >= 0) & ~job.fault
    if nodes is not None:
        wanted &= np.asarray(nodes) != job.origin
    targets = np.unique(units[job.origin[wanted].astype(np.int64)])
    targets = targets[targets >= 0]
    if not len(targets):
        return narrow
    held: list[tuple[int, int]] = []
    for k, others in enumerate(plan.nodes):
        if k in narrow or others is None or not len(others):
            continue
        checkpoint()
        count = int(np.isin(units[np.asarray(others, dtype=np.int64)], targets).sum())
        if count:
            held.append((-count, k))
    room = max(0, 1 + MAX_WIDE_BLOCKERS - len(narrow))
    return [*narrow, *(k for _, k in sorted(held)[:room])]


def large_neighbourhood_search(
    problem: Problem,
    start: Plan,
    weights: ResolvedWeights,
    *,
    search_end: float,
    deterministic_time: float | None,
    solve_step: StepSolver,
    stopped: threading.Event,
    publish: Callable[[Plan, int], None] | None = None,
    limit: float | None = None,
    wide: bool = False,
) -> LnsResult:
    """Improve ``start`` one neighbourhood at a time until ``search_end``.

    ``deterministic_time`` is the budget in CP-SAT deterministic time (``None``: the
    budget is the wall clock up to ``search_end``).  ``limit`` ends the search once its
    steps have used that much deterministic time, whatever the budget: a later phase then
    takes over (``stopped_by == "capped"``).

    ``solve_step(incumbent, keep, fixed, skip, max_seconds, deterministic_seconds)``
    builds, hints, solves and recovers one step's model within ``deterministic_seconds``
    (always :data:`STEP_DETERMINISTIC_SECONDS`) of deterministic time and before
    ``search_end`` (``max_seconds`` is the wall-clock time left to it), and returns its
    plan (``None`` when it found nothing) and the deterministic time it used; it is
    passed in so that this module holds the search and :mod:`solver.cpsat` the model.
    A step solver that finds no room left to search raises :class:`StepNotStarted`:
    the search ends there.  ``publish(plan, objective)`` is called with every accepted
    (validated) improvement, so a caller that has to give up on the search still has its
    best answer.

    With ``wide`` every step re-places its job's wide hood (:func:`wide_hood`) instead
    of the job and its blockers, and a job whose wide hood is no larger than that is
    passed over (its narrow step is the one a converged narrow search just ran); the
    sweeps go on in the same order until one improves nothing.
    """
    result = LnsResult(start, evaluate(problem, start.as_mapping(), weights).objective)
    try:
        _search(problem, weights, result, search_end, deterministic_time, solve_step, stopped,
                publish, limit, wide)
    except BuildCancelled as exc:  # the deadline fell inside a step: keep what was accepted
        retain(exc)  # its frames hold the step's half-built model: freed after the deadline
        if isinstance(exc, StepNotStarted) and result.log:
            result.log[-1] = replace(result.log[-1], outcome="not started")
        result.notes.append(f"large-neighbourhood search: {result.steps} steps, "
                            f"{result.improved_steps} improved (time up)")
    return result


def _search(problem: Problem, weights: ResolvedWeights, result: LnsResult, search_end: float,
            deterministic_time: float | None, solve_step: StepSolver,
            stopped: threading.Event, publish: Callable[[Plan, int], None] | None,
            limit: float | None, wide: bool) -> None:
    units = unit_keys(problem)
    lean = lean_groups(problem)
    incumbent = result.plan
    best = result.objective
    if not problem.jobs:
        result.stopped_by = "converged"
        return
    det_used = 0.0
    # wide steps already run on the incumbent without improving it (its same model, hint
    # and limits would give the same answer again)
    tried: set[tuple[int, ...]] = set()
    while True:
        improved = False
        order = sweep_order(problem, incumbent, reachable=lean)
        for j in order:
            checkpoint()
            now = time.perf_counter()
            if stopped.is_set() or now >= search_end:
                result.notes.append(f"large-neighbourhood search: {result.steps} steps, "
                                    f"{result.improved_steps} improved (time up)")
                return
            if deterministic_time is not None and det_used >= deterministic_time - 1e-9:
                result.notes.append(f"large-neighbourhood search: {result.steps} steps, "
                                    f"{result.improved_steps} improved (deterministic time "
                                    "used up)")
                return
            if limit is not None and det_used >= limit - 1e-9:
                result.stopped_by = "capped"
                result.notes.append(f"large-neighbourhood search: {result.steps} steps, "
                                    f"{result.improved_steps} improved (its share used up)")
                return
            hood = [j, *_blockers(problem, incumbent, j)]
            if wide:
                narrow = len(hood)
                hood = wide_hood(problem, incumbent, hood, units)
                key = tuple(sorted(hood))  # a step's model depends on the set only
                if len(hood) == narrow or key in tried:
                    continue
                tried.add(key)
            checkpoint()
            fixed = {k: np.asarray(nodes) for k, nodes in enumerate(incumbent.nodes)
                     if k not in hood and nodes is not None}
            skip = frozenset(k for k, nodes in enumerate(incumbent.nodes)
                             if k not in hood and nodes is None)
            keep = neighbourhood_mask(problem, incumbent, hood, units)
            checkpoint()
            # the same deterministic time for every step under every budget: the wall
            # clock only cuts the plan (the step running at the end is stopped there)
            record = StepRecord(j, tuple(hood), STEP_DETERMINISTIC_SECONDS, "nothing", best)
            result.log.append(record)
            candidate, step_det = solve_step(incumbent, keep, fixed, skip,
                                             search_end - time.perf_counter(),
                                             STEP_DETERMINISTIC_SECONDS)
            result.steps += 1
            det_used += step_det
            result.deterministic_time = det_used
            if candidate is None:
                continue
            # evaluate and check (models/, below the cancellation layer) are one stretch
            # each: a checkpoint between them (none after the check: a validated
            # improvement is always kept)
            checkpoint()
            objective = evaluate(problem, candidate.as_mapping(), weights,
                                 tick=checkpoint).objective
            checkpoint()
            if objective <= best:
                result.log[-1] = replace(record, outcome="not better")
                continue
            placement = to_placement(problem, candidate, engine="cpsat", status=Status.FEASIBLE)
            checkpoint()
            violations = check(problem, placement, include_vnpu=False)
            if violations:
                result.log[-1] = replace(record, outcome="invalid")
                result.notes.append(f"BUG: a large-neighbourhood step on job "
                                    f"'{problem.jobs[j].name}' broke a hard constraint "
                                    f"({violations[0]}); step discarded")
                continue
            result.log[-1] = replace(record, outcome="improved", objective=objective)
            tried.clear()
            incumbent, best = candidate, objective
            result.plan, result.objective = incumbent, best
            result.improved_steps += 1
            if publish is not None:
                publish(incumbent, best)
            improved = True
        if not improved:
            result.stopped_by = "converged"
            result.notes.append(f"large-neighbourhood search: {result.steps} steps, "
                                f"{result.improved_steps} improved (no step improves)")
            return


