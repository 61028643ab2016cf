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
from collections import Counter, defaultdict

import numpy as np

from heuristics.state import ClusterState
from models.compiled import JobView, Problem

Key = tuple[int, ...]


def _leaves(ordered: np.ndarray, values: list[np.ndarray]) -> defaultdict[Key, list[int]]:
    """The ``ordered`` nodes by leaf: leaf key (level values, level1 first) → nodes, leaves
    in the order of their first node, nodes in the given order."""
    leaves: defaultdict[Key, list[int]] = defaultdict(list)
    if not len(ordered):
        return leaves
    radix = [int(v.max()) + 1 for v in values]
    if float(np.prod(np.asarray(radix, dtype=np.float64))) >= 2.0**62:  # no int64 code
        for node, *leaf in zip(ordered.tolist(), *(v.tolist() for v in values), strict=True):
            leaves[tuple(leaf)].append(node)
        return leaves
    code = np.zeros(len(ordered), dtype=np.int64)
    for v, base in zip(values, radix, strict=True):
        code = code * base + v
    _, first, group_of = np.unique(code, return_index=True, return_inverse=True)
    bounds = np.concatenate(([0], np.cumsum(np.bincount(group_of)))).tolist()
    members: list[int] = ordered[np.argsort(group_of, kind="stable")].tolist()
    keys = np.stack(values)[:, first].T.tolist()
    for g in np.argsort(first, kind="stable").tolist():
        leaves[tuple(keys[g])] = members[bounds[g]:bounds[g + 1]]
    return leaves


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
    columns: list[list[int]] = [view.level_value[i].tolist() for i in range(k)]
    origin: list[int] = job.origin.tolist()
    fault: list[bool] = job.fault.tolist()
    wants_l: list[bool] = wants.tolist()

    def key(node: int, level: int) -> Key:  # level 1..k
        return tuple(columns[i][node] for i in range(level - 1, k))

    ordered = nodes[np.argsort(problem.natural_pos[nodes], kind="stable")]
    leaf_nodes = _leaves(ordered, [view.level_value[i][ordered] for i in range(k)])
    children: dict[Key, set[Key]] = defaultdict(set)
    for leaf in leaf_nodes:
        for level in range(1, k):
            children[leaf[level:]].add(leaf[level - 1:])
    # cap[(level, domain key)]: groups of that level the domain can still hold
    cap: dict[Key, int] = {}
    for leaf, members in leaf_nodes.items():
        cap[leaf] = len(members) // levels[0]
    for level in range(2, k + 1):
        m = levels[level - 1] // levels[level - 2]
        for dom in {leaf[level - 1:] for leaf in leaf_nodes}:
            cap[dom] = sum(cap[c] for c in children[dom]) // m
    tops = {leaf[k - 1:] for leaf in leaf_nodes}
    origin_ok = set(nodes.tolist())
    fault_nodes = {int(o) for o in job.origin[(job.origin >= 0) & job.fault]}
    out = np.full(n, -1, dtype=np.int64)

    def recompute(leaf: Key) -> None:
        cap[leaf] = len(leaf_nodes[leaf]) // levels[0]
        for level in range(2, k + 1):
            dom = leaf[level - 1:]
            m = levels[level - 1] // levels[level - 2]
            cap[dom] = sum(cap[c] for c in children[dom]) // m

    def votes(ranks: range, level: int) -> Counter[Key]:
        out_votes: Counter[Key] = Counter()
        for r in ranks:
            if wants_l[r] and origin[r] in origin_ok:
                out_votes[key(origin[r], level)] += 1
        return out_votes

    def place(level: int, group: int, inside: set[Key]) -> bool:
        size = levels[level - 1]
        ranks = range(group * size, (group + 1) * size)
        options = [d for d in inside if cap.get(d, 0) >= 1]
        if not options:
            return False
        vote = votes(ranks, level)
        dom = min(options, key=lambda d: (-vote.get(d, 0), d))
        if level == 1:
            free = leaf_nodes[dom]
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
            leaf_nodes[dom] = [x for x in free if x not in used]
            recompute(dom)
            return True
        m = size // levels[level - 2]
        inner = children[dom]
        sub = sorted(range(group * m, (group + 1) * m),
                     key=lambda g: (-max(votes(range(g * levels[level - 2],
                                                     (g + 1) * levels[level - 2]),
                                               level - 1).values(), default=0), g))
        # (``place`` is deleted only after its last call, see below)
        return all(place(level - 1, g, inner) for g in sub)  # noqa: F821

    top_size = levels[-1]
    groups = sorted(range(n // top_size), key=lambda g: (
        -max(votes(range(g * top_size, (g + 1) * top_size), k).values(), default=0), g))
    try:
        for g in groups:
            if deadline is not None and time.perf_counter() > deadline:
                return None
            if not place(k, g, tops):
                return None
    finally:
        # ``place`` calls itself through its closure, a reference cycle that would keep
        # every list above alive until the cyclic collector finds it (at 32,768 nodes
        # about 300,000 objects of one construction, collected in 0.2 s of CPU)
        del place
    if (out < 0).any() or len(set(out.tolist())) != n:
        return None
    return out.astype(np.int32)
