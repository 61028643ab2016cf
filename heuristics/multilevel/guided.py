"""Origin-guided layout of one multilevel job (a warm-start candidate, not upstream's).

Every group goes, top level first, to the domain of its level holding most of its ranks'
cached nodes among the domains that can still hold it, inside its parent's domain; a
level1 group takes its ranks' cached nodes there and fills up with other free nodes
(fault ranks' old nodes last).  A level ``i`` domain can hold ``cap_i`` groups:
``free // a1`` for level1, ``⌊Σ children's cap / (a_i / a_(i-1))⌋`` above; taking a group
lowers its domain's ``cap`` by exactly one, so a group never runs out of room once its
domain is chosen.  Used by :mod:`heuristics.multilevel.first` next to upstream's layout.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter

import numpy as np

from heuristics.state import ClusterState
from models.compiled import JobView, Problem


class _Domains:
    """The domains of levels ``1..k`` that a job's usable nodes lie in, as integer codes.

    ``code[i][x]`` is the code of the level ``i + 1`` domain of the ``x``-th node of
    ``ordered``: the dense rank of its key, the tuple of its level values from level
    ``i + 1`` up to level ``k``, so that codes compare as the keys do (level ``i + 1``'s
    value first).  ``parent[i][d]`` is the level ``i + 2`` domain holding level ``i + 1``
    domain ``d``; :meth:`children` and :meth:`leaf_nodes` list a domain's parts and a
    leaf's nodes (in the given order) when first asked.  Building it costs
    numpy passes over the nodes and Python work per domain only (at 65,536 nodes: 8,192
    leaves), not per node.
    """

    def __init__(self, ordered: np.ndarray, values: list[np.ndarray]) -> None:
        k = len(values)
        code: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * k
        # the values are small indices (>= 0): a level's own value ranks as itself
        top = values[k - 1].astype(np.int64)
        present = np.zeros(int(top.max(initial=-1)) + 1, dtype=np.int64)
        present[top] = 1
        code[k - 1] = (np.cumsum(present) - 1)[top]
        for i in range(k - 2, -1, -1):
            pair = values[i].astype(np.int64) * (int(code[i + 1].max(initial=-1)) + 1) \
                + code[i + 1]
            code[i] = np.unique(pair, return_inverse=True)[1].astype(np.int64)
        self.code = code
        self.count = [int(c.max(initial=-1)) + 1 for c in code]
        self.parent: list[list[int]] = []
        # per level above the first: the domains below in the order of their parent
        # (ascending codes inside one), and where each parent's start
        self._inside: list[tuple[np.ndarray, list[int]]] = [(np.zeros(0, dtype=np.int64), [])]
        self._children: dict[tuple[int, int], list[int]] = {}
        for i in range(k - 1):
            up = np.zeros(self.count[i], dtype=np.int64)
            up[code[i]] = code[i + 1]
            self.parent.append(up.tolist())
            inside = np.argsort(up, kind="stable")
            bounds = np.concatenate(([0], np.cumsum(np.bincount(
                up, minlength=self.count[i + 1])))).tolist()
            self._inside.append((inside, bounds))
        by_leaf = np.argsort(code[0], kind="stable")
        self._members = ordered[by_leaf]
        self._bounds: list[int] = np.concatenate(([0], np.cumsum(np.bincount(
            code[0], minlength=self.count[0])))).tolist()
        self._leaf: dict[int, list[int]] = {}

    def children(self, level: int, domain: int) -> list[int]:
        """The level ``level - 1`` domains inside level ``level`` domain ``domain``
        (ascending codes)."""
        found = self._children.get((level, domain))
        if found is None:
            inside, bounds = self._inside[level - 1]
            found = inside[bounds[domain]:bounds[domain + 1]].tolist()
            self._children[(level, domain)] = found
        return found

    def leaf_size(self) -> np.ndarray:
        """Nodes per leaf (level 1 domain), by code."""
        return np.diff(np.asarray(self._bounds, dtype=np.int64))

    def leaf_nodes(self, leaf: int) -> list[int]:
        """The nodes still free in ``leaf``, in the given order (changed in place by the
        caller)."""
        found = self._leaf.get(leaf)
        if found is None:
            found = self._members[self._bounds[leaf]:self._bounds[leaf + 1]].tolist()
            self._leaf[leaf] = found
        return found

    def set_leaf_nodes(self, leaf: int, nodes: list[int]) -> None:
        self._leaf[leaf] = nodes


def guided_layout(problem: Problem, job: JobView, state: ClusterState,
                  deadline: float | None = None) -> np.ndarray | None:
    """Node per rank of ``job`` on the nodes ``state`` offers, or ``None`` (also when the
    ``time.perf_counter()`` value ``deadline`` passes between two top-level groups)."""
    levels = list(job.levels)
    n = job.tasks
    if (not levels or not job.whole_node or job.partly_running or not job.prefer_previous
            or any(n % a for a in levels)
            or any(b % a for a, b in itertools.pairwise(levels))):
        return None
    k = len(levels)
    whole = state.whole_free(problem) & (problem.npus == job.npu_per_task)
    wants = (job.origin >= 0) & ~job.fault
    # the tree holding most of the job's cached nodes among its usable ones
    best: tuple[int, np.ndarray] | None = None
    best_count = 0
    for t, name in enumerate(problem.tree_names):
        view = problem.trees[name]
        if view.depth < k:
            continue
        ok = whole & (problem.node_tree == t)
        for i in range(k):
            ok = ok & (view.level_value[i] >= 0)
        count = int(ok[job.origin[wants]].sum()) if wants.any() else 0
        if count > best_count:
            best, best_count = (t, ok), count
    if best is None:
        return None
    view = problem.trees[problem.tree_names[best[0]]]
    nodes = np.flatnonzero(best[1])
    origin: list[int] = job.origin.tolist()
    fault: list[bool] = job.fault.tolist()
    ordered = nodes[np.argsort(problem.natural_pos[nodes], kind="stable")]
    dom = _Domains(ordered, [view.level_value[i][ordered] for i in range(k)])
    # the domain code of each rank's cached node per level (-1: not wanted or not usable)
    voting = wants & best[1][np.maximum(job.origin, 0)]
    position = np.full(problem.num_nodes, -1, dtype=np.int64)
    position[ordered] = np.arange(len(ordered))
    at = position[np.where(voting, job.origin, 0)]
    rank_dom: list[list[int]] = [np.where(voting, dom.code[i][at], -1).tolist()
                                 for i in range(k)]
    # cap[level - 1][domain]: groups of that level the domain can still hold
    cap: list[list[int]] = [(dom.leaf_size() // levels[0]).tolist()]
    for level in range(2, k + 1):
        m = levels[level - 1] // levels[level - 2]
        sums = np.zeros(dom.count[level - 1], dtype=np.int64)
        np.add.at(sums, np.asarray(dom.parent[level - 2], dtype=np.int64),
                  np.asarray(cap[level - 2], dtype=np.int64))
        cap.append((sums // m).tolist())
    fault_nodes = {int(o) for o in job.origin[(job.origin >= 0) & job.fault]}
    out = np.full(n, -1, dtype=np.int64)

    def recompute(leaf: int) -> None:
        cap[0][leaf] = len(dom.leaf_nodes(leaf)) // levels[0]
        d = leaf
        for level in range(2, k + 1):
            d = dom.parent[level - 2][d]
            m = levels[level - 1] // levels[level - 2]
            cap[level - 1][d] = sum(cap[level - 2][c] for c in dom.children(level, d)) // m

    def votes(ranks: range, level: int) -> Counter[int]:
        column = rank_dom[level - 1]
        return Counter(d for d in (column[r] for r in ranks) if d >= 0)

    def choose(level: int, vote: Counter[int], inside: list[int], above: int) -> int:
        """The domain of ``inside`` (ascending codes, every one inside ``above``, -1 at
        the top) with room for a group: the most votes, then the lowest code."""
        room = cap[level - 1]
        up = dom.parent[level - 1] if level < k else None
        voted = [(-c, d) for d, c in vote.items()
                 if room[d] >= 1 and (up is None or up[d] == above)]
        if voted:
            return min(voted)[1]
        return next((d for d in inside if room[d] >= 1), -1)

    def place(level: int, group: int, inside: list[int], above: int) -> bool:
        size = levels[level - 1]
        ranks = range(group * size, (group + 1) * size)
        chosen = choose(level, votes(ranks, level), inside, above)
        if chosen < 0:
            return False
        if level == 1:
            free = dom.leaf_nodes(chosen)
            taken: dict[int, int] = {}
            for r in ranks:
                o = origin[r]
                if wants_l[r] and o in free and o not in taken.values():
                    taken[r] = o
            rest = [x for x in free if x not in set(taken.values())]
            rest.sort(key=lambda x: x in fault_nodes)
            for r in ranks:
                if r in taken:
                    continue
                # a fault rank takes another node than its old one when one is left
                pick = next((x for x in rest if not (fault[r] and origin[r] == x)), rest[0])
                rest.remove(pick)
                taken[r] = pick
            for r, node in taken.items():
                out[r] = node
            used = set(taken.values())
            dom.set_leaf_nodes(chosen, [x for x in free if x not in used])
            recompute(chosen)
            return True
        m = size // levels[level - 2]
        inner = dom.children(level, chosen)
        sub = sorted(range(group * m, (group + 1) * m),
                     key=lambda g: (-max(votes(range(g * levels[level - 2],
                                                     (g + 1) * levels[level - 2]),
                                               level - 1).values(), default=0), g))
        # (``place`` is deleted only after its last call, see below)
        return all(place(level - 1, g, inner, chosen) for g in sub)  # noqa: F821

    wants_l: list[bool] = wants.tolist()
    tops = list(range(dom.count[k - 1]))
    top_size = levels[-1]
    groups = sorted(range(n // top_size), key=lambda g: (
        -max(votes(range(g * top_size, (g + 1) * top_size), k).values(), default=0), g))
    try:
        for g in groups:
            if deadline is not None and time.perf_counter() > deadline:
                return None
            if not place(k, g, tops, -1):
                return None
    finally:
        # ``place`` calls itself through its closure, a reference cycle that would keep
        # every list above alive until the cyclic collector finds it (at 32,768 nodes
        # about 300,000 objects of one construction, collected in 0.2 s of CPU)
        del place
    if (out < 0).any() or len(set(out.tolist())) != n:
        return None
    return out.astype(np.int32)
