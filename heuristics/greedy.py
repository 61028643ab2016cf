"""The greedy batch driver: jobs in queue order, each all-or-nothing.

Jobs are taken in Volcano's allocate order (priority descending, then file order).  Each
job's strategy answers on the current state; the job commits as a whole or not at all,
and later jobs see the nodes earlier jobs took.
"""

from __future__ import annotations

from heuristics.base import JobOutcome, Strategy
from heuristics.families import GreedyFamily, greedy_family
from heuristics.state import ClusterState
from models.compiled import Problem
from models.documents import paused_gc
from models.plan import Plan


def _with_paths(hooks: GreedyFamily) -> Strategy:
    """The family's strategy with partly running jobs sent to
    :func:`heuristics.podlevel.place_pod_level` and inference jobs to the infer-service /
    MindIE paths of :mod:`heuristics.inference` when the family takes them (the
    dispatcher of §2.3 and §2.5.6); those modules are imported when such a job comes."""
    strategy = hooks.load_strategy()

    def place(problem: Problem, j: int, state: ClusterState) -> JobOutcome:
        job = problem.jobs[j]
        if job.partly_running:
            from heuristics.podlevel import place_pod_level

            return place_pod_level(problem, j, state)
        if job.inferserviceid is not None and hooks.infer_service:
            from heuristics.inference import place_infer_service

            return place_infer_service(problem, j, state)
        if job.mindie and hooks.mindie:
            from heuristics.inference import place_mindie

            return place_mindie(problem, j, state)
        return strategy(problem, j, state)

    return place


def place_job(problem: Problem, j: int, state: ClusterState) -> JobOutcome:
    """Run the greedy strategy of job ``j``'s family on ``state`` (without committing)."""
    return _with_paths(greedy_family(problem.jobs[j].family))(problem, j, state)


def greedy_plan(problem: Problem, state: ClusterState | None = None) -> Plan:
    """Place every pending job of ``problem`` greedily, in queue order.

    Parameters
    ----------
    problem
        The compiled scenario.
    state
        Starting state (default: the scenario's free chips).

    Returns
    -------
    Plan
        Node per rank for each placed job and a reason for each unplaced one.

    Notes
    -----
    Runs with Python's cyclic garbage collector paused
    (:func:`models.documents.paused_gc`): at 65,536 nodes the problem's scenario is about
    a million objects, and a full collection started by greedy's own allocations walks
    them all (up to half of greedy's time on such a cluster).
    """
    with paused_gc():
        return _greedy_plan(problem, state)


def _greedy_plan(problem: Problem, state: ClusterState | None) -> Plan:
    """:func:`greedy_plan`, the garbage collector paused."""
    strategies = {family: _with_paths(greedy_family(family))
                  for family in {problem.jobs[j].family for j in problem.queue}}
    initial = state.copy() if state is not None else ClusterState.initial(problem)
    state = initial.copy()
    plan = Plan.empty(problem)
    placed_before: list[str] = []
    for j in problem.queue:
        job = problem.jobs[j]
        outcome = strategies[job.family](problem, j, state)
        if outcome.nodes is None:
            reason = outcome.reason or "no placement found"
            if placed_before and strategies[job.family](problem, j, initial).nodes is not None:
                shown = ", ".join(placed_before[:5]) + (" ..." if len(placed_before) > 5 else "")
                reason += (f" (capacity taken by jobs earlier in the queue: {shown}; "
                           "alone on the cluster it would fit)")
            plan.reasons[j] = reason
            continue
        placed_before.append(job.name)
        state.commit(job.placed_nodes(outcome.nodes), job.npu_per_task)
        state.placed[j] = outcome.nodes
        plan.nodes[j] = outcome.nodes
    return plan
