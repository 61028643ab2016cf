"""Level structure of a multilevel resource tree, shared by every scheduling run.

:class:`TreeIndex` orders the nodes of one topotree (trimmed to a job's levels) so that
every domain at every level is a contiguous run of positions; :class:`Span` is the domain
structure below one domain of it (run starts, parents, first children), which every
:class:`heuristics.multilevel.run.Run` scheduling in that domain shares.  Both depend on
the problem alone and are kept in ``Problem.derived`` across jobs
(:meth:`heuristics.multilevel.context.Context.index`).  Part of
:mod:`heuristics.multilevel`.
"""

from __future__ import annotations

import numpy as np

from models.compiled import TreeView


class TreeIndex:
    """One resource tree trimmed to ``depth`` levels, over the nodes of ``members``.

    ``order`` lists those nodes sorted by label value at level ``depth`` down to level1,
    then natural node order, so every domain is a contiguous run.  ``pid[d]`` gives, per
    position, the run id of the domain at scheduling depth ``d`` (depth d = level
    ``depth + 1 - d``; depth 0 = the tree root), ``starts[d]`` the run starts.
    """

    def __init__(self, view: TreeView, members: np.ndarray, depth: int,
                 everyone: np.ndarray) -> None:
        self.view = view
        self.depth = depth
        self.reserve = view.reserved_nodes
        self.order = everyone[members[everyone]]  # ``everyone``: Problem.label_order
        count = len(self.order)
        self.pos = np.full(len(members), -1, dtype=np.int64)
        self.pos[self.order] = np.arange(count)
        self._spans: dict[tuple[int, int, int, int], Span] = {}
        change = np.zeros(count, dtype=bool)
        if count:
            change[0] = True
        self.pid: list[np.ndarray] = [np.zeros(count, dtype=np.int64)]
        self.starts: list[np.ndarray] = [np.zeros(1 if count else 0, dtype=np.int64)]
        for d in range(1, depth + 1):
            values = view.level_value[depth - d][self.order]
            change = change.copy()
            change[1:] |= values[1:] != values[:-1]
            self.pid.append(np.cumsum(change) - 1)
            self.starts.append(np.flatnonzero(change))

    def span(self, d0: int, k1: int, lo: int, hi: int) -> Span:
        """The domains of depths ``d0..k1`` inside positions ``[lo, hi)`` (cached)."""
        key = (d0, k1, lo, hi)
        found = self._spans.get(key)
        if found is None:
            found = self._spans[key] = Span(self, d0, k1, lo, hi)
        return found

    def run_of(self, d: int, node: int) -> tuple[int, int]:
        """Position range ``[lo, hi)`` of ``node``'s domain at depth ``d``."""
        if d == 0:
            return 0, len(self.order)
        rid = int(self.pid[d][self.pos[node]])
        starts = self.starts[d]
        hi = int(starts[rid + 1]) if rid + 1 < len(starts) else len(self.order)
        return int(starts[rid]), hi


def divmod_by(values: np.ndarray, by: int) -> tuple[np.ndarray, np.ndarray]:
    """``values // by`` and ``values % by`` with one division (none when ``by`` is 1)."""
    if by == 1:
        return values, np.zeros_like(values)
    quotient = values // by
    return quotient, values - quotient * by


def group_runs(table: dict[int, list[int]], ids: np.ndarray, values: list[int]) -> None:
    """``table[g]``: the ``values`` whose ``ids`` entry is ``g``, in order, for
    non-decreasing ``ids`` (one slice per run of equal ids)."""
    cut = (np.flatnonzero(ids[1:] != ids[:-1]) + 1).tolist()
    bounds = [0, *cut, len(values)]
    for g, a, b in zip(ids[bounds[:-1]].tolist(), bounds[:-1], bounds[1:], strict=True):
        table[g] = values[a:b]


def all_true(count: int) -> np.ndarray:
    """A read-only all-true mask of ``count`` entries (shared, as it never changes)."""
    found = _ALL_TRUE.get(count)
    if found is None:
        found = _ALL_TRUE[count] = np.ones(count, dtype=bool)
        found.flags.writeable = False
    return found


_ALL_TRUE: dict[int, np.ndarray] = {}


class Span:
    """The domains of one depth-``d0`` domain (positions ``[lo, hi)`` of a
    :class:`TreeIndex`) down to level1, the structure every
    :class:`heuristics.multilevel.run.Run` in it shares.

    Per depth ``d0..k1``: ``starts`` (run starts, positions relative to ``lo``) and
    ``owner`` (index of the parent domain); ``pos_dom`` the level1 domain of each
    position, ``leaf_hi`` the end of each level1 domain, ``seq_base`` the first sequence
    number per depth (domains are numbered breadth first, in label order).
    """

    def __init__(self, tix: TreeIndex, d0: int, k1: int, lo: int, hi: int) -> None:
        count = hi - lo
        self.node_arr = tix.order[lo:hi]
        zero = np.zeros(1, dtype=np.int64)
        self.starts: dict[int, np.ndarray] = {d0: zero}
        self.owner: dict[int, np.ndarray] = {d0: np.zeros(1, dtype=np.int64)}
        self.pos_dom = np.zeros(count, dtype=np.int64)
        prev = zero
        change = np.ones(count, dtype=bool)
        for d in range(d0 + 1, k1 + 1):
            ids = tix.pid[d][lo:hi]
            change[1:] = ids[1:] != ids[:-1]
            starts = np.flatnonzero(change)
            self.owner[d] = np.searchsorted(prev, starts, side="right") - 1
            self.starts[d] = starts
            prev = starts
            if d == k1:
                self.pos_dom = np.cumsum(change) - 1
        starts1 = self.starts[k1]
        self.leaf_hi = np.append(starts1[1:], count) if len(starts1) else starts1
        self.size = {d: len(s) for d, s in self.starts.items()}
        # first child of each domain, per parent depth (for np.add.reduceat)
        self.kid_starts = {d: np.searchsorted(self.owner[d + 1], np.arange(self.size[d]))
                           for d in range(d0, k1)}
        self.seq_base = {d0: 0}
        for d in range(d0 + 1, k1 + 1):
            self.seq_base[d] = (1 if d == d0 + 1 else self.seq_base[d - 1] + self.size[d - 1])


__all__ = ["Span", "TreeIndex", "all_true", "divmod_by", "group_runs"]
