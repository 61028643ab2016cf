"""A session of the extender: what its plan says about each job, and which tasks it steers.

:class:`Session` is one Volcano scheduling session as the extender sees it, :class:`JobPlan`
what the plan says about one job; the functions here decide, from the plan and the
snapshot, which jobs are steered without the job-level predicate
(:func:`plan_greedy_equal`) and whether a job's pending tasks can be steered rank by rank
(:func:`rank_conflict`).  :class:`~solver.service.extender.core.ExtenderCore` keeps the
sessions and answers the verbs from them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from models.joblist import job_count
from models.kube.build import ClusterImport
from models.scenario import Family, Policy, Scenario, family_of

#: Families the Ascend plugin selects nodes for itself (1e10 scores, ``super-pod-rank``).
SELECTING_FAMILIES = frozenset({Family.SUPERPOD, Family.RACK, Family.MULTILEVEL})


def remember_jobs(session: Session, scenario: Scenario) -> None:
    """Note every pending job's owner (both kinds: ``jobs`` and ``vnpu-jobs``) and the
    session's node and job counts."""
    owners = [(j.name, j.owner_uid) for j in scenario.jobs]
    owners += [(v.name, v.owner_uid) for v in scenario.vnpu_jobs]
    for name, owner in owners:
        if owner:
            session.owners[name] = owner
    session.counts["nodes"] = len(scenario.nodes)
    session.counts["pending-jobs"] = job_count(scenario)


#: The error of a session a newer one replaced before it was planned.
SUPERSEDED = "superseded: a newer session opened before this one was planned"


@dataclass
class JobPlan:
    """What the session's plan says about one job."""

    family: Family
    owner: str | None
    ranks: dict[int, str]
    nodes: frozenset[str]
    steer: bool
    reason: str = ""
    #: ``pin``: :data:`PLANNED_SCORE` on each rank's planned node (and the job-level
    #: predicate); ``confine``: the predicate only, the Ascend plugin orders the ranks
    #: inside the planned node set (its own selection from those candidates)
    mode: str = "pin"
    #: the plan's ranks were replaced by the Ascend plugin's mapping inside the planned set
    adopted: bool = False
    #: ranks whose planned nodes the Ascend plugin orders among themselves by Go map order
    #: (every rank in ``confine`` mode): no score for them, the plugin pins them
    loose: frozenset[int] = frozenset()
    #: the tasks are interchangeable replicas (vNPU jobs): a task takes the next planned
    #: node not yet given to another task, whatever its rank
    replicas: bool = False
    slots: dict[str, str] = field(default_factory=dict)  # task uid -> planned node

    def node_for(self, uid: str, rank: int | None,
                 is_offered: Callable[[str], bool]) -> str | None:
        """The planned node of a task (``None``: the plan has none for it); a replica
        prefers a planned node among the candidates."""
        if not self.replicas:
            return self.ranks.get(rank) if rank is not None else None
        if uid in self.slots:
            return self.slots[uid]
        left = list(self.ranks.values())
        for taken in self.slots.values():
            left.remove(taken)
        if not left:
            return None
        node = next((n for n in left if is_offered(n)), left[0])
        self.slots[uid] = node
        return node


@dataclass
class Session:
    """One Volcano scheduling session as the extender sees it."""

    number: int
    opened: float
    now: int
    ready: threading.Event = field(default_factory=threading.Event)
    jobs: dict[str, JobPlan] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)  # job id -> owner uid
    decided: dict[str, bool] = field(default_factory=dict)  # job id -> steered
    allocated: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    closed: bool = False
    error: str | None = None
    engine: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    #: job id -> (pod name, rank) of each pending task the snapshot shows (``None``: the
    #: snapshot was not read, own-view mode)
    pending_tasks: dict[str, list[tuple[str, int | None]]] | None = None
    #: (job id, rank) -> the task given that rank's planned node (one task per rank)
    rank_holders: dict[tuple[str, int], str] = field(default_factory=dict)
    drops_logged: int = 0
    #: job id -> its PodGroup's ``fault-scheduling`` label (the plugin's rescheduler acts on
    #: the job's faults when it is ``grace`` or ``force``)
    fault_scheduling: dict[str, str] = field(default_factory=dict)
    #: jobs the snapshot's import refused (job id -> reason): Volcano places them
    left_to_volcano: dict[str, str] = field(default_factory=dict)
    #: nodes the snapshot's import left out or moved out of their super pod -> why
    nodes_changed: dict[str, str] = field(default_factory=dict)

    def count(self, key: str) -> None:
        """Add one to a counter of the session."""
        self.counts[key] = self.counts.get(key, 0) + 1


def policy_family(policy: str) -> Family:
    try:
        return family_of(Policy(policy))
    except ValueError:  # not a policy the contract knows: never a selecting family
        return Family.ORDINARY


def placement_ranks(placement: Any) -> dict[str, dict[int, str]]:
    out: dict[str, dict[int, str]] = {}
    for job in placement.jobs:
        if job.placed:
            out[job.name] = {int(rank): node for rank, node in job.ranks.items()}
    return out


def pending_tasks_of(importer: ClusterImport) -> dict[str, list[tuple[str, int | None]]]:
    """Job id -> (pod name, rank) of every pending pod of a Volcano job in the snapshot,
    every task role counted (a pod that requests no NPU is asked about too)."""
    out: dict[str, list[tuple[str, int | None]]] = {}
    for pod in importer.pods.values():
        if pod.group and not pod.node and pod.phase not in ("Failed", "Succeeded"):
            out.setdefault(f"{pod.namespace}/{pod.group}", []).append(
                (f"{pod.namespace}/{pod.name}", pod.rank))
    return out


def task_key(task: Any, uid: str) -> str:
    """What tells one task from another: its UID, else its pod's namespace/name."""
    if uid:
        return uid
    pod = task.get("Pod") if isinstance(task, dict) else None
    meta = pod.get("metadata") if isinstance(pod, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        return ""
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


def rank_conflict(plan: JobPlan, tasks: list[tuple[str, int | None]]) -> str:
    """Why the pending tasks of a job cannot be steered rank by rank ("" when they can):
    each must carry a rank of the plan, and no two the same one."""
    holder: dict[int, str] = {}
    for pod, rank in sorted(tasks, key=lambda t: t[0]):
        if rank is None:
            return (f"pending task {pod} carries no rank (hccl/rankIndex, StatefulSet "
                    "ordinal or VC_TASK_INDEX)")
        if rank in holder:
            return (f"pending tasks {holder[rank]} and {pod} both carry rank {rank} (a "
                    "rank of each task role?): steering would send both to one planned node")
        if rank not in plan.ranks:
            return (f"pending task {pod} carries rank {rank}, which the plan does not "
                    "place (a rank beyond the gang, or one that runs already)")
        holder[rank] = pod
    return ""


def plan_greedy_equal(session: Session, scenario: Scenario,
                       planned: dict[str, dict[int, str]],
                       stock_ranks: dict[str, dict[int, str]], selecting: bool) -> None:
    """Which jobs to steer without the job-level predicate (``predicateVerb`` unset).

    The Ascend plugin then selects the nodes of a super-pod / 950 / multilevel job from
    every candidate (the greedy port reproduces it), on the state the earlier jobs leave.
    A job of those families is steered when its plan equals that selection and every
    earlier job ends where greedy put it: such jobs that are not steered get the plugin's
    own (greedy's) placement, so only a steered job of another family whose plan differs
    from greedy's moves the later selections away from greedy's.
    """
    consistent = True
    for job in scenario.jobs:
        family = policy_family(job.policy)
        ranks = planned.get(job.name)
        if ranks is None:
            continue  # abstains: the plugin places it as greedy does
        greedy_nodes = sorted(stock_ranks.get(job.name, {}).values())
        steer, reason = True, ""
        if family in SELECTING_FAMILIES:
            if not consistent:
                steer, reason = False, ("an earlier steered job leaves other free nodes "
                                        "than the Ascend plugin's selection assumes")
            elif sorted(ranks.values()) != greedy_nodes:
                steer, reason = False, ("the plan differs from the Ascend plugin's own "
                                        "selection")
        elif selecting and sorted(ranks.values()) != greedy_nodes:
            consistent = False
        session.jobs[job.name] = JobPlan(family, job.owner_uid, ranks,
                                         frozenset(ranks.values()), steer, reason)
