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
  their current and cached nodes and a few spares per class.
* **Step**: build that small model, hint it with the incumbent, solve it; accept the
  answer when :func:`models.objective.evaluate` says it is better and the independent
  validator passes.

Jobs are visited by potential (missed origin hits, fault returns, unplaced jobs first),
sweep after sweep, until the budget is spent, a sweep improves nothing (``converged``) or
the search reached its own ``limit`` (``capped``).  With a deterministic time ``D`` every
step gets the same :data:`STEP_DETERMINISTIC_SECONDS` of CP-SAT's deterministic time,
whatever ``D`` is, and a step starts while less than ``D`` is used: the steps run under
``D`` are therefore the first steps of those run under any larger budget (a prefix), and
the answer under a larger budget is at least as good (the last step may run up to one
step's time past ``D``).  The result does not depend on machine load.

The answer is a valid placement of the whole problem, never worse than the warm start;
it proves nothing, so its status is ``feasible`` and it carries no bound.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from models.check import check
from models.compiled import Problem
from models.objective import ResolvedWeights, evaluate
from models.placement import Status
from models.plan import Plan, to_placement
from solver.model.cancel import BuildCancelled, checkpoint, retain
from solver.model.focus import neighbourhood_mask, origin_misses, unit_keys

#: Most other jobs moved together with the job a step is about.
MAX_BLOCKERS = 2
#: A step may use up to 1/STEP_SHARE of the time left.
STEP_SHARE = 3
#: Shortest wall-clock search of one step (seconds).
MIN_STEP_SECONDS = 0.03
#: CP-SAT deterministic time of one step under a deterministic budget, the same for every
#: budget (so that a longer budget repeats a shorter one's steps exactly, then goes on).
STEP_DETERMINISTIC_SECONDS = 0.25


StepSolver = Callable[
    [Plan, np.ndarray, dict[int, np.ndarray], frozenset[int], float, float | None],
    tuple[Plan | None, float],
]


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


def job_potential(problem: Problem, plan: Plan) -> list[tuple[int, int, int]]:
    """``(tier, potential, job)`` per job, in visiting order.

    Tier 0: placed jobs that miss cached nodes or return fault ranks (by how many);
    tier 1: unplaced jobs (placing one needs room that is rarely there); tier 2: the
    rest (only fragment, reserve and health can still improve).
    """
    out = []
    for job in problem.jobs:
        nodes = plan.nodes[job.index]
        if nodes is None:
            out.append((1, int((job.origin >= 0).sum()), job.index))
            continue
        missed, returned = origin_misses(job, nodes)
        potential = missed + 4 * returned
        out.append((0 if potential else 2, potential, job.index))
    out.sort(key=lambda t: (t[0], -t[1], t[2]))
    return out


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
) -> LnsResult:
    """Improve ``start`` one neighbourhood at a time until ``search_end``.

    ``limit`` ends the search once it has used that much deterministic time (under a
    deterministic budget) or that many wall-clock seconds (otherwise), whatever the
    budget: a later phase then takes over (``stopped_by == "capped"``).

    ``solve_step(incumbent, keep, fixed, skip, max_seconds, deterministic_seconds)``
    builds, hints, solves and recovers one step's model and returns its plan (``None``
    when it found nothing) and the deterministic time it used; it is passed in so that
    this module holds the search and :mod:`solver.cpsat` the model.  ``publish(plan,
    objective)`` is called with every accepted (validated) improvement, so a caller that
    has to give up on the search still has its best answer.
    """
    result = LnsResult(start, evaluate(problem, start.as_mapping(), weights).objective)
    try:
        _search(problem, weights, result, search_end, deterministic_time, solve_step, stopped,
                publish, limit)
    except BuildCancelled as exc:  # the deadline fell inside a step: keep what was accepted
        retain(exc)  # its frames hold the step's half-built model: freed after the deadline
        result.notes.append(f"large-neighbourhood search: {result.steps} steps, "
                            f"{result.improved_steps} improved (time up)")
    return result


def _search(problem: Problem, weights: ResolvedWeights, result: LnsResult, search_end: float,
            deterministic_time: float | None, solve_step: StepSolver,
            stopped: threading.Event, publish: Callable[[Plan, int], None] | None,
            limit: float | None) -> None:
    units = unit_keys(problem)
    incumbent = result.plan
    best = result.objective
    if not problem.jobs:
        result.stopped_by = "converged"
        return
    per_step_det = STEP_DETERMINISTIC_SECONDS if deterministic_time is not None else None
    det_used = 0.0
    began = time.perf_counter()
    while True:
        improved = False
        order = [j for _, _, j in job_potential(problem, incumbent)]
        for position, j in enumerate(order):
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
            spent = det_used if deterministic_time is not None else now - began
            if limit is not None and spent >= limit - 1e-9:
                result.stopped_by = "capped"
                result.notes.append(f"large-neighbourhood search: {result.steps} steps, "
                                    f"{result.improved_steps} improved (its share used up)")
                return
            hood = [j, *_blockers(problem, incumbent, j)]
            fixed = {k: np.asarray(nodes) for k, nodes in enumerate(incumbent.nodes)
                     if k not in hood and nodes is not None}
            skip = frozenset(k for k, nodes in enumerate(incumbent.nodes)
                             if k not in hood and nodes is None)
            keep = neighbourhood_mask(problem, incumbent, hood, units)
            # the first steps matter most: each gets a share of what is left
            left = min(len(order) - position, STEP_SHARE)
            max_seconds = max(MIN_STEP_SECONDS, (search_end - time.perf_counter()) / left)
            candidate, step_det = solve_step(incumbent, keep, fixed, skip, max_seconds,
                                             per_step_det)
            result.steps += 1
            det_used += step_det
            result.deterministic_time = det_used
            if candidate is None:
                continue
            objective = evaluate(problem, candidate.as_mapping(), weights).objective
            if objective <= best:
                continue
            placement = to_placement(problem, candidate, engine="cpsat", status=Status.FEASIBLE)
            violations = check(problem, placement, include_vnpu=False)
            if violations:
                result.notes.append(f"BUG: a large-neighbourhood step on job "
                                    f"'{problem.jobs[j].name}' broke a hard constraint "
                                    f"({violations[0]}); step discarded")
                continue
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


