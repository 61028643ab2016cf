"""Reasons for jobs the solver leaves unplaced: name the binding constraint.

A job is either impossible on its own (no super pod with spBlock free nodes, not enough
tpBlock windows, no level domain with enough nodes, too few free chips) or it would fit
alone and the capacity went to other jobs of the batch.
"""

from __future__ import annotations

from models.check import running_rank_reason
from models.compiled import JobView, Problem
from models.plan import Plan
from solver.families import solver_family
from solver.model.podscope import pod_scope


def _alone(problem: Problem, job: JobView) -> str | None:
    """Why ``job`` cannot be placed even on the empty cluster, or ``None`` if it can."""
    if not job.rules.grouped or not job.whole_node:
        usable = (problem.health != 2) & (problem.free >= job.npu_per_task)
        if job.rules.in_super_pod:
            usable &= problem.super_pod >= 0
        if job.rules.in_rack:
            usable &= problem.rack >= 0
        slots = int((problem.free[usable] // job.npu_per_task).sum())
        if slots < job.tasks:
            return (f"only {slots} tasks of {job.npu_per_task} NPUs fit on the free chips of "
                    f"usable nodes, {job.tasks} needed")
        return None
    return solver_family(job.family).alone_reason(problem, job)


def _pod_level(problem: Problem, job: JobView) -> str:
    """Why partly running job ``job`` is not completed."""
    pending = int(job.to_place.sum())
    head = f"pod-level rescheduling of job '{job.name}'"
    if not job.rules.grouped or not job.whole_node:
        return (f"{head}: its {pending} pending ranks do not fit the free chips of usable "
                "nodes, or that room went to other jobs of the batch")
    broken = running_rank_reason(problem, job.index)
    if broken is not None:
        return broken
    scope = pod_scope(problem, job)
    if scope is None:
        return (f"{head}: its running ranks do not sit in one domain per group (super pod "
                "per block, rack per window, one topotree and level domain per level "
                f"group), so its {pending} pending ranks cannot complete it")
    where = "the domains its running ranks hold"
    if scope.only or scope.only_within:
        where += (f" and its stage allows (pending-sessions {job.pending_sessions}: same "
                  f"{'rack' if scope.only_within else 'super pod'} as the old nodes)")
    room = int(scope.mask.sum())
    if room < pending:
        return (f"{head}: {pending} pending rank{'s' if pending != 1 else ''}, but {where} "
                f"have {room} free whole {job.npu_per_task}-NPU nodes")
    return (f"{head}: its {pending} pending ranks do not fit group by group into {where}, "
            "or that room went to other jobs of the batch")


def explain_unplaced(problem: Problem, plan: Plan, j: int) -> str:
    """A reason naming the binding constraint for unplaced job ``j`` of ``plan``."""
    job = problem.jobs[j]
    if job.partly_running:
        return _pod_level(problem, job)
    alone = _alone(problem, job)
    if alone is not None:
        return alone
    placed = [problem.jobs[k] for k, nodes in enumerate(plan.nodes) if nodes is not None]
    higher = [other.name for other in placed if other.priority > job.priority]
    others = [other.name for other in placed if other.priority <= job.priority]
    parts = []
    if higher:
        parts.append(f"higher-priority jobs {', '.join(higher[:5])}")
    if others:
        parts.append(f"jobs {', '.join(others[:5])} (placing them scores higher)")
    taken = " and ".join(parts) if parts else "other jobs"
    return (f"it would fit on the cluster alone, but the capacity it needs is taken by "
            f"{taken}")


def fill_reasons(problem: Problem, plan: Plan) -> Plan:
    """Give every unplaced job of ``plan`` a reason (in place) and return the plan."""
    for j, nodes in enumerate(plan.nodes):
        if nodes is None and not plan.reasons[j]:
            plan.reasons[j] = explain_unplaced(problem, plan, j)
    return plan
