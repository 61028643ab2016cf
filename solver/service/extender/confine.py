"""How the extender steers a super-pod / 950 / multilevel job inside its planned set.

With Volcano's ``predicateVerb`` set, the job-level predicate confines the candidates of
every task of such a job to its planned nodes, so the Ascend plugin selects inside that
set.  :func:`confine_plan` decides, from what the plugin's code does with those
candidates (:mod:`solver.service.extender.steering`), whether the job is steered on the
plan, steered on the plugin's mapping (adopted), only confined, or left to the plugin
with the reason.
"""

from __future__ import annotations

from models.scenario import Family, Health, Job, LevelConfig, Node
from models.validation import parse_affinity_config
from solver.service.extender.session import JobPlan
from solver.service.extender.steering import (
    PluginChoice,
    fault_nodes,
    multilevel_regroup,
    plugin_pins,
    sort_by_cached_rank,
    superpod_fault_choice,
)


def confine_plan(plan: JobPlan, job: Job, origins: dict[tuple[str, int], str],
                 prefer: bool, cached: dict[int, str] | None,
                 nodes: dict[str, Node] | None = None,
                 fault_scheduling: str | None = None,
                 levels: dict[str, dict[str, LevelConfig]] | None = None) -> None:
    """Steer a super-pod / 950 / multilevel job inside its planned set, adopt the
    plugin's mapping, or leave it to the plugin (:meth:`ExtenderCore._plan_confined`).  ``nodes``:
    the session's nodes by name; ``cached``: the plugin's cached selection of the job's
    owner (rank → node), if any (a cached node missing or unhealthy there makes the job
    a fault job of the plugin's rescheduler when ``fault_scheduling``, its
    ``fault-scheduling`` label, is ``grace`` or ``force``)."""
    owner = job.owner_uid or ""
    faulty = set(job.fault_ranks)
    hits = {r for r, n in plan.ranks.items()
            if r not in faulty and origins.get((owner, r)) == n}
    pins, why = plugin_pins(job, plan.ranks, cached, prefer)
    if pins is not None:
        take_choice(plan, PluginChoice(pins=pins), hits,
                          "the Ascend plugin keeps its cached selection")
        return
    choice = reselection(plan, job, cached, prefer, nodes, fault_scheduling,
                               levels or {})
    if choice is not None and not choice.why:
        take_choice(plan, choice, hits, "the Ascend plugin's reselection")
        return
    if choice is not None:
        why = choice.why
    if job.running_ranks:
        plan.steer, plan.reason = False, (
            f"the Ascend plugin selects this partly running job afresh ({why}), and "
            f"a selection from the {len(plan.nodes)} planned node(s) alone cannot hold "
            f"its {job.tasks} tasks")
    elif hits:
        plan.steer, plan.reason = False, (
            f"the Ascend plugin selects this job afresh ({why}) and orders the ranks "
            f"inside a physical super pod by Go map order: the plan's {len(hits)} origin "
            "hit(s) would not be kept")
    else:
        plan.mode, plan.loose = "confine", frozenset(plan.ranks)

def reselection(plan: JobPlan, job: Job, cached: dict[int, str] | None, prefer: bool,
                 nodes: dict[str, Node] | None, fault_scheduling: str | None,
                 levels: dict[str, dict[str, LevelConfig]]) -> PluginChoice | None:
    """The plugin's reselection inside the planned set when its code fixes it: the
    fault-job path of the A3 / 850 handler (:func:`superpod_fault_choice`), the
    multilevel handler's selection from history (:func:`sort_by_cached_rank`); the 950
    handler's job-level fault path selects afresh (``why`` says so).  ``None``: a fresh
    selection (see :func:`confine_plan`).

    The multilevel order holds while the plugin's reselection keeps the plan's level-1
    groups under their indices (:func:`multilevel_regroup`)."""
    if not cached or nodes is None:
        return None
    unusable = {n for n in cached.values()
                if n not in nodes or nodes[n].health is Health.UNHEALTHY}
    faulty = fault_nodes(cached, unusable, fault_scheduling)
    if plan.family is Family.MULTILEVEL and (faulty or prefer):
        # resolveSuperPodsForReschedule: the fault job's or the job's own history
        sizes, _ = parse_affinity_config(job.affinity_config)
        if not sizes:
            return None
        why = multilevel_regroup(plan.ranks, cached, sizes[0],
                                 {name: node.labels for name, node in nodes.items()},
                                 levels)
        if why:
            return PluginChoice(why=why)
        return PluginChoice(pins=sort_by_cached_rank(plan.ranks, cached, sizes[0]))
    if not faulty:
        return None
    if plan.family is Family.RACK:
        return PluginChoice(why=(
            "the 950 handler's selectNodesForFaultJob reselects only a pod-level "
            "rescheduling; this job-level one is selected afresh (selectNodesForJob) in "
            "Go map order inside a rack"))
    if job.running_ranks:
        return PluginChoice(why=(
            "a pod-level fault rescheduling (selectNodeForPodLevelRescheduling) takes a "
            "replacement node in Go map order"))
    return superpod_fault_choice(job, plan.ranks, cached, faulty,
                                 {name: node.super_pod_id for name, node in nodes.items()})

def take_choice(plan: JobPlan, choice: PluginChoice, hits: set[int], what: str) -> None:
    """Steer ``plan`` on the plugin's pins (adopted when they differ from the plan) if
    they keep every origin hit of the plan, else leave the job to the plugin."""
    kept = {r for r in hits if r not in choice.loose
            and choice.pins.get(r, plan.ranks[r]) == plan.ranks[r]}
    if len(kept) < len(hits):
        moved = sum(1 for r, n in choice.pins.items() if plan.ranks.get(r) != n)
        ordered = (f"orders {len(choice.loose)} by Go map order "
                   if choice.loose else "")
        plan.steer, plan.reason = False, (
            f"{what} puts {moved} rank(s) on other planned nodes than the plan, "
            f"{ordered}and keeps {len(kept)} of the plan's {len(hits)} origin hit(s)")
        return
    ranks = {**plan.ranks, **choice.pins}
    if ranks != plan.ranks:
        plan.ranks, plan.adopted = ranks, True
    plan.loose = choice.loose
