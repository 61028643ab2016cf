"""Which nodes a job may use, and the origin hits it can at most reach.

:func:`eligible_nodes` (the nodes a whole-node task may use, for the fragment score),
:func:`node_usable_for` and :func:`usable_mask` (the nodes one task can use on its own),
and :func:`achievable_hits` (the loose upper bound of a job's origin hits that
:func:`models.objective.evaluate` reports).
"""

from __future__ import annotations

import numpy as np

from models.compiled import UNHEALTHY, JobView, Problem, distinct


def eligible_nodes(problem: Problem, job: JobView, tree: int | None = None) -> np.ndarray:
    """Boolean mask of nodes a whole-node task of ``job`` may use (ignoring other jobs).

    For multilevel jobs pass the tree index (into ``problem.tree_names``).
    """
    mask = problem.whole_free & (problem.npus == job.npu_per_task)
    rules = job.rules
    if rules.in_super_pod:
        mask &= problem.super_pod >= 0
    if rules.in_rack:
        mask &= problem.rack >= 0
    if rules.in_tree:
        if tree is None:
            raise ValueError("multilevel eligibility needs a tree")
        mask &= problem.trees[problem.tree_names[tree]].member
    return mask


def node_usable_for(problem: Problem, job: JobView, n: int) -> bool:
    """Whether node ``n`` can host one task of ``job`` on its own (no other jobs)."""
    if problem.health[n] == UNHEALTHY:
        return False
    if job.whole_node:
        if not (problem.free[n] == problem.npus[n] == job.npu_per_task):
            return False
    elif problem.free[n] < job.npu_per_task:
        return False
    if job.rules.in_super_pod and problem.super_pod[n] < 0:
        return False
    if job.rules.in_rack and problem.rack[n] < 0:
        return False
    if job.rules.in_tree:
        t = int(problem.node_tree[n])
        if t < 0 or not problem.trees[problem.tree_names[t]].member[n]:
            return False
        if problem.trees[problem.tree_names[t]].depth < len(job.levels):
            return False
    return True


def usable_mask(problem: Problem, job: JobView) -> np.ndarray:
    """:func:`node_usable_for` of every node at once."""
    mask = problem.health != UNHEALTHY
    if job.whole_node:
        mask &= (problem.free == problem.npus) & (problem.npus == job.npu_per_task)
    else:
        mask &= problem.free >= job.npu_per_task
    if job.rules.in_super_pod:
        mask &= problem.super_pod >= 0
    if job.rules.in_rack:
        mask &= problem.rack >= 0
    if job.rules.in_tree:
        inside = np.zeros(problem.num_nodes, dtype=bool)
        for t, name in enumerate(problem.tree_names):
            view = problem.trees[name]
            if view.depth >= len(job.levels):
                inside |= (problem.node_tree == t) & view.member
        mask &= inside
    return mask


def achievable_hits(problem: Problem, job: JobView) -> int:
    """Upper bound on origin hits of ``job``: candidates whose cached node is usable.

    For whole-node jobs a node counts once even if several ranks name it.
    """
    nodes = job.origin[(job.origin >= 0) & ~job.fault].astype(np.int64)
    if len(nodes) == 0:
        return 0
    usable = nodes[usable_mask(problem, job)[nodes]]
    if job.whole_node:
        return len(distinct(usable))
    hosts, counts = np.unique(usable, return_counts=True)
    return int(np.minimum(counts, problem.free[hosts] // job.npu_per_task).sum())
