"""How large a CP-SAT model of a whole batch would be, counted from the compiled view.

The engines choose how to search a batch (one model of the whole batch, or large
neighbourhoods first) and how to construct its start from what the whole-batch model
would cost, not from the node count: two batches of the same size can differ tenfold
(4,096 nodes, 10 jobs: an A3 batch's model has 6,452 variables, an ordinary batch's
67,594).  Building the model's structure to count it costs seconds on large batches, so
:func:`whole_batch_size` counts, with numpy only, what the model gives variables to:

* **cells** — the completely free usable nodes that no pending rank prefers, grouped
  into classes of identical attributes the model tells apart (node size, health, super
  pod, rack, multilevel leaf domain), plus one cell per such node some pending rank
  prefers (its origin or its fault rank's old node);
* a **whole-node job** (groups of whole nodes) gets variables per cell it may take and
  per candidate domain of each level (super pod, rack, multilevel level-i domain):
  counted as the cells plus the domains holding completely free nodes;
* a **node-level job** (ordinary, single-task, partly running) gets two variables per
  candidate node: its preferred nodes plus, per class, as many nodes as it has ranks.

The count (:class:`SearchSize`) is a proxy: on 15 generated batches of every family at
4,096-16,384 nodes the model's variables were 0.8-2.8 times :attr:`SearchSize.pairs`, and
its cells equal the model's (docs/scale.md, *The search mode follows the model*).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.compiled import UNHEALTHY, JobView, Problem
from models.derived import Derived


@dataclass(frozen=True)
class SearchSize:
    """What a whole-batch model of a problem would hold (see the module docstring).

    Attributes
    ----------
    classes
        Classes of interchangeable completely free usable nodes.
    preferred
        Completely free nodes some pending rank prefers (one cell each).
    pairs
        The (job, cell) and (job, candidate node) pairs the model would give variables to.
    tree_pairs
        The part of ``pairs`` of the jobs placed in multilevel trees.
    free_nodes
        Completely free usable nodes (the cells' nodes).
    ranks
        Pending ranks of the batch.
    """

    classes: int
    preferred: int
    pairs: int
    tree_pairs: int
    free_nodes: int
    ranks: int

    @property
    def cells(self) -> int:
        """Cells of the model: the classes plus the preferred nodes."""
        return self.classes + self.preferred


def node_level(job: JobView) -> bool:
    """Whether the model places ``job`` node by node (ordinary jobs, single-task jobs of
    grouped families, partly running jobs), not as groups of whole nodes."""
    return not job.rules.grouped or not job.whole_node or job.partly_running


def _preferred(job: JobView, whole: np.ndarray) -> np.ndarray:
    """The completely free nodes ``job``'s pending ranks prefer (origins, fault nodes)."""
    origins = job.origin  # -1 for running ranks and ranks without a cache entry
    keep = origins >= 0
    if not job.prefer_previous:
        keep &= job.fault.astype(bool)
    nodes = origins[keep].astype(np.int64)
    return np.unique(nodes[whole[nodes]])


def _class_sizes(columns: list[np.ndarray], mask: np.ndarray) -> np.ndarray:
    """How many nodes of ``mask`` share each distinct row of ``columns``."""
    if not mask.any():
        return np.zeros(0, dtype=np.int64)
    keys = [np.asarray(c)[mask] for c in columns]
    order = np.lexsort(keys)
    change = np.zeros(len(order), dtype=bool)
    change[0] = True
    for key in keys:
        ordered = key[order]
        change[1:] |= ordered[1:] != ordered[:-1]
    starts = np.flatnonzero(change)
    return np.diff(np.append(starts, len(order)))


def whole_batch_size(problem: Problem) -> SearchSize:
    """Count what a whole-batch model of ``problem`` would hold (module docstring).

    Numpy only, linear in the nodes and ranks: 3-11 ms of CPU at 16,384 nodes.
    """
    whole = problem.whole_free
    columns = [problem.npus, problem.health]
    domains: list[list[np.ndarray]] = []  # the columns that name a domain, per kind
    rules = [job.rules for job in problem.jobs]
    if any(r.in_super_pod for r in rules):
        columns.append(problem.super_pod)
        domains.append([problem.super_pod])
    if any(r.in_rack for r in rules):
        columns.append(problem.rack)
        domains.append([problem.super_pod, problem.rack])
    if any(r.in_tree for r in rules) and (problem.node_tree >= 0).any():
        columns.append(problem.node_tree)
        for name in problem.tree_names:
            values = problem.trees[name].level_value
            columns.extend(values)
            # a level-i domain is named by the labels of levels i..D
            domains.extend([problem.node_tree, *values[i:]] for i in range(len(values)))
    preferred = [_preferred(job, whole) for job in problem.jobs]
    special = (np.unique(np.concatenate(preferred)) if preferred
               else np.zeros(0, dtype=np.int64))
    plain = whole.copy()
    plain[special] = False
    counts = _class_sizes(columns, plain)
    classes = len(counts)
    cells = classes + len(special)
    # a whole-node job gets variables per cell it may take and per candidate domain
    grouped = cells + sum(len(_class_sizes(named, whole)) for named in domains)
    node_jobs = [job for job in problem.jobs if node_level(job)]
    pool = 0
    if node_jobs:
        # node-level jobs share one candidate pool: per class of interchangeable nodes
        # (whole free, or partly used by free chips), as many nodes as they have ranks
        demand = sum(int(job.to_place.sum()) for job in node_jobs)
        partly = (problem.free > 0) & ~whole & (problem.health != UNHEALTHY)
        partly_columns = [problem.free, problem.npus, problem.health,
                          problem.super_pod >= 0, problem.rack >= 0]
        pool = (len(special) + int(np.minimum(counts, demand).sum())
                + int(np.minimum(_class_sizes(partly_columns, partly), demand).sum()))
    pairs = tree_pairs = ranks = 0
    for job in problem.jobs:
        ranks += int(job.to_place.sum())
        mine = 2 * pool if node_level(job) else grouped
        pairs += mine
        if job.rules.in_tree:
            tree_pairs += mine
    return SearchSize(classes, len(special), pairs, tree_pairs, int(whole.sum()), ranks)


#: :func:`whole_batch_size` of a problem, computed once per problem.
WHOLE_BATCH_SIZE: Derived[None, SearchSize] = Derived("whole-batch model size")


def search_size(problem: Problem) -> SearchSize:
    """:func:`whole_batch_size` of ``problem``, computed once (``Problem.derived``)."""
    return problem.derived.get_or_compute(WHOLE_BATCH_SIZE, None,
                                          lambda: whole_batch_size(problem))
