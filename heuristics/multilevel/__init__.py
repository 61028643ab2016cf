"""Greedy placement of multilevel network-affinity jobs (``Family.MULTILEVEL``).

A port of upstream's ``multilevelscheduling`` strategy (reference §2.6) with the origin-node
preference of the RFC (seed ``000``, §2.4.2, §3.1.6, §3.1.11) built in.  One job is placed
on the nodes ``state`` still offers; the state is never changed.

Pipeline of :func:`place_multilevel`
------------------------------------
1. **Candidates**: nodes completely free in ``state``, not unhealthy, with ``npus ==
   npu-per-task``, that name a configured topotree (``huawei.com/topotree``, default
   ``default``) and carry its level labels.
2. **Resource trees** (§2.6.1–§2.6.4), one per ``resource-level-config`` entry.  A tree with
   fewer levels than the job's ``affinity-config`` is skipped.  Redundant upper levels are
   trimmed first (upstream's ``removeRedundantLayers`` runs before any label is read): the
   tree is built from the job's K lowest levels, so a level-i domain is the path of label
   values at levels K..i.  A candidate that names a tree but lacks the label of one of
   those K levels invalidates that tree; the reason names the node and the label.  A
   candidate lacking only the label of a trimmed level stays in the tree.
3. **History** (§2.6.9): when ``prefer-previous-node`` is on, the live affinity-cache
   entries of the job's owner (``JobView.origin``) are the old layout.  Ranks whose cached
   node is usable keep it ("pinned"); ranks without entry, fault ranks, and ranks whose node
   is gone are *missing*.  With nothing missing the layout is reused unchanged.  Otherwise
   every missing rank's *largest fault subtree* (climb while every rank of the parent
   group is missing) is re-scheduled as a one-group job inside its parent group's domain,
   keeping its rank range.  A fault job (one with ``fault-ranks``: upstream's rescheduling
   job, whose ``maxEscalation`` is unlimited here as for a job that is neither pod- nor
   process-rescheduling) escalates a subtree it cannot repair: every rank of the parent
   group joins the missing set, up to the whole job, which is scheduled afresh on the
   history's tree.  A job without fault ranks (upstream's prefer-previous source,
   ``maxEscalation`` 0) repairs in place only.
4. **Fresh schedule** (§2.6.5–§2.6.8, ``ScheduleWithPreference``) when there is no usable
   history or the repair failed (the RFC's fallback instead of failing the session):
   the scheduling tree (``alloc``/``frag`` per domain, reserved leaves), pass 1 (best fit
   by ``(frag, alloc)`` then overflow by ``(alloc, frag)``), pass 2 (untraversed and
   reserved leaves complete partial groups), group tasks built bottom-up.  A job with only
   ``level1`` first tries the strict rule (all level1 groups in one level2 domain).
5. **Ranks**: group indices come from the arrival order of the task tree, corrected by the
   RFC's position pre-allocation (below); inside a level1 group, upstream's
   ``sortNodesByCachedRank`` (name order, cached nodes back at their positions).

The RFC's preference
--------------------
* ``ScheduleWithPreference``: the rank → node map of the owner's live cache (non-fault
  ranks, ``JobView.preferred``) drives both the fresh schedule and every repair.
* ``traverseSiblings``: siblings holding preferred nodes are visited first.  A preferred
  sibling gives at most as many groups as distinct preferred groups it holds ("want"),
  and is visited even when its ``alloc`` exceeds the groups still needed; afterwards the
  upstream best-fit and overflow phases run over every sibling with room left (a
  preferred sibling may be visited again for its remaining room).
* ``sortFreeTasksByPreferredRank``: position pre-allocation.  At every level, each child
  group votes for the slot its preferred ranks point to; slots are granted by votes, the
  rest fill the free slots in arrival order.  Inside a level1 group a preferred node lands
  at exactly its cached position, so a rank gap never lets a higher rank slide down.
* Fault ranks prefer not to go back to their cached node, and are never banned from it
  (RFC: "不会强制调度到故障节点", not a hard affinity).  Their nodes ("fault nodes") are
  not preferred, and are taken last across domains and inside them.  When the layout
  :func:`place_multilevel` finds on every usable node takes a fault node (one no healthy
  rank prefers), the job is scheduled again with those held back, and the layout without
  them is kept unless the other has more origin hits, or as many and fewer fault returns
  (so a fault node is used when nothing else fits, or when holding it back would cost a
  hit, e.g. a repair that could only stay in its level1 domain through it).  Inside a
  level1 domain fault nodes are the last free leaves; a final swap inside the rank's
  lowest non-trivial group moves a fault rank off its old node when it landed there
  anyway.

Deterministic tie-breaks (upstream iterates Go maps, reference §7.1)
--------------------------------------------------------------------
* Domains are ordered by label value, ascending in natural order (``TreeView.level_values``
  are sorted naturally); leaves by natural node-name order (``problem.natural_pos``).
* Sibling sorts break remaining ties by (holds preferred node first, smallest preferred
  rank, label order).  Leaves: preferred by rank, then healthy, sub-healthy, and former
  fault nodes, each in natural order.
* Reserved leaves of a level1 domain (``reservedNode``): the first non-preferred leaves in
  natural order (preferred leaves only when too few others exist), so that a returning job
  is not kept off its origins by the reserve.
* Pass 2 visits level1 domains holding preferred nodes first, then label order.
* Among trees that succeed: most origin hits, then lowest initial fragment score (upstream),
  then tree name in natural order.

Deviations from upstream code (RFC followed, or choices where upstream is silent)
-------------------------------------------------------------------------------
* History is the owner's live affinity cache, used only when ``prefer-previous-node`` is
  on (upstream additionally reuses the job object's ``SuperPods`` regardless of the flag;
  this project has no such per-job state).  A cached layout that breaks the level grouping
  (stale entries) keeps, per group and level, the majority label value; the other ranks
  are treated as missing.
* Failed repairs do not fail the job (reference §3.7 #6, RFC: "ending in a full
  Schedule"): a job without fault ranks whose in-group repair is impossible, and a fault
  job whose escalation ends without a layout, get a full ``ScheduleWithPreference`` over
  all trees.  Upstream fails the prefer-previous case for the session (E28).
* Reserve in repairs: as upstream, a repair keeps the level1 reserve out of pass 1 and
  pass 2 uses it when the domain offers nothing else; this is how the reserve serves fault
  rescheduling (seed ``002``).  Taking reserved leaves first, as the seed's prose could
  be read, would only raise ``reserve-used``: the reserve is a count per domain.
* The preferred-sibling phase described above (RFC: "subtrees holding origin nodes are
  traversed first", not only a third-level tie-break).
* A candidate lacking the label of a level the job uses invalidates its whole tree
  (§2.6.4) with a reason naming node and label; upstream's predicate would already have
  dropped such a node.  Nodes that are busy, unhealthy or of another size do not count.
* The fault swap keeps the rule "fault ranks never return" even when the only partner in
  the group is on its own origin (one origin hit lost for one fault return avoided; the
  objective's weights alone would keep the hit).  With one rank and no other node the
  fault rank may stay: placing the job comes first.
* Strict rule with a cache: the plain schedule is also computed and wins when it has more
  origin hits (the strict rule is not a hard constraint).
* Fault nodes held back (RFC cases ``f5``/``f5b``): a choice of this port, from the RFC's
  rule above; upstream only lowers a fault node's score.  Holding them back can cost
  fragment score or reserve (never a hit of the job, never its placement), and in a batch
  the other layout may take a node a later job wanted: a greedy order effect.

Modules
-------
This module is the entry point (:func:`place_multilevel`: the fault-node retry; one
schedule of the job, :func:`solve_job`: around running ranks, from history or afresh
over every tree with the strict-rule attempt, then the fault-return swap and the
guard) and re-exports upstream's rank helpers; the parts live beside it:

* :mod:`heuristics.multilevel.context`: what one job's schedules share (candidates per
  tree, tree indexes, one ``Schedule`` on a tree, the leaf order);
* :mod:`heuristics.multilevel.history`: reuse and repair of the cached layout;
* :mod:`heuristics.multilevel.run`: one ``Schedule`` call (scheduling tree with ``alloc``
  and fragment scores, pass 1 and pass 2);
* :mod:`heuristics.multilevel.tree`: the level structure of a resource tree (domains as
  contiguous position runs), shared across jobs;
* :mod:`heuristics.multilevel.order`: the rank order (position pre-allocation, cached
  positions, ``getL1Ranks``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from heuristics.base import JobOutcome
from heuristics.multilevel.context import Context
from heuristics.multilevel.history import repair, with_history
from heuristics.multilevel.order import (
    level1_rank,
    ranks_from_level1_groups,
    sort_nodes_by_cached_rank,
)
from heuristics.state import ClusterState
from models.compiled import JobView, Problem, natural_key


def place_multilevel(problem: Problem, j: int, state: ClusterState) -> JobOutcome:
    """Place multilevel job ``j`` on the nodes ``state`` still offers.

    Parameters
    ----------
    problem
        The compiled scenario.
    j
        Index of a ``multilevel`` job in ``problem.jobs``.
    state
        Free chips per node; read only.

    Returns
    -------
    JobOutcome
        Node index per rank (rank ``r`` at position ``r``): for every level i, ranks
        ``[g*ai, (g+1)*ai)`` share level i's label value and all nodes sit in one topotree;
        or a reason naming the trees and why each failed.
    """
    job = problem.jobs[j]
    if not job.rules.in_tree or not job.levels:
        return JobOutcome.fail(f"job '{job.name}' is not a multilevel job")
    context = Context(problem, job, state)
    full = solve_job(context)
    # Fault nodes are taken last across domains: when the layout takes one, schedule again
    # without them, and keep that layout unless the one using them has more origin hits
    # or fewer fault returns.
    preferred = set(context.preferred)
    held = sorted(n for n in context.fault_nodes if context.base[n] and n not in preferred)
    if full.nodes is None or not set(full.nodes.tolist()) & set(held):
        return full  # unplaced, or no fault node taken
    spare = solve_job(Context(problem, job, state, held, context.repairs))
    if spare.nodes is None or _fault_key(job, full.nodes) > _fault_key(job, spare.nodes):
        return full
    return spare


def _fault_key(job: JobView, nodes: np.ndarray) -> tuple[int, int]:
    """``(origin hits, -fault returns)`` of a layout of ``job``, larger is better."""
    on_origin = (nodes == job.origin) & (job.origin >= 0)
    hits = int((on_origin & (job.preferred >= 0)).sum())
    return hits, -int((on_origin & job.fault).sum())


def solve_job(ctx: Context) -> JobOutcome:
    """One schedule of the job: around its running ranks, from its history, or afresh;
    then the fault-return swap and the guard."""
    if not ctx.cand:
        return JobOutcome.fail(_no_tree_reason(ctx,
            f"no resource tree found for npu nodes of job '{ctx.job.name}'", []))
    if ctx.fixed:
        return _around_running(ctx, )
    layout = with_history(ctx)
    reasons: list[str] = []
    if layout is None:
        layout, tree_used, reasons = _fresh(ctx, )
    else:
        tree_used = int(ctx.problem.node_tree[layout[0]])
    if layout is None:
        return JobOutcome.fail(_no_tree_reason(ctx,
            f"no valid task tree found for job '{ctx.job.name}'", reasons))
    _avoid_fault_returns(ctx, layout)
    _verify(ctx, layout, tree_used)
    return JobOutcome(np.asarray(layout, dtype=np.int32))


def _no_tree_reason(ctx: Context, head: str, extra: list[str]) -> str:
    levels = ",".join(f"level{i}={a}" for i, a in enumerate(ctx.levels, start=1))
    parts = [ctx.tree_reasons[t] for t in ctx.tree_order if t in ctx.tree_reasons]
    parts += extra
    if not ctx.problem.tree_names:
        parts.append("resource-level-config defines no tree")
    detail = "; ".join(parts) if parts else "no tree has usable nodes"
    return (f"{head} ({ctx.tasks} pods, affinity-config {levels}, "
            f"{ctx.job.npu_per_task} NPUs per pod): {detail}")


def _around_running(ctx: Context) -> JobOutcome:
    """Pod-level repair of a partly running job (reference §2.6.9).

    The running ranks are the pinned layout and the other ranks are missing: each
    missing rank's largest fault subtree is re-scheduled inside its parent group's
    domain, which holds a running rank (``rescheduleSubTask``).  Upstream's
    escalation (``maxEscalation``, ``PendingSessionNum / 6`` levels) re-places running
    pods, i.e. deletes them first: that is the rescheduler's step between sessions
    (``simulate``), never a move of a running rank here, so a subtree that does not
    fit its domain leaves the job unplaced for this session.
    """
    job = ctx.job
    problem = ctx.problem
    running = job.running.astype(np.int64)
    held = running[running >= 0]
    trees = sorted(set(problem.node_tree[held].tolist()))
    name = job.name
    if len(trees) != 1 or trees[0] < 0:
        shown = sorted({problem.node_names[n] for n in held.tolist()}, key=natural_key)[:5]
        return JobOutcome.fail(f"running ranks of job '{name}' are not in one configured "
                               f"topotree (nodes {shown})")
    t = trees[0]
    view = problem.trees[problem.tree_names[t]]
    if t not in ctx.cand:
        return JobOutcome.fail(_no_tree_reason(ctx,
            f"pod-level rescheduling of job '{name}' failed in tree '{view.name}'", []))
    lacking = [i for i in range(len(ctx.levels)) if (view.level_value[i][held] < 0).any()]
    if lacking:
        return JobOutcome.fail(f"running ranks of job '{name}' lack label "
                               f"'{view.labels[lacking[0]]}' of tree '{view.name}'")
    for i, size in enumerate(ctx.levels):
        values = view.level_value[i]
        for g in range(ctx.tasks // size):
            seg = running[g * size:(g + 1) * size]
            if len(set(values[seg[seg >= 0]].tolist())) > 1:
                return JobOutcome.fail(
                    f"running ranks of job '{name}' break level{i + 1} group {g} (ranks "
                    f"{g * size}..{(g + 1) * size - 1} span several '{view.labels[i]}' "
                    "values): the job cannot be completed")
    layout = repair(ctx, t, running.copy(), running < 0, max_escalation=0)
    if layout is None:
        return JobOutcome.fail(
            f"pod-level rescheduling of job '{name}' failed: a pending group does not "
            f"fit the free nodes of the domain its running ranks hold in tree "
            f"'{view.name}' (upstream escalates by deleting more pods, "
            "pending-sessions / 6 levels)")
    _avoid_fault_returns(ctx, layout)
    _verify(ctx, layout, t)
    return JobOutcome(np.asarray(layout, dtype=np.int32))


def _fresh(ctx: Context) -> tuple[list[int] | None, int, list[str]]:
    """``scheduleFromAllNodes`` with the strict-rule attempt (§2.6.7, §2.6.8)."""
    levels = ctx.levels
    any_cand = np.zeros(ctx.num_nodes, dtype=bool)
    for cand in ctx.cand.values():
        any_cand |= cand
    pref = ctx.pref_map(any_cand, range(ctx.tasks))
    if len(levels) == 1:
        strict = _across_trees(ctx, (levels[0], ctx.tasks), pref, [])
        if strict is not None and not pref:
            return strict[0], strict[1], []
    else:
        strict = None
    reasons: list[str] = []
    plain = _across_trees(ctx, levels, pref, reasons)
    if strict is not None and (plain is None or _hits(ctx, plain[0]) <= _hits(ctx, strict[0])):
        return strict[0], strict[1], []
    if plain is None:
        return None, -1, reasons
    return plain[0], plain[1], []


def _across_trees(
    ctx: Context, levels: Sequence[int], pref: dict[int, int], reasons: list[str]
) -> tuple[list[int], int] | None:
    best: tuple[tuple[int, int, int], list[int], int] | None = None
    for rank_t, t in enumerate(ctx.tree_order):
        if t not in ctx.cand:
            continue
        view = ctx.problem.trees[ctx.problem.tree_names[t]]
        if view.depth < len(levels):
            continue
        layout, why = ctx.schedule_tree(t, levels, pref)
        if layout is None:
            reasons.append(why)
            continue
        frag, nodes = layout
        key = (-_hits(ctx, nodes), frag, rank_t)
        if best is None or key < best[0]:
            best = (key, nodes, t)
    return None if best is None else (best[1], best[2])


def _hits(ctx: Context, layout: Sequence[int]) -> int:
    preferred = ctx.preferred
    return sum(1 for r, n in enumerate(layout) if n >= 0 and preferred[r] == n)


def _avoid_fault_returns(ctx: Context, layout: list[int]) -> None:
    """Swap a fault rank off its cached node inside its lowest non-trivial group."""
    if not ctx.fault_origin:
        return
    size = next((a for a in ctx.levels if a >= 2), ctx.tasks)
    if size < 2:
        return
    preferred = ctx.preferred
    for r, x in sorted(ctx.fault_origin.items()):
        if layout[r] != x:
            continue
        lo = r - r % size
        options = [q for q in range(lo, lo + size)
                   if q != r and q not in ctx.fixed and ctx.fault_origin.get(q) != x]
        if not options:
            continue
        # Prefer a partner that is not on its own origin (keeps origin hits).
        q = next((q for q in options if preferred[q] != layout[q]), options[0])
        layout[r], layout[q] = layout[q], layout[r]


def _verify(ctx: Context, layout: list[int], t: int) -> None:
    """Internal guard: the answer satisfies every multilevel hard constraint."""
    nodes = np.asarray(layout, dtype=np.int64)
    problem = ctx.problem
    view = problem.trees[problem.tree_names[t]]
    ok = (
        len(nodes) == ctx.tasks
        and bool((nodes >= 0).all())
        and len(set(layout)) == ctx.tasks
        and bool(ctx.base[nodes[ctx.job.to_place]].all())
        and bool(ctx.labelled(view)[nodes].all())
    )
    if ok:
        for i, size in enumerate(ctx.levels):
            values = view.level_value[i][nodes].reshape(-1, size)
            if not (values == values[:, :1]).all():
                ok = False
                break
    if not ok:
        raise AssertionError(
            f"multilevel greedy produced an invalid layout for job '{ctx.job.name}'; "
            "this is a bug"
        )


__all__ = [
    "level1_rank",
    "place_multilevel",
    "ranks_from_level1_groups",
    "sort_nodes_by_cached_rank",
]
