"""Origin-first construction for multilevel jobs (a warm start, not an upstream strategy).

Greedy places multilevel jobs in queue order (priority first), so a large job without
origins that comes early takes the level domains that later jobs' cached nodes lie in
(``multilevel-n8192-batch11-d4-s0``: a 512-rank job of priority 10 without history goes
second and leaves 99 of 435 reachable origins to one 512-rank job, 62 of 432 to another).
This pass re-places every multilevel job with upstream's own strategy
(:func:`heuristics.multilevel.place_multilevel`) in another order: jobs with the most
reachable origins first, jobs without any last (queue order among equals).  While a job is
placed, the cached nodes that jobs still to come want are held back (the job is placed on
the nodes without them when that fails).  Two passes are built, with and without holding
back, and the caller keeps the best by the objective of these and its base plan.  Every
job placed by a pass gets its ranks reordered within its layout
(:mod:`heuristics.multilevel.ranks`) when that returns more ranks to their cached node;
:func:`relabel_plan` does only that to a plan's multilevel jobs.  A job with cached
nodes also gets an origin-guided layout (:mod:`heuristics.multilevel.guided`: every group
to the domain holding most of its cached nodes), kept when it has more hits.

Jobs of other families and partly running jobs keep their base answer.  Deterministic: no
randomness, every order has a total tie-break.
"""

from __future__ import annotations

import time

import numpy as np

from heuristics.multilevel import place_multilevel
from heuristics.multilevel.guided import guided_layout
from heuristics.multilevel.ranks import relabel_ranks
from heuristics.state import ClusterState
from models.compiled import JobView, Problem
from models.errors import OutOfTime
from models.plan import Plan


def _reachable(problem: Problem, j: int, free: np.ndarray) -> int:
    job = problem.jobs[j]
    origin = job.origin[(job.origin >= 0) & ~job.fault]
    if not job.prefer_previous or len(origin) == 0:
        return 0
    return int((free[origin] == problem.npus[origin]).sum())


def multilevel_order(problem: Problem, redo: list[int], free: np.ndarray,
                     smallest_first: bool = False) -> list[int]:
    """``redo`` with the most reachable origins first (queue order among equals); with
    ``smallest_first``, the jobs of fewest ranks first, equal sizes in that order."""
    position = {j: k for k, j in enumerate(problem.queue)}
    if smallest_first:
        return sorted(redo, key=lambda j: (problem.jobs[j].tasks, -_reachable(problem, j, free),
                                           position[j]))
    return sorted(redo, key=lambda j: (-_reachable(problem, j, free), position[j]))


def _hits_and_returns(job: JobView, nodes: np.ndarray) -> tuple[int, int]:
    on = (np.asarray(nodes) == job.origin) & (job.origin >= 0)
    return int((on & ~job.fault).sum()) if job.prefer_previous else 0, int((on & job.fault).sum())


def _score(job: JobView, nodes: np.ndarray) -> tuple[int, int]:
    hits, returns = _hits_and_returns(job, nodes)
    return hits, -returns


def better_ranks(job: JobView, nodes: np.ndarray) -> np.ndarray:
    """``nodes`` in :func:`heuristics.multilevel.ranks.relabel_ranks`' order when that
    gives more hits and no more fault returns (or as many hits and fewer returns)."""
    other = relabel_ranks(job, nodes)
    if other is nodes:
        return nodes
    hits, returns = _hits_and_returns(job, nodes)
    hits2, returns2 = _hits_and_returns(job, other)
    if (hits2 >= hits and returns2 <= returns) and (hits2, -returns2) != (hits, -returns):
        return other
    return nodes


def relabel_plan(problem: Problem, base: Plan) -> Plan:
    """``base`` with every placed multilevel job's ranks reordered by :func:`better_ranks`
    (the same nodes)."""
    plan = base.copy()
    for j, nodes in enumerate(plan.nodes):
        job = problem.jobs[j]
        if nodes is not None and job.rules.in_tree and not job.partly_running:
            plan.nodes[j] = better_ranks(job, nodes)
    return plan


def multilevel_pass(problem: Problem, base: Plan, hold_back: bool,
                    deadline: float | None = None, relabel: bool = True,
                    guided: bool = True, smallest_first: bool = False) -> Plan:
    """Re-place the multilevel jobs of ``base`` origin-first (see the module docstring),
    each job's ranks reordered by :func:`better_ranks` unless ``relabel`` is off; with
    ``guided`` a job takes :func:`heuristics.multilevel.guided.guided_layout` instead of
    upstream's layout when that has more hits (or as many and fewer fault returns);
    ``smallest_first`` places the jobs of fewest ranks first (:func:`multilevel_order`)."""
    redo = [j for j in problem.queue
            if problem.jobs[j].rules.in_tree and not problem.jobs[j].partly_running]
    plan = base.copy()
    state = ClusterState.initial(problem)
    for j, nodes in enumerate(plan.nodes):
        if nodes is not None and j not in redo:
            state.commit(problem.jobs[j].placed_nodes(nodes), problem.jobs[j].npu_per_task)
    order = multilevel_order(problem, redo, state.free, smallest_first)
    wants: dict[int, np.ndarray] = {}
    for j in order:
        job = problem.jobs[j]
        wants[j] = np.unique(job.origin[(job.origin >= 0) & ~job.fault]).astype(np.int64) \
            if job.prefer_previous else np.zeros(0, dtype=np.int64)
    for k, j in enumerate(order):
        if deadline is not None and time.perf_counter() > deadline:
            raise OutOfTime
        job = problem.jobs[j]
        outcome = None
        later = [wants[i] for i in order[k + 1:] if len(wants[i])]
        trial = state
        if hold_back and later:
            held = np.setdiff1d(np.concatenate(later), wants[j])
            trial = state.copy()
            trial.free[held] = 0
            outcome = place_multilevel(problem, j, trial)
            if outcome.nodes is None:
                outcome = None
        if outcome is None:
            outcome = place_multilevel(problem, j, state)
        chosen = outcome.nodes
        if chosen is not None and relabel:
            chosen = better_ranks(job, chosen)
        if guided:
            if deadline is not None and time.perf_counter() > deadline:
                raise OutOfTime
            other = None
            if hold_back and later:
                other = guided_layout(problem, job, trial, deadline)
            if other is None:
                other = guided_layout(problem, job, state, deadline)
            if other is not None and (chosen is None or _score(job, other) > _score(job, chosen)):
                chosen = other
        if chosen is None:
            plan.nodes[j] = None
            plan.reasons[j] = outcome.reason or "not placed by the multilevel origin-first pass"
            continue
        plan.nodes[j] = chosen
        plan.reasons[j] = None
        state.commit(job.placed_nodes(chosen), job.npu_per_task)
        state.placed[j] = chosen
    return plan
