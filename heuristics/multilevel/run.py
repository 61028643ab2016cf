"""One multilevel ``Schedule`` call: the scheduling tree and its two passes.

:class:`Run` builds the scheduling tree (``schedulingTreeNode``: ``alloc`` and the
fragment score ``frag`` of every domain, the reserved leaves) over one domain of a
:class:`heuristics.multilevel.tree.TreeIndex`, vectorised per depth, then runs pass 1
(``traverseTree`` / ``traverseSiblings``: best fit by ``(frag, alloc)``, overflow by
``(alloc, frag)``, preferred siblings first) and pass 2 (untraversed and reserved
leaves complete partial groups), building the task tree bottom-up (§2.6.5–§2.6.8).
:class:`Dom` objects are made only for the domains the traversal visits.  Part of
:mod:`heuristics.multilevel`; the job-level driver is
:class:`heuristics.multilevel.context.Context`.
"""

from __future__ import annotations

from bisect import bisect_left
from functools import cached_property
from typing import Any, NamedTuple, Protocol

import numpy as np

from heuristics.multilevel.tree import Span, TreeIndex, all_true, divmod_by, group_runs

#: Weight of the children's fragment scores in a parent's score (upstream ``frag`` formula).
_CHILD_FRAG_WEIGHT = 10

#: Up to this many changed leaves, :meth:`Run._plain_counts` updates its last answer.
_INCREMENTAL = 256

#: Up to this many children, :meth:`Run._child_order` sorts in Python.
_SMALL = 64


class JobOfRun(Protocol):
    """What a :class:`Run` reads of the job it schedules
    (:class:`heuristics.multilevel.context.Context`)."""

    num_nodes: int
    tasks: int
    #: :meth:`leaf_key` of every node neither preferred nor reserved, as one integer
    leaf_rank: list[int]
    #: the last leaf counts per span (:meth:`Run._plain_counts`)
    counts: dict[int, tuple[Span, np.ndarray, np.ndarray, np.ndarray | None]]

    def leaf_key(self, pref: dict[int, int], reserved: frozenset[int] | set[int],
                 x: int) -> tuple[int, int]:
        """Order of leaf ``x`` inside its level1 domain."""
        ...


class Kids(NamedTuple):
    """The children of a domain, as :meth:`Run._child_order` ranks them."""

    holders: list[int]  # children holding preferred nodes, ascending
    order: list[int]  # children with room, best-fit order
    lo: int  # index of the first child; alloc/frag are indexed from it
    alloc: list[int]
    frag: list[int]


class Dom:
    """A domain of the scheduling tree (``schedulingTreeNode``).

    Domains are materialised lazily by :meth:`Run.dom` from the run's per-depth arrays:
    only those the traversal reaches become objects.
    """

    __slots__ = (
        "alloc", "depth", "frag", "free", "index", "korder", "leaves", "left",
        "minrank", "order", "parent", "prefs", "reserved", "seq", "sufficient", "want",
    )

    def __init__(self, depth: int, parent: Dom | None, seq: int, index: int) -> None:
        self.depth = depth
        self.parent = parent
        self.seq = seq
        self.index = index  # position among the run's domains of this depth
        self.leaves: list[int] | None = None  # level1 only, made by Run.leaves_of
        self.reserved: frozenset[int] | set[int] = frozenset()
        self.alloc = 0
        self.left = 0
        self.frag = 0
        self.sufficient = True
        self.free: list[Any] = []
        self.prefs: list[int] = []
        self.want = 0
        self.minrank = 0
        self.order: list[int] | None = None
        self.korder: Kids | None = None


class Run:
    """One ``Schedule`` call: a scheduling tree over one domain and the two passes.

    ``req[d]`` is the number of pods a task at depth ``d`` holds (``req[d0]`` the whole
    (sub-)job, ``req[-1] == 1``); ``m[d] = req[d] // req[d + 1]`` is ``maxChildren``.

    The tree is held as arrays per depth (run starts, owner, ``alloc``, ``frag``; the
    ``initNode`` pass is vectorised); :class:`Dom` objects are created only for the
    domains the traversal visits, so a repair inside a large domain costs what it visits.
    """

    def __init__(
        self,
        ctx: JobOfRun,
        tix: TreeIndex,
        req: list[int],
        d0: int,
        idx: np.ndarray,
        pref: dict[int, int],
        span: tuple[int, int] | None = None,
        offered: np.ndarray | None = None,
    ) -> None:
        self.ctx = ctx
        self.req = req
        self.k1 = len(req) - 2  # depth of level1 domains
        self.m = [req[d] // req[d + 1] for d in range(len(req) - 1)]
        self.d0 = d0
        self.pref = pref
        self.reserve = tix.reserve
        self.used = bytearray(ctx.num_nodes)
        self.done = False
        self.result: list[Any] = []
        self._build(tix, idx, span, offered)
        self._init()
        self.root = self.dom(d0, 0)

    # ----------------------------------------------------------------- construction
    def _build(self, tix: TreeIndex, idx: np.ndarray, span: tuple[int, int] | None,
               offered: np.ndarray | None) -> None:
        """The run's domains (cached per domain of ``tix``) and the leaves it offers.

        ``span`` is the position range of the depth-``d0`` domain the run schedules in
        (default: the whole tree); ``idx`` the positions it offers, ascending.  Positions
        of the run are relative to the span; domains none of whose leaves are offered stay
        in the arrays with no room (``alloc`` 0), which changes no choice.  ``offered``,
        when given, is the same as a mask over the span (the caller's, never changed).
        """
        lo, hi = span if span is not None else (0, len(tix.order))
        shape = tix.span(self.d0, self.k1, lo, hi)
        self.shape = shape
        self.node_arr = shape.node_arr
        self.starts = shape.starts
        self.owner = shape.owner
        self.pos_dom = shape.pos_dom
        self.size = shape.size
        self.seq_base = shape.seq_base
        self.span_lo = lo
        if offered is None:
            offered = np.zeros(hi - lo, dtype=bool)
            offered[idx - lo] = True
        self.offered = offered
        self.count = len(idx)
        self.tree_pos = tix.pos
        self.doms: dict[int, dict[int, Dom]] = {d: {} for d in range(self.d0, self.k1 + 1)}

    def _init(self) -> None:
        """``initNode`` bottom-up on arrays: reserved leaves, ``alloc``, ``frag`` (§2.6.5)."""
        k1, req, m, pref = self.k1, self.req, self.m, self.pref
        reserve, count = self.reserve, self.count
        starts1 = self.starts[k1]
        n1 = len(starts1)
        offered = self.offered
        self.leaf_lo = starts1
        self.leaf_hi = self.shape.leaf_hi
        pos_dom = self.pos_dom
        # positions of the preferred nodes among the run's leaves, ascending, and ranks
        pref_pos = np.zeros(0, dtype=np.int64)
        rank_at: dict[int, int] = {}
        if pref and count:
            nodes = np.fromiter(pref.keys(), dtype=np.int64, count=len(pref))
            at = self.tree_pos[nodes] - self.span_lo
            inside = (at >= 0) & (at < len(offered))
            at = at[inside]
            pref_pos = np.sort(at[offered[at]])
            rank_at = dict(zip(pref_pos.tolist(),
                               map(pref.__getitem__, self.node_arr[pref_pos].tolist()),
                               strict=True))
        reserved: np.ndarray | None = None
        if not rank_at:
            # offered leaves per level1 domain, and the reserve: the first offered leaves
            # of each domain in natural order (none preferred)
            leaves, reserved = self._plain_counts()
        else:
            # (every domain of the span has a position)
            leaves = (np.add.reduceat(offered, starts1, dtype=np.int64) if n1 and len(offered)
                      else np.zeros(n1, dtype=np.int64))
        self.leaf_count = leaves
        if reserve > 0 and rank_at:
            # Tie-break: reserve the first non-preferred leaves in natural order.
            is_pref = np.zeros(len(offered), dtype=bool)
            is_pref[pref_pos] = True
            other = offered & ~is_pref
            before: np.ndarray = np.cumsum(other) - other
            rank: np.ndarray = before - before[starts1][pos_dom] if len(offered) else before
            reserved = other & (rank < reserve)
            others = np.bincount(pos_dom[other], minlength=n1)
            for i in np.flatnonzero((others < reserve) & (leaves > others)).tolist():
                lo, hi = self.leaf_range(i)
                extra = sorted((p for p in range(lo, hi) if is_pref[p]),
                               key=rank_at.__getitem__, reverse=True)
                reserved[extra[:reserve - int(others[i])]] = True
        if reserve > 0:
            sub = leaves - np.minimum(reserve, leaves)
            sufficient = leaves >= reserve
        else:
            sub = leaves
            sufficient = all_true(n1)
        self.reserved_pos = (np.flatnonzero(reserved) if reserved is not None
                             else np.zeros(0, dtype=np.int64))
        self.sufficient = sufficient
        alloc1, rest = divmod_by(sub, m[k1])
        self.alloc: dict[int, np.ndarray] = {k1: alloc1}
        self.frag: dict[int, np.ndarray] = {k1: rest * req[k1 + 1]}
        # Preferred ranks per domain, in leaf order (non-reserved leaves; upper levels only
        # through sufficient level1 domains).
        self.prefs: dict[int, dict[int, list[int]]] = {d: {} for d in self.doms}
        held = pref_pos if reserved is None else pref_pos[~reserved[pref_pos]]
        if len(held):
            # ``held`` is ascending, so every domain's ranks are one contiguous run
            ranks = [rank_at[p] for p in held.tolist()]
            group_runs(self.prefs[k1], pos_dom[held], ranks)
            keep = sufficient[pos_dom[held]]
            up = held[keep]
            if len(up):
                ranks_up = ranks if len(up) == len(held) else [
                    r for r, ok in zip(ranks, keep.tolist(), strict=True) if ok]
                for d in range(k1 - 1, self.d0 - 1, -1):
                    ids = np.searchsorted(self.starts[d], up, side="right") - 1
                    group_runs(self.prefs[d], ids, ranks_up)
        # parents sum their children (contiguous runs; every domain of the span has one);
        # an insufficient level1 domain counts for nothing
        alloc, frag = self.alloc[k1], self.frag[k1]
        if reserve > 0:
            alloc, frag = alloc * sufficient, frag * sufficient
        kids = self.shape.kid_starts
        for d in range(k1 - 1, self.d0 - 1, -1):
            sub = np.add.reduceat(alloc, kids[d])
            acc = np.add.reduceat(frag, kids[d])
            alloc, rest = divmod_by(sub, m[d])
            self.alloc[d] = alloc
            frag = self.frag[d] = rest * req[d + 1] + _CHILD_FRAG_WEIGHT * acc

    def _plain_counts(self) -> tuple[np.ndarray, np.ndarray | None]:
        """Offered leaves per level1 domain and (with a reserve) the reserved leaves,
        when no preferred node is offered: the first ``reserve`` offered leaves of each
        domain in natural order.

        Successive runs over one span (the repairs of a job) offer nearly the same
        leaves: the last answer per span is kept (in ``Problem.derived``, so the later jobs
        of a batch start from it too) and only the level1 domains whose offered leaves
        changed are counted again.  Arrays handed out are never changed
        afterwards (an update works on copies).
        """
        shape, offered, reserve = self.shape, self.offered, self.reserve
        starts1 = self.starts[self.k1]
        cache = self.ctx.counts
        found = cache.get(id(shape))
        if found is not None and found[0] is shape:
            diff = np.flatnonzero(found[1] != offered)
            if len(diff) <= _INCREMENTAL:
                leaves = found[2].copy()
                reserved = None if found[3] is None else found[3].copy()
                if len(diff):
                    # the changed domains' positions, one run per domain, counted again
                    doms = np.unique(self.pos_dom[diff])
                    lo = starts1[doms]
                    lens = self.shape.leaf_hi[doms] - lo
                    first = np.cumsum(lens) - lens
                    pos = np.repeat(lo - first, lens) + np.arange(int(lens.sum()))
                    seg = offered[pos]
                    leaves[doms] = np.add.reduceat(seg, first, dtype=np.int64)
                    if reserved is not None:
                        before = np.cumsum(seg) - seg
                        rank = before - np.repeat(before[first], lens)
                        reserved[pos] = seg & (rank < reserve)
                cache[id(shape)] = (shape, offered, leaves, reserved)
                return leaves, reserved
        n1 = len(starts1)
        leaves = (np.add.reduceat(offered, starts1, dtype=np.int64) if n1 and len(offered)
                  else np.zeros(n1, dtype=np.int64))
        if reserve > 0:
            before = np.cumsum(offered) - offered
            rank = before - before[starts1][self.pos_dom] if len(offered) else before
            reserved = offered & (rank < reserve)
        else:
            reserved = None
        cache[id(shape)] = (shape, offered, leaves, reserved)
        return leaves, reserved

    @cached_property
    def holders(self) -> dict[int, list[int]]:
        """Per depth, the domains holding preferred nodes, ascending."""
        return {d: sorted(i for i, p in table.items() if p) for d, table in self.prefs.items()}

    def dom(self, d: int, i: int) -> Dom:
        """The domain ``i`` of depth ``d``, created (with its ancestors) on first use.

        Values are read from the per-depth arrays one at a time: a traversal visits few
        of the domains, so converting whole arrays to lists costs more than it saves.
        """
        found = self.doms[d].get(i)
        if found is not None:
            return found
        parent = None if d == self.d0 else self.dom(d - 1, int(self.owner[d][i]))
        dom = Dom(d, parent, self.seq_base[d] + i, i)
        dom.alloc = dom.left = int(self.alloc[d][i])
        dom.frag = int(self.frag[d][i])
        if d == self.k1 and self.reserve > 0:
            dom.sufficient = bool(self.sufficient[i])
        prefs = self.prefs[d].get(i)
        if prefs:
            dom.prefs = prefs
            size = self.req[d]
            dom.want = len({r // size for r in prefs})
            dom.minrank = min(prefs)
        self.doms[d][i] = dom
        return dom

    def leaf_range(self, i: int) -> tuple[int, int]:
        """Positions ``[lo, hi)`` of level1 domain ``i``'s leaves."""
        return int(self.leaf_lo[i]), int(self.leaf_hi[i])

    def leaves_of(self, dom: Dom) -> list[int]:
        """The leaves of level1 domain ``dom`` in label order; fills ``dom.reserved``."""
        leaves = dom.leaves
        if leaves is None:
            lo, hi = self.leaf_range(dom.index)
            leaves = dom.leaves = self.node_arr[lo:hi][self.offered[lo:hi]].tolist()
            if self.reserve > 0:
                reserved_pos = self.reserved_pos
                pos = reserved_pos[reserved_pos.searchsorted(lo):reserved_pos.searchsorted(hi)]
                dom.reserved = set(self.node_arr[pos].tolist())
        return leaves

    @property
    def by_depth(self) -> dict[int, list[Dom]]:
        """Every domain per depth, in label order (creates them all, level1 leaves
        included; for inspection)."""
        out = {d: [self.dom(d, i) for i in range(n)] for d, n in self.size.items()}
        for dom in out[self.k1]:
            self.leaves_of(dom)
        return out

    def level1_domains(self) -> list[Dom]:
        """Every level1 domain of the run, in label order, with their leaves."""
        out = [self.dom(self.k1, i) for i in range(self.size[self.k1])]
        for dom in out:
            self.leaves_of(dom)
        return out

    # ----------------------------------------------------------------- traversal
    def run(self) -> bool:
        """Pass 1, then pass 2 if needed; true when the (sub-)job is complete."""
        self._tree(self.root, 1)
        if not self.done:
            self._pass2()
        return self.done

    def _tree(self, dom: Dom, k: int) -> None:
        """``traverseTree``: take ``k`` groups of ``dom``'s size from ``dom``."""
        if dom.depth == self.k1:
            self._leaves(dom, k * self.m[self.k1])
            return
        self._siblings(dom, k * self.m[dom.depth])

    def _leaves(self, dom: Dom, need: int) -> None:
        order = dom.order
        if order is None:
            leaves = self.leaves_of(dom)
            reserved = dom.reserved
            usable = [x for x in leaves if x not in reserved] if reserved else leaves
            # leaf_key's order as one integer per leaf (no reserved leaf here)
            rank = self.ctx.leaf_rank
            pref = self.pref
            if pref:
                off = self.ctx.tasks
                order = sorted(usable,
                               key=lambda x: pref[x] - off if x in pref else rank[x])
            else:
                order = sorted(usable, key=rank.__getitem__)
            dom.order = order
        used = self.used
        free = dom.free
        size = self.m[dom.depth]
        for x in order:
            if need <= 0 or self.done:
                return
            if used[x]:
                continue
            used[x] = 1
            need -= 1
            if len(free) + 1 < size:  # _push's first step, inlined
                free.append(x)
            else:
                self._push(dom, x)

    def _child_order(self, dom: Dom) -> Kids:
        """Children of ``dom`` (indices at the next depth): those holding preferred nodes,
        and those with room sorted by the best-fit key ``(frag, alloc, holds no preferred
        node, label order)``, with their ``alloc`` and ``frag``.  The keys are fixed at
        construction, so this is computed once per domain."""
        found = dom.korder
        if found is None:
            d = dom.depth + 1
            owner = self.owner[d]
            lo = int(owner.searchsorted(dom.index))
            hi = int(owner.searchsorted(dom.index + 1))
            every = self.holders[d]
            holders = every[bisect_left(every, lo):bisect_left(every, hi)]
            if hi - lo <= _SMALL:
                # few children: the same stable sort in Python (numpy's per-call cost
                # dominates here)
                alloc_l = self.alloc[d][lo:hi].tolist()
                frag_l = self.frag[d][lo:hi].tolist()
                room_l = [a > 0 for a in alloc_l]
                if d == self.k1 and self.reserve > 0:
                    room_l = [r and s for r, s in
                              zip(room_l, self.sufficient[lo:hi].tolist(), strict=True)]
                marked = {i - lo for i in holders}
                ranked_l = sorted(range(hi - lo),
                                  key=lambda i: (frag_l[i], alloc_l[i], i not in marked))
                found = dom.korder = Kids(holders, [lo + i for i in ranked_l if room_l[i]],
                                           lo, alloc_l, frag_l)
                return found
            no_pref = np.ones(hi - lo, dtype=bool)
            no_pref[[i - lo for i in holders]] = False
            alloc = self.alloc[d][lo:hi]
            frag = self.frag[d][lo:hi]
            # a child without room (alloc 0, or an insufficient level1 domain) is never
            # taken: leave it out of the order
            room = alloc > 0
            if d == self.k1 and self.reserve > 0:
                room &= self.sufficient[lo:hi]
            ranked = np.lexsort((no_pref, alloc, frag))
            found = dom.korder = Kids(holders, (lo + ranked[room[ranked]]).tolist(), lo,
                                       alloc.tolist(), frag.tolist())
        return found

    def _siblings(self, dom: Dom, k: int) -> None:
        """``traverseSiblings`` over ``dom``'s children with the RFC's preferred-first phase.

        Only children with room (sufficient, ``left > 0``) take part; a child becomes a
        :class:`Dom` only when it is visited.
        """
        d = dom.depth + 1
        kids = self._child_order(dom)
        made = self.doms[d]
        lo, alloc, frag = kids.lo, kids.alloc, kids.frag

        def left(i: int) -> int:
            c = made.get(i)
            return alloc[i - lo] if c is None else c.left

        if self.pref and kids.holders:
            check = d == self.k1 and self.reserve > 0
            sufficient = self.sufficient
            preferred = sorted((self.dom(d, i) for i in kids.holders
                                if (not check or sufficient[i]) and left(i) > 0),
                               key=lambda c: (c.frag, c.alloc, c.minrank, c.seq))
            for c in preferred:
                if self.done or k <= 0:
                    return
                a = min(c.left, c.want, k)
                if a > 0:
                    self._node(c, a)
                    k -= a
        rest = []
        # Phase A, best fit: (frag, alloc); ties: holds a preferred node, label order.
        # (kids.order holds only children with room at construction, sufficient ones.)
        for i in kids.order:
            if self.done or k <= 0:
                return
            room = left(i)
            if room <= 0:
                continue
            if room <= k:
                self._node(self.dom(d, i), room)
                k -= room
            else:
                rest.append(i)
        # Phase B, overflow: (alloc, frag); same ties.
        prefs = self.prefs[d]
        for i in sorted(rest, key=lambda i: (alloc[i - lo], frag[i - lo], not prefs.get(i), i)):
            if self.done or k <= 0:
                return
            c = self.dom(d, i)
            a = min(c.left, k)
            self._node(c, a)
            k -= a

    def _node(self, c: Dom, a: int) -> None:
        """``traverseNode``: take ``a`` groups from ``c``."""
        self._tree(c, a)
        c.left -= a

    def _push(self, dom: Dom, task: Any) -> None:
        """``buildTaskTree``: add a task to ``dom``'s free list; complete groups go up."""
        while True:
            free = dom.free
            free.append(task)
            if len(free) < self.m[dom.depth]:
                return
            task = free[:]
            free.clear()
            if dom is self.root or dom.parent is None:
                self.result = task
                self.done = True
                return
            dom = dom.parent

    def _pass2(self) -> None:
        """``traverseLevelForRemainingNodes``: untraversed and reserved leaves (§2.6.6).

        Per level1 domain (those holding preferred nodes first, then label order), the
        leaves still free form groups: each free reserved leaf opens a group counted by how
        many reserved leaves came before it (1, 2, ...), the other free leaves join the
        last group, or form group 0 when the domain has no free reserved leaf.  Groups are
        taken by count, highest first.  Domains are created only when their group is taken.
        """
        k1, count = self.k1, self.count
        n1 = self.size[k1]
        if n1 == 0 or count == 0:
            return
        used = self.used
        free0 = (np.frombuffer(used, dtype=np.uint8)[self.node_arr] == 0) & self.offered
        is_res = np.zeros(len(free0), dtype=bool)
        is_res[self.reserved_pos] = True
        pos_dom = self.pos_dom
        k = np.bincount(pos_dom[free0 & is_res], minlength=n1)
        o = np.bincount(pos_dom[free0 & ~is_res], minlength=n1)
        with_prefs = np.zeros(n1, dtype=bool)
        with_prefs[[i for i, p in self.prefs[k1].items() if p]] = True
        order = np.concatenate([np.flatnonzero(with_prefs), np.flatnonzero(~with_prefs)])
        # Every free leaf of a domain is pushed in some round (the domains and their
        # pushes are independent); a domain whose free leaves, with what pass 1 left in
        # its free list, cannot complete one level1 group changes nothing: skip it.
        total = k + o
        for i, dom in self.doms[k1].items():
            if dom.free:
                total[i] += len(dom.free)
        if not self._completes(total):
            return  # pushing every free leaf cannot complete the root: pass 2 fails
        order = order[total[order] >= self.m[k1]]
        k_o, o_o = k[order], o[order]
        split: dict[int, tuple[list[int], list[int]]] = {}
        node_arr = self.node_arr
        for seen in range(int(k.max(initial=0)), -1, -1):
            chosen = order[k_o >= seen] if seen > 0 else order[(k_o == 0) & (o_o > 0)]
            for i in chosen.tolist():
                dom = self.dom(k1, i)
                parts = split.get(i)
                if parts is None:
                    lo, hi = self.leaf_range(i)
                    free = free0[lo:hi].tolist()
                    res = is_res[lo:hi].tolist()
                    leaves = node_arr[lo:hi].tolist()
                    parts = split[i] = (
                        [x for x, f, r in zip(leaves, free, res, strict=True) if f and r],
                        [x for x, f, r in zip(leaves, free, res, strict=True) if f and not r],
                    )
                reserved, others = parts
                if seen == 0:
                    group = others
                elif seen == len(reserved):
                    group = [reserved[seen - 1], *others]
                else:
                    group = [reserved[seen - 1]]
                if len(group) > 1:
                    held_back = set(reserved)
                    keys = {x: self.ctx.leaf_key(self.pref, held_back, x) for x in group}
                    group = sorted(group, key=keys.__getitem__)
                for x in group:
                    used[x] = 1
                    self._push(dom, x)
                    if self.done:
                        return

    def _completes(self, total: np.ndarray) -> bool:
        """Whether pass 2 completes the (sub-)job, ``total`` being the leaves each level1
        domain would hold once every free leaf is pushed (its free list included).

        A domain's free list sends one group up each time it fills, whatever the order
        of the pushes, so once everything is pushed, domain ``i`` has sent
        ``(its free list + arrivals) // m`` groups up; pass 2 completes the root exactly
        when these counts, carried up from level1, fill the root's list.  A failing pass
        2 (a strict-rule attempt on a busy cluster) would otherwise push every free leaf
        of the tree for nothing.
        """
        k1, m, doms = self.k1, self.m, self.doms
        groups = total // m[k1]
        kids = self.shape.kid_starts
        for d in range(k1 - 1, self.d0 - 1, -1):
            held = np.add.reduceat(groups, kids[d])
            for i, dom in doms[d].items():
                if dom.free:
                    held[i] += len(dom.free)
            groups = held // m[d]
        return bool(groups[0] >= 1)

    def capacity(self) -> int:
        """Groups of the root's child size that fit, ignoring the reserve (for reasons)."""
        if self.d0 == self.k1:
            return self.count
        groups = self.leaf_count // self.m[self.k1]
        for d in range(self.k1 - 1, self.d0, -1):
            groups = np.bincount(self.owner[d + 1], weights=groups,
                                 minlength=self.size[d]).astype(np.int64) // self.m[d]
        return int(groups.sum())


__all__ = ["Dom", "JobOfRun", "Kids", "Run"]
