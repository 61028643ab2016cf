"""Upstream's fragment score of the nodes a placed job leaves free (the ``fragment-score`` term).

The formulas are in :mod:`models.objective` (``fragment-score``).  Here: the per-problem
arrays they need (domain ids per tree and level, parent domains; computed once per
:class:`~models.compiled.Problem` and kept with it), :func:`job_fragment` for one placed
job, and the helpers the objective's fragment bound shares.
"""

from __future__ import annotations

import weakref
from collections import defaultdict

import numpy as np

from models.compiled import JobView, Problem, distinct
from models.eligibility import eligible_nodes
from models.scenario import Family


class Derived:
    """Arrays derived from one :class:`Problem`, computed once and kept with it.

    A compiled problem is never mutated, so every array here depends on the problem only.
    The cached arrays are read-only.
    """

    __slots__ = ("domains", "parents", "racks", "whole")

    def __init__(self, problem: Problem) -> None:
        self.domains: dict[tuple[int, int], np.ndarray] = {}
        self.parents: dict[tuple[int, int], np.ndarray] = {}
        #: per node its (super pod, rack) pair's id, -1 where either is missing, and
        #: each id's super pod (:func:`rack_slots`)
        self.racks: tuple[np.ndarray, np.ndarray] | None = None
        whole = problem.whole_free
        whole.flags.writeable = False
        self.whole = whole


_DERIVED: weakref.WeakKeyDictionary[Problem, Derived] = weakref.WeakKeyDictionary()


def derived_arrays(problem: Problem) -> Derived:
    """The :class:`Derived` arrays of ``problem`` (made on first use, kept with it)."""
    found = _DERIVED.get(problem)
    if found is None:
        found = _DERIVED[problem] = Derived(problem)
    return found


def _first_seen_ids(codes: np.ndarray) -> np.ndarray:
    """Dense ids of ``codes`` numbered in order of first appearance."""
    _uniq, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first), dtype=np.int64)
    return rank[np.asarray(inverse).reshape(-1)]


def domain_keys(problem: Problem, tree: int, level: int) -> np.ndarray:
    """Per node, an integer id of its level-``level`` domain in ``tree`` (-1 outside).

    A level-i domain is identified by the node's label values at levels i..D of the tree;
    ids are numbered in order of first appearance in node (file) order.  The array is
    computed once per problem and returned read-only.
    """
    cache = derived_arrays(problem).domains
    found = cache.get((tree, level))
    if found is not None:
        return found
    view = problem.trees[problem.tree_names[tree]]
    out = np.full(problem.num_nodes, -1, dtype=np.int64)
    members = np.flatnonzero(view.member)
    columns = [view.level_value[i][members].astype(np.int64) for i in range(level - 1, view.depth)]
    if len(members) and not columns:
        out[members] = 0
    elif len(members):
        radix = [max(1, len(view.level_values[i])) for i in range(level - 1, view.depth)]
        if float(np.prod(np.asarray(radix, dtype=np.float64))) < 2.0**62:
            codes = np.zeros(len(members), dtype=np.int64)
            for col, size in zip(columns, radix, strict=True):
                codes = codes * size + col
            out[members] = _first_seen_ids(codes)
        else:  # too many label values for one integer code: unique rows
            rows = np.stack(columns, axis=1)
            _uniq, inverse = np.unique(rows, axis=0, return_inverse=True)
            out[members] = _first_seen_ids(np.asarray(inverse).reshape(-1))
    out.flags.writeable = False
    cache[(tree, level)] = out
    return out


def domain_parents(problem: Problem, tree: int, level: int) -> np.ndarray:
    """``parent[g]``: the level ``level + 1`` domain id of level-``level`` domain ``g``."""
    cache = derived_arrays(problem).parents
    found = cache.get((tree, level))
    if found is not None:
        return found
    lower = domain_keys(problem, tree, level)
    upper = domain_keys(problem, tree, level + 1)
    inside = lower >= 0
    parent = np.full(int(lower.max(initial=-1)) + 1, -1, dtype=np.int64)
    parent[lower[inside]] = upper[inside]
    parent.flags.writeable = False
    cache[(tree, level)] = parent
    return parent


def multilevel_fragment(
    left_per_l1: dict[int, int], parents: list[dict[int, int]], levels: tuple[int, ...]
) -> int:
    """Upstream's recursive fragment score over level domains.

    ``left_per_l1`` maps level1 domain id → left nodes; ``parents[i]`` maps a level
    ``i+1`` domain id → its level ``i+2`` domain id (for i = 0..K-2).
    """
    frag = {g: left % levels[0] for g, left in left_per_l1.items()}
    alloc = {g: left // levels[0] for g, left in left_per_l1.items()}
    for i in range(1, len(levels)):
        m = levels[i] // levels[i - 1]
        sub: dict[int, int] = defaultdict(int)
        acc: dict[int, int] = defaultdict(int)
        for g, parent in parents[i - 1].items():
            if g in alloc:
                sub[parent] += alloc[g]
                acc[parent] += frag[g]
        frag = {d: (sub[d] % m) * levels[i - 1] + 10 * acc[d] for d in sub}
        alloc = {d: sub[d] // m for d in sub}
    return int(sum(frag.values()))


def sum_by(groups: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Exact integer sums of ``values`` per group id (``np.bincount`` without floats)."""
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, groups, values)
    return out


def _multilevel_fragment_arrays(
    problem: Problem, tree: int, levels: tuple[int, ...], left_mask: np.ndarray
) -> int:
    """:func:`multilevel_fragment` over every domain of ``tree`` at once.

    A domain without eligible nodes below it has no left nodes, no groups and no
    fragment, so summing over every domain equals the sum over the eligible ones.
    """
    l1 = domain_keys(problem, tree, 1)
    size = int(l1.max(initial=-1)) + 1
    left = np.bincount(l1[left_mask], minlength=size).astype(np.int64)
    frag = left % levels[0]
    alloc = left // levels[0]
    for i in range(1, len(levels)):
        m = levels[i] // levels[i - 1]
        parent = domain_parents(problem, tree, i)
        upper = int(domain_keys(problem, tree, i + 1).max(initial=-1)) + 1
        sub = sum_by(parent, alloc, upper)
        acc = sum_by(parent, frag, upper)
        frag = (sub % m) * levels[i - 1] + 10 * acc
        alloc = sub // m
    return int(frag.sum())


def job_fragment(
    problem: Problem, job: JobView, used: np.ndarray, nodes: list[int], tree: int | None
) -> int:
    """Fragment score of placed ``job`` given the chips ``used`` per node by the batch."""
    if not job.rules.grouped:
        hosts = distinct(job.placed_nodes(nodes))
        left = problem.free[hosts].astype(np.int64) - used[hosts]
        return int(((left > 0) & (left < problem.npus[hosts])).sum())
    left_mask = eligible_nodes(problem, job, tree) & (used == 0)
    if job.family is Family.SUPERPOD:
        if job.sp_block <= 1:
            return 0
        counts = np.bincount(problem.super_pod[left_mask])
        return int((counts % job.sp_block).sum())
    if job.rules.in_rack:
        pods, counts = rack_counts(problem, left_mask)
        if len(counts) == 0:
            return 0
        windows = job.sp_block // job.tp_block
        size = int(pods.max()) + 1
        per_pod_alloc = sum_by(pods, counts // job.tp_block, size)
        per_pod_frag = sum_by(pods, counts % job.tp_block, size)
        return int(((per_pod_alloc % windows) * job.tp_block + 10 * per_pod_frag).sum())
    assert tree is not None
    return _multilevel_fragment_arrays(problem, tree, job.levels, left_mask)


def rack_slots(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Per node the id of its (super pod, rack) pair (-1 where either is missing), ids
    numbered in the pairs' order; and each id's super pod.  Computed once per problem
    and returned read-only."""
    arrays = derived_arrays(problem)
    if arrays.racks is None:
        pods = problem.super_pod.astype(np.int64)
        racks = problem.rack.astype(np.int64)
        both = (pods >= 0) & (racks >= 0)
        width = int(racks.max(initial=-1)) + 1
        slot = np.full(problem.num_nodes, -1, dtype=np.int64)
        pairs, ids = np.unique(pods[both] * width + racks[both], return_inverse=True)
        slot[both] = ids
        pod_of_slot = pairs // max(width, 1)
        slot.flags.writeable = False
        pod_of_slot.flags.writeable = False
        arrays.racks = (slot, pod_of_slot)
    return arrays.racks


def rack_counts(problem: Problem, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nodes of ``mask`` per (super pod, rack) pair: the pair's super pod and its count
    (pairs in (super pod, rack) order).

    Counted over the problem's pair ids (:func:`rack_slots`): one count per pair of the
    cluster, not per code of a ``pod × width + rack`` range (a 65,536-node 950 cluster's
    codes ran to a million, and scanning them was most of ``evaluate()``).
    """
    slot, pod_of_slot = rack_slots(problem)
    ids = slot[mask]
    if len(ids) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    if int(ids.min()) >= 0:
        every = np.bincount(ids, minlength=len(pod_of_slot))
        present = np.flatnonzero(every)
        return pod_of_slot[present], every[present].astype(np.int64)
    # a node without a super pod or rack: codes as before, negatives included
    pods = problem.super_pod[mask].astype(np.int64)
    racks = problem.rack[mask].astype(np.int64)
    width = int(racks.max()) + 1
    uniq, counts = np.unique(pods * width + racks, return_counts=True)
    return uniq // width, counts.astype(np.int64)
