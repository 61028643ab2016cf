"""The greedy batch driver: jobs in queue order, each all-or-nothing.

Jobs are taken in Volcano's allocate order (priority descending, then file order).  Each
job's strategy answers on the current state; the job commits as a whole or not at all,
and later jobs see the nodes earlier jobs took.
"""

from __future__ import annotations

from heuristics.base import JobOutcome, Strategy
from heuristics.multilevel import place_multilevel
from heuristics.ordinary import place_ordinary
from heuristics.podlevel import with_paths
from heuristics.rack import place_rack
from heuristics.state import ClusterState
from heuristics.superpod import place_superpod
from models.compiled import Problem
from models.plan import Plan
from models.scenario import Family


class EngineNotAvailable(Exception):
    """The greedy strategy for a family is not implemented yet."""


def _registry() -> dict[Family, Strategy]:
    # with_paths routes partly running jobs to the pod-level paths and inference jobs to
    # the infer-service / MindIE paths (issue 24); other jobs go to the family strategy
    return {
        Family.ORDINARY: with_paths(place_ordinary),
        Family.SUPERPOD: with_paths(place_superpod),
        Family.RACK: with_paths(place_rack),
        Family.MULTILEVEL: with_paths(place_multilevel),
    }


def available_families() -> set[Family]:
    """Families whose greedy strategy exists."""
    return set(_registry())


def place_job(problem: Problem, j: int, state: ClusterState) -> JobOutcome:
    """Run the greedy strategy of job ``j``'s family on ``state`` (without committing)."""
    job = problem.jobs[j]
    strategy = _registry().get(job.family)
    if strategy is None:
        raise EngineNotAvailable(
            f"the greedy engine does not support {job.family.value} jobs yet "
            f"(job '{job.name}', policy {job.policy.value})"
        )
    return strategy(problem, j, state)


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
    """
    registry = _registry()
    missing = sorted({problem.jobs[j].family.value for j in problem.queue
                      if problem.jobs[j].family not in registry})
    if missing:
        raise EngineNotAvailable(
            f"the greedy engine does not support {', '.join(missing)} jobs yet"
        )
    initial = state.copy() if state is not None else ClusterState.initial(problem)
    state = initial.copy()
    plan = Plan.empty(problem)
    placed_before: list[str] = []
    for j in problem.queue:
        job = problem.jobs[j]
        outcome = registry[job.family](problem, j, state)
        if outcome.nodes is None:
            reason = outcome.reason or "no placement found"
            if placed_before and registry[job.family](problem, j, initial).nodes is not None:
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
