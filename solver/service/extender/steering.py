"""What the Ascend plugin does with a super-pod / 950 / multilevel job whose candidates the
extender's job-level predicate confined to the planned nodes (:func:`plugin_pins`), read
from the plugin's code (mind-cluster commit 22bb3d98, ``component/ascend-for-volcano``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from models.scenario import (
    DEFAULT_TOPOTREE,
    TOPOTREE_LABEL,
    Family,
    Job,
    LevelConfig,
    Policy,
    family_of,
)


def _multilevel(job: Job) -> bool:
    try:
        return family_of(Policy(job.policy)) is Family.MULTILEVEL
    except ValueError:
        return False


def plugin_pins(job: Job, ranks: dict[int, str], cached: dict[int, str] | None,
                prefer_previous: bool) -> tuple[dict[int, str] | None, str]:
    """The node the Ascend plugin pins each pending rank of ``job`` to when the job-level
    predicate has confined its candidates to the planned nodes ``ranks.values()``.

    Follows the plugin's ``ScoreBestNPUNodes`` (A3 ``ascend910a3/superpod/frame.go``, 850
    ``policy/chip8node8sp/frame.go``, 950 ``policy/chip8node8ra64sp/frame.go``, multilevel
    ``policy/multilevelscheduling/frame.go``; mind-cluster commit 22bb3d98): at the job's
    first scored task ``VerifyCachedSuperPods`` (``plugin/job.go``) keeps the job's cached
    selection ``job.SuperPods`` (carried from the previous session) when
    ``prefer-previous-node`` is on (multilevel: always) and every cached node either runs
    a task of the job or is a candidate; the ranks are then pinned by
    ``scoreNodeForReadyJob`` to the cached nodes.  Otherwise the plugin selects afresh from
    the candidates: ``getSuperPodTop`` groups them by physical super pod in a Go map, so
    which planned node of a physical super pod gets which rank is Go's map order, not
    something the plan can name.

    Parameters
    ----------
    job
        The pending job (``running-ranks``: the ranks still running).
    ranks
        The plan: pending rank -> node.
    cached
        The plugin's cached selection as rank -> node (where the job's ranks were last
        allocated), ``None`` when the job has none.
    prefer_previous
        The scheduler's ``prefer-previous-node``.

    Returns
    -------
    tuple
        ``(pins, "")`` when the cached selection is kept (``pins``: pending rank -> node),
        else ``(None, why)``: why the plugin selects afresh.
    """
    if not cached:
        return None, "it has no cached selection of the job"
    if not prefer_previous and not _multilevel(job):
        return None, "prefer-previous-node is off"
    running = set(job.running_ranks.values())
    candidates = set(ranks.values())
    stale = sorted({n for n in cached.values() if n not in running and n not in candidates})
    if stale:
        return None, (f"its cached selection names node {stale[0]}, neither a candidate nor "
                      "running the job")
    if any(rank not in cached or cached[rank] not in candidates for rank in ranks):
        return None, "its cached selection does not cover every pending rank"
    return {rank: cached[rank] for rank in ranks}, ""


#: ``fault-scheduling`` values under which the plugin's rescheduler keeps a fault job
#: (``updateNewFaultJobAttr``: ``off``, the default, skips the job).
FAULT_SCHEDULING_ON = frozenset({"grace", "force"})


@dataclass
class PluginChoice:
    """What the Ascend plugin's reselection pins inside the planned set.

    ``pins``: rank -> node for the ranks whose node the plugin's code fixes; ``loose``: ranks
    whose node *set* it fixes (the planned nodes of those ranks) but whose order among them
    is Go's map order; ``why``: non-empty when the plugin's choice cannot be told in advance
    (then ``pins`` and ``loose`` are empty).
    """

    pins: dict[int, str] = field(default_factory=dict)
    loose: frozenset[int] = frozenset()
    why: str = ""


def fault_nodes(cached: dict[int, str] | None, unusable: set[str],
                fault_scheduling: str | None) -> set[str]:
    """The nodes that make a job a fault job of the plugin's rescheduler (its cached
    selection's nodes that are now unusable: NotReady, unhealthy or gone), empty when the
    job is none (no cached selection, or its ``fault-scheduling`` label not ``grace`` /
    ``force``: ``updateNewFaultJobAttr`` skips it)."""
    if not cached or fault_scheduling not in FAULT_SCHEDULING_ON:
        return set()
    return {node for node in cached.values() if node in unusable}


def superpod_fault_choice(job: Job, ranks: dict[int, str], original: dict[int, str],
                          faulty: set[str], super_pod_of: dict[str, int | None]
                          ) -> PluginChoice:
    """What the A3 / 850 handler selects for a fault job whose candidates are the planned
    nodes ``ranks.values()`` (every rank pending: job-level rescheduling).

    Follows ``selectSuperPodForJob`` → ``selectNodesForFaultJob``
    (``ascend910a3/superpod/frame.go``; the same code in ``policy/chip8node8sp/frame.go``;
    mind-cluster commit 22bb3d98):

    * ``isDelayingJob``: the plugin refuses the job (for up to 10 s) while a node a healthy
      task of it ran on is not a candidate;
    * ``selectForJobRescheduling``: a logical super pod of the original selection
      (``fJob.SuperPods``) whose nodes are all candidates and none faulty is kept whole;
    * ``selectNodeFromOriginSuperPod`` → ``getSelectNodes``: another one takes the candidates
      left in its original physical super pod when at least ``sp-block`` nodes are left
      there: each healthy node keeps its rank, the others are filled from the rest in Go
      map order (the order, not the set, is open when one fill node serves one rank);
    * the logical super pods still unselected are selected afresh (``classifySuperPod``,
      ``selectNodes``): Go map order over and inside physical super pods.
    """
    block = max(1, (job.sp_block or job.npu_per_task * job.tasks) // job.npu_per_task)
    planned = set(ranks.values())
    healthy_gone = sorted(n for r, n in original.items()
                          if n not in faulty and n not in planned)
    if healthy_gone:
        return PluginChoice(why=(
            f"the plan leaves node {healthy_gone[0]}, where a healthy task of this fault job "
            "ran, out of its planned set: the plugin then waits for that node "
            "(isDelayingJob) and reselects afterwards by Go map order"))
    left: dict[int | None, set[str]] = {}
    for node in planned:
        left.setdefault(super_pod_of.get(node), set()).add(node)
    groups = {g: [original.get(g * block + i) for i in range(block)]
              for g in range(job.tasks // block)}
    choice = PluginChoice()
    loose: set[int] = set()
    waiting: list[int] = []
    for g, nodes in groups.items():  # selectForJobRescheduling
        if all(n is not None and n in planned and n not in faulty for n in nodes):
            for i, kept in enumerate(nodes):
                choice.pins[g * block + i] = str(kept)
                left[super_pod_of.get(str(kept))].discard(str(kept))
        else:
            waiting.append(g)
    homes = [super_pod_of.get(str(groups[g][0])) for g in waiting]
    for g, home in zip(waiting, homes, strict=True):  # selectNodeFromOriginSuperPod
        pool = left.get(home, set())
        if len(pool) < block:
            return PluginChoice(why=(
                f"logical super pod {g} of this fault job leaves its physical super pod "
                f"{home} in the plan: the plugin selects it afresh (classifySuperPod) in Go "
                "map order"))
        if homes.count(home) > 1:
            sharing = [str(x) for x, h in zip(waiting, homes, strict=True) if h == home]
            return PluginChoice(why=(
                f"logical super pods {', '.join(sharing)} of this fault job both reselect "
                f"in physical super pod {home}: Go map order decides which takes which node"))
        reserve = []
        for i, old in enumerate(groups[g]):
            if old is not None and old not in faulty and old in pool:
                choice.pins[g * block + i] = old
                pool.discard(old)
            else:
                reserve.append(g * block + i)
        if len(pool) != len(reserve):
            return PluginChoice(why=(
                f"{len(pool)} planned node(s) of physical super pod {home} are left for "
                f"{len(reserve)} rank(s) of logical super pod {g}: Go map order picks them"))
        if len(reserve) == 1:
            choice.pins[reserve[0]] = pool.pop()
        else:
            loose.update(reserve)
            pool.clear()
    choice.loose = frozenset(loose)
    return choice


def sort_by_cached_rank(ranks: dict[int, str], cached: dict[int, str], group: int
                        ) -> dict[int, str]:
    """The multilevel handler's rank order of a selection made from history
    (``plugin/supernode.go`` ``GetSuperNodeMapFromTaskTree`` → ``sortNodesByCachedRank``):
    in each level-1 group (``group`` ranks) the nodes are sorted by name, each node of
    the cached selection's same group goes back to its cached rank, and the others fill
    the free ranks in name order."""
    out: dict[int, str] = {}
    for first in sorted({r - r % group for r in ranks}):
        members = [r for r in range(first, first + group) if r in ranks]
        nodes = sorted(ranks[r] for r in members)  # Go string order: bytes
        placed = {r: cached[r] for r in members if cached.get(r) in nodes}
        rest = [n for n in nodes if n not in placed.values()]
        free = [r for r in members if r not in placed]
        out.update(placed)
        out.update(zip(free, rest, strict=True))
    return out


def multilevel_regroup(ranks: dict[int, str], cached: dict[int, str], group: int,
                       labels: dict[str, dict[str, str]],
                       levels: dict[str, dict[str, LevelConfig]]) -> str:
    """Why the multilevel handler's reselection from history may number the level-1 groups
    otherwise than the plan ("" when it keeps them).

    ``Reschedule`` (``multilevelscheduling/rescheduling.go``) re-places the largest failed
    subtree inside the resource unit of its parent and keeps its index
    (``rescheduleSubTask``): a group that keeps a node of its cached selection takes its new
    nodes inside its level-1 unit, a group that keeps none inside its level-2 unit.  A plan
    that puts a group's new nodes elsewhere makes the plugin escalate the failed scope
    (``expandFaultLevel``) up to a whole new tree, whose group numbering this does not
    follow.
    """
    for first in sorted({r - r % group for r in ranks}):
        before = [cached[r] for r in range(first, first + group) if r in cached]
        planned = [ranks[r] for r in range(first, first + group) if r in ranks]
        new = [n for n in planned if n not in before]
        if not new or not before:
            continue
        depth = 1 if any(n in before for n in planned) else 2
        tree = labels.get(before[0], {}).get(TOPOTREE_LABEL, DEFAULT_TOPOTREE)
        level = levels.get(tree, {}).get(f"level{depth}")
        if level is None:
            continue  # the whole tree is the parent: its one group keeps index 0
        units = {labels.get(n, {}).get(level.label) for n in before}
        away = [n for n in new if labels.get(n, {}).get(level.label) not in units]
        if away:
            return (f"the plan puts node {away[0]} of level-1 group {first // group} outside "
                    f"the level-{depth} unit ({level.label}) the plugin's Reschedule re-places "
                    "that group in: it would escalate to a whole new tree, numbered its own "
                    "way")
    return ""
