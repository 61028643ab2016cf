"""History of a multilevel job: reuse or repair the owner's cached layout (§2.6.9).

:func:`with_history` pins every rank whose cached node is usable and re-schedules each
missing rank's largest fault subtree inside its parent group's domain
(``rescheduleSubTask``, :func:`_repair_subtree`; one pod inside its level1 domain by the
shortcut :func:`repair_pod`), escalating a fault job's failed subtrees up to the whole job
(:func:`repair`).  :func:`repair` is also the pod-level repair of a partly running job
(:meth:`heuristics.multilevel.context.Context.solve`).  Part of
:mod:`heuristics.multilevel`.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from heuristics.multilevel.run import Run
from heuristics.multilevel.tree import TreeIndex
from models.compiled import TreeView

if TYPE_CHECKING:
    from heuristics.multilevel.context import Context


def with_history(ctx: Context) -> list[int] | None:
    """Reuse or repair the owner's cached layout (§2.6.9); ``None``: schedule afresh."""
    job = ctx.job
    if not job.prefer_previous or not (job.origin >= 0).any():
        return None
    problem = ctx.problem
    pinned = np.full(ctx.tasks, -1, dtype=np.int64)
    seen: set[int] = set()
    origin = job.origin.tolist()
    fault = job.fault.tolist()
    node_tree = problem.node_tree
    usable = np.zeros(ctx.num_nodes, dtype=bool)
    for cand in ctx.cand.values():
        usable |= cand
    for r in range(ctx.tasks):
        n = origin[r]
        if n < 0 or fault[r] or not usable[n] or n in seen:
            continue
        pinned[r] = n
        seen.add(n)
    held = pinned[pinned >= 0]
    if len(held) == 0:
        return None
    per_tree = Counter(node_tree[held].tolist())
    top = max(per_tree.values())
    t = next(t for t in ctx.tree_order if per_tree.get(t, 0) == top)
    pinned[(pinned >= 0) & (node_tree[np.maximum(pinned, 0)] != t)] = -1
    _keep_consistent(ctx, pinned, problem.trees[problem.tree_names[t]])
    if not (pinned >= 0).any():
        return None
    missing = pinned < 0
    if not missing.any():
        return pinned.tolist()
    return repair(ctx, t, pinned, missing)


def _keep_consistent(ctx: Context, pinned: np.ndarray, view: TreeView) -> None:
    """Per level (top down) and group keep the majority label value of pinned nodes."""
    for i in range(len(ctx.levels), 0, -1):
        size = ctx.levels[i - 1]
        values = view.level_value[i - 1]
        # only groups whose pinned nodes disagree need a look (a vectorised test)
        groups = ctx.tasks // size
        seg_all = pinned[:groups * size].reshape(groups, size)
        held_all = seg_all >= 0
        vals_all = values[np.where(held_all, seg_all, 0)].astype(np.int64)
        big = np.iinfo(np.int64).max
        low = np.where(held_all, vals_all, big).min(axis=1)
        high = np.where(held_all, vals_all, -big).max(axis=1)
        mixed = (held_all.sum(axis=1) >= 2) & (low != high)
        starts = (np.flatnonzero(mixed) * size).tolist()
        if groups * size < ctx.tasks:  # a last partial group (not expected)
            starts.append(groups * size)
        for start in starts:
            seg = pinned[start:start + size]
            held = seg[seg >= 0]
            if len(held) < 2:
                continue
            vals = values[held]
            if (vals == vals[0]).all():
                continue
            counts = Counter(vals.tolist())
            top = max(counts.values())
            keep = next(v for v in vals.tolist() if counts[v] == top)
            for q in range(size):
                n = seg[q]
                if n >= 0 and values[n] != keep:
                    pinned[start + q] = -1


def _fault_subtrees(missing: np.ndarray, req: list[int]) -> list[tuple[int, int]]:
    """Largest fault subtree ``(depth, first rank)`` of every missing rank, rank order."""
    out: list[tuple[int, int]] = []
    leaf = len(req) - 1
    end = -1
    flags = missing.tolist()
    for r in np.flatnonzero(missing).tolist():
        if r < end:
            continue
        d = leaf
        while d > 0:
            size = req[d - 1]
            lo = r - r % size
            if all(flags[lo:lo + size]):
                d -= 1
            else:
                break
        start = r - r % req[d]
        out.append((d, start))
        end = start + req[d]
    return out


def repair(ctx: Context, t: int, pinned: np.ndarray, missing: np.ndarray,
           max_escalation: int | None = None) -> list[int] | None:
    """``rescheduleWithSuperPods`` with escalation up to a full schedule (RFC)."""
    req = ctx.req_of(ctx.levels, ctx.tasks)
    tix = ctx.index(t, len(ctx.levels))
    # getMaxEscalationLevel: a fault job may escalate up to the whole job; the
    # prefer-previous source (no fault rank) may not (0) — its failures fall back to a
    # full ScheduleWithPreference in the caller (RFC, reference §3.7 #6).
    if max_escalation is None:
        max_escalation = len(req) if ctx.job.fault.any() else 0
    while True:
        avail = ctx.cand[t].copy()
        avail[pinned[pinned >= 0]] = False
        avail_pos = avail[tix.order]  # the same, per position of the tree index
        layout = pinned.tolist()
        failed: list[tuple[int, int]] = []
        for d, start in _fault_subtrees(missing, req):
            if d == 0:
                pref = ctx.pref_map(ctx.cand[t], range(ctx.tasks))
                got, _why = ctx.schedule_tree(t, ctx.levels, pref)
                return None if got is None else got[1]
            nodes = _repair_subtree(ctx, tix, req, d, start, pinned, avail, avail_pos)
            if nodes is None:
                if max_escalation == 0:
                    return None  # nothing escalates: the round's failure is final
                failed.append((d, start))
                continue
            layout[start:start + req[d]] = nodes
            avail[nodes] = False
            avail_pos[tix.pos[nodes]] = False
        if not failed:
            return layout
        grew = False
        for d, start in failed:
            if len(req) - d > max_escalation:
                continue  # the subtree's level (1 = pod, 2 = level1 group, …) is capped
            size = req[d - 1]
            lo = start - start % size
            if not missing[lo:lo + size].all():
                missing[lo:lo + size] = True
                grew = True
        if not grew:
            return None
        pinned[missing] = -1


def _repair_subtree(
    ctx: Context, tix: TreeIndex, req: list[int], d: int, start: int, pinned: np.ndarray,
    avail: np.ndarray, avail_pos: np.ndarray,
) -> list[int] | None:
    """``rescheduleSubTask``: one group of depth ``d`` inside its parent's domain.

    ``avail`` marks the nodes still free for the job, ``avail_pos`` the same per
    position of ``tix``.
    """
    size = req[d]
    psize = req[d - 1]
    plo = start - start % psize
    seg = pinned[plo:plo + psize]
    anchor = int(seg[seg >= 0][0])
    lo, hi = tix.run_of(d - 1, anchor)
    mask = avail_pos[lo:hi].copy()
    idx = lo + np.flatnonzero(mask)
    if len(idx) < size:
        return None
    sub = list(req)
    sub[d - 1] = size
    pref = ctx.pref_map(avail, range(start, start + size))
    # The answer depends only on the nodes offered (the domain [lo, hi) and the mask
    # of its offered positions) and the preferred ones among them: a job scheduled
    # again (fault nodes held back) reuses every repair they left alone.
    position = tix.pos
    held = sorted((int(position[n]), n, r) for n, r in pref.items()
                  if lo <= position[n] < hi)
    key = (tix.view.name, tix.depth, tuple(sub), d, start, lo, hi,
           np.packbits(mask).tobytes(), tuple(held))
    if key in ctx.repairs:
        return ctx.repairs[key]
    found: list[int] | None = None
    if d - 1 == len(req) - 2:  # one pod inside its level1 domain
        found = repair_pod(ctx, tix, tix.order[idx], pref)
        ctx.repairs[key] = found
        return found
    run = Run(ctx, tix, sub, d - 1, idx, pref, span=(lo, hi), offered=mask)
    if run.run():
        out: list[int] = [-1] * ctx.tasks
        ctx.write(run, start, out)
        found = out[start:start + size]
    ctx.repairs[key] = found
    return found


def repair_pod(ctx: Context, tix: TreeIndex, leaves: np.ndarray,
               pref: dict[int, int]) -> list[int] | None:
    """One pod inside its level1 domain: what a :class:`heuristics.multilevel.run.Run`
    over ``leaves`` picks.

    ``leaves`` are the domain's offered nodes in label (natural) order.  The reserve is
    the first non-preferred leaves (preferred ones by descending rank when too few);
    pass 1 takes the best unreserved leaf by :meth:`leaf_key`, pass 2 the
    last reserved leaf.  Building the whole scheduling tree for this costs ~0.2 ms;
    single-pod repairs are the most frequent ones.
    """
    nodes = leaves.tolist()
    if not nodes:
        return None
    reserve = tix.reserve
    reserved: set[int] = set()
    if reserve > 0:
        others = [x for x in nodes if x not in pref]
        reserved.update(others[:reserve])
        if len(others) < reserve:
            extra = sorted((x for x in nodes if x in pref), key=pref.__getitem__,
                           reverse=True)
            reserved.update(extra[:reserve - len(others)])
    usable = [x for x in nodes if x not in reserved]
    if not usable:
        return [[x for x in nodes if x in reserved][-1]]
    return [min(usable, key=lambda x: ctx.leaf_key(pref, reserved, x))]


__all__ = ["repair", "repair_pod", "with_history"]
