"""Post-pass: turn the counted solution into a rank → node placement, exactly.

Each group gets its domain (explicit groups from their Booleans, anonymous groups from the
counts, in group order and ascending domain order); each leaf group gets nodes from its
cells; inside a leaf group, ranks with a hit go to their origin node and the others are
matched to the remaining nodes so that no fault rank lands on its old node unless every
remaining rank avoids that node (the case the model counts as a fault return).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import numpy as np

from models.compiled import JobView, Problem
from models.plan import Plan
from solver.model.cancel import checked, checkpoint
from solver.model.structure import POOLED_PARENT, JobStructure, Structure
from solver.model.variables import ModelVariables, leaf_domain_of


class RecoveryError(Exception):
    """The solution could not be turned into a placement (a bug)."""


def recover_plan(problem: Problem, structure: Structure, mv: ModelVariables,
                 value: dict[int, int], pinned: dict[int, np.ndarray]) -> Plan:
    """Build the node-level plan from variable values (``value[var.index]``)."""
    plan = Plan.empty(problem)
    for j, nodes in pinned.items():
        plan.nodes[j] = np.asarray(nodes, dtype=np.int32)
    # node-level jobs first: they use specific nodes (some inside whole-node cells)
    taken_in_cell: dict[int, set[int]] = defaultdict(set)
    for j in structure.ordinary:
        checkpoint()
        if not value[mv.placed[j].index]:
            continue
        if j in structure.pod:
            plan.nodes[j] = recover_pod_job(problem, structure, mv, value, j)
            continue
        slots: list[int] = []
        for (jj, n), var in checked(mv.node_ranks.items(), 2048):
            if jj == j:
                slots.extend([n] * value[var.index])
        plan.nodes[j] = _match_node_job(problem, j, slots)
    for n, var in checked(mv.touched.items(), 2048):
        if value[var.index]:
            c = structure.cell_of.get(n)
            if c is not None:
                taken_in_cell[c].add(n)
    cursor: dict[int, list[int]] = {}
    for cell in checked(structure.cells, 64):
        cursor[cell.id] = [n for n in cell.nodes if n not in taken_in_cell[cell.id]]

    def take(c: int, k: int) -> list[int]:
        free = cursor[c]
        if k > len(free):
            raise RecoveryError(f"cell {c} has {len(free)} nodes left, {k} needed")
        got, cursor[c] = free[:k], free[k:]
        return got

    for j, js in structure.jobs.items():
        checkpoint()
        if not value[mv.placed[j].index]:
            continue
        plan.nodes[j] = _recover_job(problem, structure, mv, js, value, take)
    return plan


def _expand(counts: dict[int, int]) -> list[int]:
    out: list[int] = []
    for d in sorted(counts):
        out.extend([d] * counts[d])
    return out


def _recover_job(problem: Problem, structure: Structure, mv: ModelVariables, js: JobStructure,
                 value: dict[int, int], take: object) -> np.ndarray:
    j = js.job
    job = problem.jobs[j]
    assert callable(take)
    domain_of: dict[int, int] = {}
    explicit: set[int] = set()
    child_counts: dict[int, list[tuple[int, Any]]] = defaultdict(list)
    for (jj, pid, d), var in checked(mv.child_count.items(), 2048):
        if jj == j:
            child_counts[pid].append((d, var))
    cell_takes: dict[int, list[tuple[int, Any]]] = defaultdict(list)
    for (jj, gid, c), var in checked(mv.cell_take.items(), 2048):
        if jj == j:
            cell_takes[gid].append((c, var))
    # top level
    anon_top = _expand({d: value[mv.anon_count[(j, 0, d)].index] for d in js.candidates[0]})
    queue = iter(anon_top)
    for gid in js.by_level[0]:
        group = js.groups[gid]
        chosen = [d for d in group.pref_domains if value[mv.explicit[(j, gid, d)].index]]
        if chosen:
            domain_of[gid] = chosen[0]
            explicit.add(gid)
        else:
            domain_of[gid] = next(queue)
    pooled_windows: dict[int, Iterator[int]] = {}  # super pod → its pooled windows' racks
    for li in range(1, len(js.sizes)):
        # anonymous children of anonymous parents share the per-child-domain counts
        anon_by_parent_domain: dict[int, list[int]] = defaultdict(list)
        for d in js.candidates[li]:
            k = value[mv.anon_count[(j, li, d)].index]
            if k:
                parent_dom = structure.domains[d].parent
                anon_by_parent_domain[parent_dom].extend([d] * k)
        for gid in checked(js.by_level[li - 1], 64):
            parent = js.groups[gid]
            D = domain_of[gid]
            if gid in explicit and structure.pools_windows(j):
                # the explicit blocks of a super pod share its pooled counts, each taking
                # as many windows as it has anonymous children
                pool = pooled_windows.get(D)
                if pool is None:
                    counted = {d: value[var.index]
                               for d, var in child_counts.get(POOLED_PARENT, [])
                               if structure.domains[d].parent == D}
                    pool = pooled_windows[D] = iter(_expand(counted))
            elif gid in explicit:
                counted = {d: value[var.index] for d, var in child_counts.get(gid, [])
                           if structure.domains[d].parent == D}
                pool = iter(_expand(counted))
            else:
                pool = iter(anon_by_parent_domain[D][: len(parent.children)])
                anon_by_parent_domain[D] = anon_by_parent_domain[D][len(parent.children):]
            for cid in parent.children:
                child = js.groups[cid]
                chosen = [d for d in child.pref_domains
                          if value[mv.explicit[(j, cid, d)].index]] if gid in explicit else []
                if chosen:
                    domain_of[cid] = chosen[0]
                    explicit.add(cid)
                else:
                    domain_of[cid] = next(pool)
    # leaf nodes
    chased = chased_origins(job)
    leaf = js.leaf_level
    size = js.sizes[leaf]
    nodes = np.full(job.tasks, -1, dtype=np.int32)
    pooled: dict[int, list[int]] = defaultdict(list)
    for (jj, c), var in checked(mv.pool_take.items(), 2048):
        if jj != j or not value[var.index]:
            continue
        d = leaf_domain_of(structure, js.kinds[leaf], c, structure.cells[c].tree)
        pooled[d].extend(take(c, value[var.index]))
    anonymous = [gid for gid in js.by_level[leaf] if gid not in explicit]
    # groups whose fault ranks avoid a node of their pool claim first
    def pressure(gid: int) -> int:
        avoided = {int(job.origin[r]) for r in js.groups[gid].ranks
                   if job.fault[r] and job.origin[r] >= 0}
        return 0 if avoided & set(pooled[domain_of[gid]]) else 1

    order = [gid for gid in js.by_level[leaf] if gid in explicit]
    order += sorted(anonymous, key=lambda gid: (pressure(gid), gid))
    for gid in checked(order, 16):
        group = js.groups[gid]
        if gid in explicit:
            got: list[int] = []
            for c, var in cell_takes.get(gid, []):
                if value[var.index]:
                    got.extend(take(c, value[var.index]))
        else:
            d = domain_of[gid]
            got = _claim(pooled[d], list(group.ranks), chased, job.fault, size)
        if len(got) != size:
            raise RecoveryError(f"job {job.name} group {gid}: {len(got)} nodes for {size} ranks")
        _match_group(chased, job.fault, list(group.ranks), got, nodes)
    return nodes


def chased_origins(job: JobView) -> np.ndarray:
    """The cached nodes the post-pass matches ranks to: a fault rank's old node (to avoid
    it) always, a non-fault rank's only under ``prefer-previous-node`` (the model counts
    hits only then; chasing an uncounted one could force a fault return it did not
    count)."""
    if job.prefer_previous:
        return job.origin
    return np.where(job.fault, job.origin, -1).astype(job.origin.dtype)


def _claim(pool: list[int], ranks: list[int], origin: np.ndarray, fault: np.ndarray,
           size: int) -> list[int]:
    """Take ``size`` nodes from a domain's anonymous pool.

    Origins of the group's non-fault ranks come first; old nodes of its fault ranks are
    taken last, so that they go to another group when the pool allows it.
    """
    wanted = {int(origin[r]) for r in ranks if origin[r] >= 0 and not fault[r]}
    avoided = {int(origin[r]) for r in ranks if origin[r] >= 0 and fault[r]}
    ordered = ([n for n in pool if n in wanted]
               + [n for n in pool if n not in wanted and n not in avoided]
               + [n for n in pool if n in avoided and n not in wanted])
    chosen = ordered[:size]
    taken = set(chosen)
    pool[:] = [n for n in pool if n not in taken]
    return chosen


def _assign(ranks: list[int], slots: list[int], origin: np.ndarray,
            fault: np.ndarray) -> dict[int, int]:
    """Match ranks to slots (a multiset of nodes).

    Every non-fault rank whose origin is among the slots takes it (hits, including ones
    the model did not need to count); the others take the remaining slots so that a
    fault rank gets its old node only when every other choice is gone, with one round of
    swaps to repair a forced choice when another rank can trade.
    """
    left = list(slots)
    out: dict[int, int] = {}
    pending: list[int] = []
    # quadratic in the ranks (list look-ups): a checkpoint every 256 of a large job's
    for r in checked(ranks):
        o = int(origin[r])
        if not fault[r] and o >= 0 and o in left:
            out[r] = o
            left.remove(o)
        else:
            pending.append(r)
    pending.sort(key=lambda r: (0 if fault[r] else 1, r))
    for r in checked(pending):
        avoid = int(origin[r]) if fault[r] else -1
        choice = next((n for n in left if n != avoid), left[0])
        out[r] = choice
        left.remove(choice)
    for r in checked(pending):
        if not fault[r] or out[r] != int(origin[r]):
            continue
        bad = out[r]
        for other in pending:
            if other == r or out[other] == bad:
                continue
            other_avoid = int(origin[other]) if fault[other] else -1
            if bad != other_avoid:
                out[r], out[other] = out[other], bad
                break
    return out


def _match_group(origin: np.ndarray, fault: np.ndarray, ranks: list[int], got: list[int],
                 nodes: np.ndarray) -> None:
    """Assign a leaf group's nodes to its ranks (see :func:`_assign`)."""
    for r, n in _assign(ranks, got, origin, fault).items():
        nodes[r] = n


def _match_node_job(problem: Problem, j: int, slots: list[int]) -> np.ndarray:
    job = problem.jobs[j]
    if len(slots) != job.tasks:
        raise RecoveryError(f"job {job.name}: {len(slots)} slots for {job.tasks} ranks")
    ordered = sorted(slots, key=lambda n: int(problem.natural_pos[n]))
    nodes = np.full(job.tasks, -1, dtype=np.int32)
    for r, n in _assign(list(range(job.tasks)), ordered, chased_origins(job),
                        job.fault).items():
        nodes[r] = n
    return nodes


def recover_pod_job(problem: Problem, structure: Structure, mv: ModelVariables,
                    value: dict[int, int], j: int) -> np.ndarray:
    """The whole job's nodes (running ranks on theirs) of a modelled partly running job
    (:mod:`solver.model.podlevel`): each leaf domain's pending ranks matched to the nodes
    taken there as one pool."""
    job = problem.jobs[j]
    scope = structure.pod[j]
    choices = structure.pod_choices[j]
    leaf = scope.leaf
    slots: dict[int, list[int]] = defaultdict(list)
    for n in sorted(choices.leaf_of, key=lambda x: int(problem.natural_pos[x])):
        var = mv.node_ranks.get((j, n))
        if var is not None and value[var.index]:
            slots[choices.leaf_of[n]].extend([n] * value[var.index])
    ranks: dict[int, list[int]] = defaultdict(list)
    for g in range(scope.groups(leaf)):
        pend = [r for r in scope.ranks(leaf, g) if scope.pending[r]]
        if not pend:
            continue
        if (leaf, g) in scope.fixed:
            d = choices.anchored_leaf[g]
        else:
            d = next(d for d in choices.choices[(leaf, g)]
                     if value[mv.pod_dom[(j, leaf, g, d)].index])
        ranks[d].extend(pend)
    nodes = job.running.astype(np.int32).copy()
    for d, pool in ranks.items():
        if len(slots[d]) != len(pool):
            raise RecoveryError(f"job {job.name}: leaf domain {d} has {len(slots[d])} nodes "
                                f"for {len(pool)} pending ranks")
        for r, n in _assign(pool, slots[d], chased_origins(job), job.fault).items():
            nodes[r] = n
    return nodes
