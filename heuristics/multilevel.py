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
* Fault nodes held back (issue 16, ``f5``/``f5b``): a choice of this port, from the RFC's
  rule above; upstream only lowers a fault node's score.  Holding them back can cost
  fragment score or reserve (never a hit of the job, never its placement), and in a batch
  the other layout may take a node a later job wanted: a greedy order effect.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any, NamedTuple, TypeVar

import numpy as np

from heuristics.base import JobOutcome
from heuristics.images import tie_list, tie_positions
from heuristics.state import ClusterState
from models.compiled import SUBHEALTHY, JobView, Problem, TreeView, natural_key
from models.scenario import Family

T = TypeVar("T")

#: Weight of the children's fragment scores in a parent's score (upstream ``frag`` formula).
_CHILD_FRAG_WEIGHT = 10


# --------------------------------------------------------------------------- public helpers


def _order_by_cache(
    nodes: Sequence[T], cached: Sequence[T | None] | None, key: Callable[[T], Any]
) -> list[T]:
    """``sortNodesByCachedRank`` on any node type, with ``key`` giving name order."""
    ordered = sorted(nodes, key=key)
    if not cached:
        return ordered
    size = len(ordered)
    slots: list[T | None] = [None] * size
    members = set(ordered)
    placed: set[T] = set()
    for pos, node in enumerate(cached[:size]):
        if node is not None and node in members and node not in placed:
            slots[pos] = node
            placed.add(node)
    rest = iter(n for n in ordered if n not in placed)
    out: list[T] = []
    for slot in slots:
        out.append(next(rest) if slot is None else slot)
    return out


def sort_nodes_by_cached_rank(
    nodes: Sequence[str], cached: Sequence[str] | None = None
) -> list[str]:
    """Order one level1 group's nodes as upstream's ``sortNodesByCachedRank`` does.

    Parameters
    ----------
    nodes
        The group's node names (any order).
    cached
        The group's cached layout (node name per position), or ``None``.

    Returns
    -------
    list of str
        Nodes in natural name order, except that every cached node of the group is put
        back at its cached position; the others fill the gaps in name order.
    """
    return _order_by_cache(list(nodes), list(cached) if cached else None, natural_key)


def _numeric_groups(groups: Mapping[str, Sequence[T]]) -> list[tuple[int, Sequence[T]]]:
    out = []
    for key, members in groups.items():
        try:
            out.append((int(key), members))
        except ValueError:
            continue  # upstream skips keys that are not integers
    out.sort(key=lambda item: item[0])
    return out


def level1_rank(groups: Mapping[str, Sequence[T]], rank: int) -> tuple[str, int]:
    """Upstream's ``getL1Ranks``: the level1 group and position of ``rank``.

    Groups are taken in numeric order of their ids and their sizes accumulated, so groups
    of unequal size are handled.  Keys that are not integers are skipped.

    Raises
    ------
    ValueError
        When ``rank`` is negative or beyond the groups (or there are no groups).
    """
    if rank < 0:
        raise ValueError(f"rank {rank} is negative")
    seen = 0
    for gid, members in _numeric_groups(groups):
        if rank < seen + len(members):
            return str(gid), rank - seen
        seen += len(members)
    raise ValueError(f"rank {rank} is not in the level1 groups ({seen} ranks)")


def ranks_from_level1_groups(groups: Mapping[str, Sequence[T]]) -> list[T]:
    """Node per rank of a level1 group map (``SuperPods``), by :func:`level1_rank`."""
    return [node for _gid, members in _numeric_groups(groups) for node in members]


# --------------------------------------------------------------------------- tree index


class _TreeIndex:
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
        self._spans: dict[tuple[int, int, int, int], _Span] = {}
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

    def span(self, d0: int, k1: int, lo: int, hi: int) -> _Span:
        """The domains of depths ``d0..k1`` inside positions ``[lo, hi)`` (cached)."""
        key = (d0, k1, lo, hi)
        found = self._spans.get(key)
        if found is None:
            found = self._spans[key] = _Span(self, d0, k1, lo, hi)
        return found

    def run_of(self, d: int, node: int) -> tuple[int, int]:
        """Position range ``[lo, hi)`` of ``node``'s domain at depth ``d``."""
        if d == 0:
            return 0, len(self.order)
        rid = int(self.pid[d][self.pos[node]])
        starts = self.starts[d]
        hi = int(starts[rid + 1]) if rid + 1 < len(starts) else len(self.order)
        return int(starts[rid]), hi


def _divmod(values: np.ndarray, by: int) -> tuple[np.ndarray, np.ndarray]:
    """``values // by`` and ``values % by`` with one division (none when ``by`` is 1)."""
    if by == 1:
        return values, np.zeros_like(values)
    quotient = values // by
    return quotient, values - quotient * by


def _group_runs(table: dict[int, list[int]], ids: np.ndarray, values: list[int]) -> None:
    """``table[g]``: the ``values`` whose ``ids`` entry is ``g``, in order, for
    non-decreasing ``ids`` (one slice per run of equal ids)."""
    cut = (np.flatnonzero(ids[1:] != ids[:-1]) + 1).tolist()
    bounds = [0, *cut, len(values)]
    for g, a, b in zip(ids[bounds[:-1]].tolist(), bounds[:-1], bounds[1:], strict=True):
        table[g] = values[a:b]


def _all_true(count: int) -> np.ndarray:
    """A read-only all-true mask of ``count`` entries (shared, as it never changes)."""
    found = _ALL_TRUE.get(count)
    if found is None:
        found = _ALL_TRUE[count] = np.ones(count, dtype=bool)
        found.flags.writeable = False
    return found


_ALL_TRUE: dict[int, np.ndarray] = {}

#: Up to this many changed leaves, :meth:`_Run._plain_counts` updates its last answer.
_INCREMENTAL = 256

#: Up to this many children, :meth:`_Run._child_order` sorts in Python.
_SMALL = 64


class _Span:
    """The domains of one depth-``d0`` domain (positions ``[lo, hi)`` of a
    :class:`_TreeIndex`) down to level1, the structure every :class:`_Run` in it shares.

    Per depth ``d0..k1``: ``starts`` (run starts, positions relative to ``lo``) and
    ``owner`` (index of the parent domain); ``pos_dom`` the level1 domain of each
    position, ``leaf_hi`` the end of each level1 domain, ``seq_base`` the first sequence
    number per depth (domains are numbered breadth first, in label order).
    """

    def __init__(self, tix: _TreeIndex, d0: int, k1: int, lo: int, hi: int) -> None:
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


# --------------------------------------------------------------------------- scheduling tree


class _Kids(NamedTuple):
    """The children of a domain, as :meth:`_Run._child_order` ranks them."""

    holders: list[int]  # children holding preferred nodes, ascending
    order: list[int]  # children with room, best-fit order
    lo: int  # index of the first child; alloc/frag are indexed from it
    alloc: list[int]
    frag: list[int]


class _Dom:
    """A domain of the scheduling tree (``schedulingTreeNode``).

    Domains are materialised lazily by :meth:`_Run.dom` from the run's per-depth arrays:
    only those the traversal reaches become objects.
    """

    __slots__ = (
        "alloc", "depth", "frag", "free", "index", "korder", "leaves", "left",
        "minrank", "order", "parent", "prefs", "reserved", "seq", "sufficient", "want",
    )

    def __init__(self, depth: int, parent: _Dom | None, seq: int, index: int) -> None:
        self.depth = depth
        self.parent = parent
        self.seq = seq
        self.index = index  # position among the run's domains of this depth
        self.leaves: list[int] | None = None  # level1 only, made by _Run.leaves_of
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
        self.korder: _Kids | None = None


class _Run:
    """One ``Schedule`` call: a scheduling tree over one domain and the two passes.

    ``req[d]`` is the number of pods a task at depth ``d`` holds (``req[d0]`` the whole
    (sub-)job, ``req[-1] == 1``); ``m[d] = req[d] // req[d + 1]`` is ``maxChildren``.

    The tree is held as arrays per depth (run starts, owner, ``alloc``, ``frag``; the
    ``initNode`` pass is vectorised); :class:`_Dom` objects are created only for the
    domains the traversal visits, so a repair inside a large domain costs what it visits.
    """

    def __init__(
        self,
        ctx: _Context,
        tix: _TreeIndex,
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
    def _build(self, tix: _TreeIndex, idx: np.ndarray, span: tuple[int, int] | None,
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
        self.doms: dict[int, dict[int, _Dom]] = {d: {} for d in range(self.d0, self.k1 + 1)}

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
            sufficient = _all_true(n1)
        self.reserved_pos = (np.flatnonzero(reserved) if reserved is not None
                             else np.zeros(0, dtype=np.int64))
        self.sufficient = sufficient
        alloc1, rest = _divmod(sub, m[k1])
        self.alloc: dict[int, np.ndarray] = {k1: alloc1}
        self.frag: dict[int, np.ndarray] = {k1: rest * req[k1 + 1]}
        # Preferred ranks per domain, in leaf order (non-reserved leaves; upper levels only
        # through sufficient level1 domains).
        self.prefs: dict[int, dict[int, list[int]]] = {d: {} for d in self.doms}
        held = pref_pos if reserved is None else pref_pos[~reserved[pref_pos]]
        if len(held):
            # ``held`` is ascending, so every domain's ranks are one contiguous run
            ranks = [rank_at[p] for p in held.tolist()]
            _group_runs(self.prefs[k1], pos_dom[held], ranks)
            keep = sufficient[pos_dom[held]]
            up = held[keep]
            if len(up):
                ranks_up = ranks if len(up) == len(held) else [
                    r for r, ok in zip(ranks, keep.tolist(), strict=True) if ok]
                for d in range(k1 - 1, self.d0 - 1, -1):
                    ids = np.searchsorted(self.starts[d], up, side="right") - 1
                    _group_runs(self.prefs[d], ids, ranks_up)
        # parents sum their children (contiguous runs; every domain of the span has one);
        # an insufficient level1 domain counts for nothing
        alloc, frag = self.alloc[k1], self.frag[k1]
        if reserve > 0:
            alloc, frag = alloc * sufficient, frag * sufficient
        kids = self.shape.kid_starts
        for d in range(k1 - 1, self.d0 - 1, -1):
            sub = np.add.reduceat(alloc, kids[d])
            acc = np.add.reduceat(frag, kids[d])
            alloc, rest = _divmod(sub, m[d])
            self.alloc[d] = alloc
            frag = self.frag[d] = rest * req[d + 1] + _CHILD_FRAG_WEIGHT * acc

    def _plain_counts(self) -> tuple[np.ndarray, np.ndarray | None]:
        """Offered leaves per level1 domain and (with a reserve) the reserved leaves,
        when no preferred node is offered: the first ``reserve`` offered leaves of each
        domain in natural order.

        Successive runs over one span (the repairs of a job) offer nearly the same
        leaves: the last answer per span is kept (in ``Problem.memo``, so the later jobs
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

    def dom(self, d: int, i: int) -> _Dom:
        """The domain ``i`` of depth ``d``, created (with its ancestors) on first use.

        Values are read from the per-depth arrays one at a time: a traversal visits few
        of the domains, so converting whole arrays to lists costs more than it saves.
        """
        found = self.doms[d].get(i)
        if found is not None:
            return found
        parent = None if d == self.d0 else self.dom(d - 1, int(self.owner[d][i]))
        dom = _Dom(d, parent, self.seq_base[d] + i, i)
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

    def leaves_of(self, dom: _Dom) -> list[int]:
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
    def by_depth(self) -> dict[int, list[_Dom]]:
        """Every domain per depth, in label order (creates them all, level1 leaves
        included; for inspection)."""
        out = {d: [self.dom(d, i) for i in range(n)] for d, n in self.size.items()}
        for dom in out[self.k1]:
            self.leaves_of(dom)
        return out

    def level1_domains(self) -> list[_Dom]:
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

    def _tree(self, dom: _Dom, k: int) -> None:
        """``traverseTree``: take ``k`` groups of ``dom``'s size from ``dom``."""
        if dom.depth == self.k1:
            self._leaves(dom, k * self.m[self.k1])
            return
        self._siblings(dom, k * self.m[dom.depth])

    def _leaves(self, dom: _Dom, need: int) -> None:
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

    def _child_order(self, dom: _Dom) -> _Kids:
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
                found = dom.korder = _Kids(holders, [lo + i for i in ranked_l if room_l[i]],
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
            found = dom.korder = _Kids(holders, (lo + ranked[room[ranked]]).tolist(), lo,
                                       alloc.tolist(), frag.tolist())
        return found

    def _siblings(self, dom: _Dom, k: int) -> None:
        """``traverseSiblings`` over ``dom``'s children with the RFC's preferred-first phase.

        Only children with room (sufficient, ``left > 0``) take part; a child becomes a
        :class:`_Dom` only when it is visited.
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

    def _node(self, c: _Dom, a: int) -> None:
        """``traverseNode``: take ``a`` groups from ``c``."""
        self._tree(c, a)
        c.left -= a

    def _push(self, dom: _Dom, task: Any) -> None:
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

    def capacity(self) -> int:
        """Groups of the root's child size that fit, ignoring the reserve (for reasons)."""
        if self.d0 == self.k1:
            return self.count
        groups = self.leaf_count // self.m[self.k1]
        for d in range(self.k1 - 1, self.d0, -1):
            groups = np.bincount(self.owner[d + 1], weights=groups,
                                 minlength=self.size[d]).astype(np.int64) // self.m[d]
        return int(groups.sum())


# --------------------------------------------------------------------------- the job


class _Context:
    """Everything one call of :func:`place_multilevel` shares."""

    def __init__(self, problem: Problem, job: JobView, state: ClusterState,
                 held: Sequence[int] = (),
                 repairs: dict[tuple[Any, ...], list[int] | None] | None = None) -> None:
        self.problem = problem
        self.repairs = {} if repairs is None else repairs  # _repair_subtree answers
        # _Run._plain_counts: id(span) -> (span, offered, leaves per level1, reserved), the
        # last answer per span, kept with the spans for every later run and job (an entry
        # is replaced whole and never changed, so a stale one only costs a larger update)
        self.counts: dict[int, tuple[_Span, np.ndarray, np.ndarray, np.ndarray | None]] = (
            problem.memo.setdefault("multilevel-counts", {}))
        self.job = job
        self.levels = job.levels
        self.tasks = job.tasks
        self.num_nodes = problem.num_nodes
        # natural positions, holders of the job's image first (issue 34; natural order
        # without image locality)
        self.npos = tie_list(problem, job.image)
        self.health = problem.health_list
        self.base = state.whole_free(problem) & (problem.npus == job.npu_per_task)
        self.base[list(held)] = False  # fault nodes kept back (see place_multilevel)
        self.preferred = job.preferred.tolist()
        self.fault_origin = {r: int(job.origin[r]) for r in np.flatnonzero(job.fault).tolist()
                             if job.origin[r] >= 0}
        self.fault_nodes = set(self.fault_origin.values())
        self.leaf_rank = _leaf_rank(problem, self.fault_nodes, job.image)
        # Ranks still running (a partly running job, issue 24): fixed, never swapped.
        self.fixed = set(np.flatnonzero(~job.to_place).tolist())
        self.needed = self.tasks - len(self.fixed)  # nodes the job still needs
        # Usable trees in natural name order (tie-break between trees).
        self.cand: dict[int, np.ndarray] = {}
        self.tree_reasons: dict[int, str] = {}
        names = problem.tree_names
        self.tree_order = sorted(range(len(names)), key=lambda t: natural_key(names[t]))
        for t in self.tree_order:
            self._check_tree(t)

    # ----------------------------------------------------------------- trees
    def _check_tree(self, t: int) -> None:
        problem = self.problem
        name = problem.tree_names[t]
        view = problem.trees[name]
        if view.depth < len(self.levels):
            self.tree_reasons[t] = (f"tree '{name}' has {view.depth} levels but the "
                                    f"affinity-config needs {len(self.levels)}")
            return
        named = self.base & (problem.node_tree == t)
        # removeRedundantLayers runs before any label is read: only the job's own levels
        # (level1..levelK) must be labelled; a label of a trimmed level may be missing.
        used = self._labelled(view)
        lacking = np.flatnonzero(named & ~used)
        if len(lacking):
            first = int(lacking[np.argmin(problem.natural_pos[lacking])])
            node = problem.node_names[first]
            label = next(view.labels[i] for i in range(len(self.levels))
                         if view.level_value[i][first] < 0)
            self.tree_reasons[t] = (f"tree '{name}' is invalid: node '{node}' lacks label "
                                    f"'{label}' (a node missing the label of a level the job "
                                    f"uses invalidates its tree)")
            return
        cand = named & used
        usable = int(cand.sum())
        if usable == 0:
            self.tree_reasons[t] = (f"tree '{name}' has no usable node (completely free, "
                                    f"{self.job.npu_per_task} NPUs, not unhealthy)")
            return
        if usable < self.needed:
            self.tree_reasons[t] = (f"tree '{name}': select node failed by not enough node "
                                    f"({usable} usable, {self.needed} needed)")
            return
        self.cand[t] = cand

    def _labelled(self, view: TreeView) -> np.ndarray:
        """Nodes of ``view`` carrying the labels of the job's levels (level1..levelK)."""
        mask = view.level_value[0] >= 0
        for i in range(1, len(self.levels)):
            mask = mask & (view.level_value[i] >= 0)
        return mask

    def index(self, t: int, depth: int) -> _TreeIndex:
        """The trimmed index of tree ``t`` to ``depth`` levels over every node that names
        the tree and carries its level1 label, whether free or not.

        It depends on the problem alone, so it is kept in ``Problem.memo`` and shared by
        every job (with its domain spans); a job's candidates are the leaves a run offers.
        """
        problem = self.problem
        key = ("multilevel-tree-index", t, depth)
        found: _TreeIndex | None = problem.memo.get(key)
        if found is None:
            view = problem.trees[problem.tree_names[t]]
            # every node that can be any job's candidate (a job's candidates carry the labels
            # of its own levels, so a node lacking a label above level1 may be one: the
            # strict rule's extra level then puts it in the domain of "no label")
            members = (problem.node_tree == t) & (view.level_value[0] >= 0)
            found = problem.memo[key] = _TreeIndex(view, members, depth,
                                                   problem.label_order(view.name, depth))
        return found

    @staticmethod
    def req_of(levels: Sequence[int], tasks: int) -> list[int]:
        """Task levels (§2.6.2): pods per group from the job down to one node."""
        return [tasks, *reversed(levels), 1]

    # ----------------------------------------------------------------- solve
    def solve(self) -> JobOutcome:
        if not self.cand:
            return JobOutcome.fail(self._no_tree_reason(
                f"no resource tree found for npu nodes of job '{self.job.name}'", []))
        if self.fixed:
            return self._around_running()
        layout = self._with_history()
        reasons: list[str] = []
        if layout is None:
            layout, tree_used, reasons = self._fresh()
        else:
            tree_used = int(self.problem.node_tree[layout[0]])
        if layout is None:
            return JobOutcome.fail(self._no_tree_reason(
                f"no valid task tree found for job '{self.job.name}'", reasons))
        self._avoid_fault_returns(layout)
        self._verify(layout, tree_used)
        return JobOutcome(np.asarray(layout, dtype=np.int32))

    def _no_tree_reason(self, head: str, extra: list[str]) -> str:
        levels = ",".join(f"level{i}={a}" for i, a in enumerate(self.levels, start=1))
        parts = [self.tree_reasons[t] for t in self.tree_order if t in self.tree_reasons]
        parts += extra
        if not self.problem.tree_names:
            parts.append("resource-level-config defines no tree")
        detail = "; ".join(parts) if parts else "no tree has usable nodes"
        return (f"{head} ({self.tasks} pods, affinity-config {levels}, "
                f"{self.job.npu_per_task} NPUs per pod): {detail}")

    def _around_running(self) -> JobOutcome:
        """Pod-level repair of a partly running job (issue 24, reference §2.6.9).

        The running ranks are the pinned layout and the other ranks are missing: each
        missing rank's largest fault subtree is re-scheduled inside its parent group's
        domain, which holds a running rank (``rescheduleSubTask``).  Upstream's
        escalation (``maxEscalation``, ``PendingSessionNum / 6`` levels) re-places running
        pods, i.e. deletes them first: that is the rescheduler's step between sessions
        (``simulate``), never a move of a running rank here, so a subtree that does not
        fit its domain leaves the job unplaced for this session.
        """
        job = self.job
        problem = self.problem
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
        if t not in self.cand:
            return JobOutcome.fail(self._no_tree_reason(
                f"pod-level rescheduling of job '{name}' failed in tree '{view.name}'", []))
        lacking = [i for i in range(len(self.levels)) if (view.level_value[i][held] < 0).any()]
        if lacking:
            return JobOutcome.fail(f"running ranks of job '{name}' lack label "
                                   f"'{view.labels[lacking[0]]}' of tree '{view.name}'")
        for i, size in enumerate(self.levels):
            values = view.level_value[i]
            for g in range(self.tasks // size):
                seg = running[g * size:(g + 1) * size]
                if len(set(values[seg[seg >= 0]].tolist())) > 1:
                    return JobOutcome.fail(
                        f"running ranks of job '{name}' break level{i + 1} group {g} (ranks "
                        f"{g * size}..{(g + 1) * size - 1} span several '{view.labels[i]}' "
                        "values): the job cannot be completed")
        layout = self._repair(t, running.copy(), running < 0, max_escalation=0)
        if layout is None:
            return JobOutcome.fail(
                f"pod-level rescheduling of job '{name}' failed: a pending group does not "
                f"fit the free nodes of the domain its running ranks hold in tree "
                f"'{view.name}' (upstream escalates by deleting more pods, "
                "pending-sessions / 6 levels)")
        self._avoid_fault_returns(layout)
        self._verify(layout, t)
        return JobOutcome(np.asarray(layout, dtype=np.int32))

    # ----------------------------------------------------------------- fresh schedule
    def _pref_map(self, mask: np.ndarray, ranks: range) -> dict[int, int]:
        """Preferred node → rank for ``ranks`` whose cached node ``mask`` offers.

        A node cached for several ranks keeps the smallest rank.
        """
        pref: dict[int, int] = {}
        preferred = self.preferred
        for r in ranks:
            n = preferred[r]
            if n >= 0 and mask[n] and n not in pref:
                pref[n] = r
        return pref

    def _fresh(self) -> tuple[list[int] | None, int, list[str]]:
        """``scheduleFromAllNodes`` with the strict-rule attempt (§2.6.7, §2.6.8)."""
        levels = self.levels
        any_cand = np.zeros(self.num_nodes, dtype=bool)
        for cand in self.cand.values():
            any_cand |= cand
        pref = self._pref_map(any_cand, range(self.tasks))
        if len(levels) == 1:
            strict = self._across_trees((levels[0], self.tasks), pref, [])
            if strict is not None and not pref:
                return strict[0], strict[1], []
        else:
            strict = None
        reasons: list[str] = []
        plain = self._across_trees(levels, pref, reasons)
        if strict is not None and (plain is None or self._hits(plain[0]) <= self._hits(strict[0])):
            return strict[0], strict[1], []
        if plain is None:
            return None, -1, reasons
        return plain[0], plain[1], []

    def _across_trees(
        self, levels: Sequence[int], pref: dict[int, int], reasons: list[str]
    ) -> tuple[list[int], int] | None:
        best: tuple[tuple[int, int, int], list[int], int] | None = None
        for rank_t, t in enumerate(self.tree_order):
            if t not in self.cand:
                continue
            view = self.problem.trees[self.problem.tree_names[t]]
            if view.depth < len(levels):
                continue
            layout, why = self._schedule_tree(t, levels, pref)
            if layout is None:
                reasons.append(why)
                continue
            frag, nodes = layout
            key = (-self._hits(nodes), frag, rank_t)
            if best is None or key < best[0]:
                best = (key, nodes, t)
        return None if best is None else (best[1], best[2])

    def _schedule_tree(
        self, t: int, levels: Sequence[int], pref: dict[int, int]
    ) -> tuple[tuple[int, list[int]] | None, str]:
        """``Schedule`` on one whole tree: (initial root frag, node per rank) or a reason."""
        tix = self.index(t, len(levels))
        req = self.req_of(levels, self.tasks)
        idx = np.flatnonzero(self.cand[t][tix.order])
        run = _Run(self, tix, req, 0, idx, pref)
        frag = run.root.frag
        if not run.run():
            name = self.problem.tree_names[t]
            top = len(levels)
            reserve = (f"; reservedNode {tix.reserve} per level1 domain"
                       if tix.reserve else "")
            return None, (f"tree '{name}': failed to schedule tasks ({len(idx)} usable "
                          f"nodes hold {run.capacity()} of the {req[0] // req[1]} "
                          f"level{top} groups of {req[1]} pods needed{reserve})")
        out: list[int] = [-1] * self.tasks
        self._write(run, 0, out)
        return (frag, out), ""

    def _hits(self, layout: Sequence[int]) -> int:
        preferred = self.preferred
        return sum(1 for r, n in enumerate(layout) if n >= 0 and preferred[r] == n)

    # ----------------------------------------------------------------- ranks
    @staticmethod
    def _prefs_of(task: Any, pref: dict[int, int],
                  memo: dict[int, list[int]] | None = None) -> list[int]:
        """Preferred ranks of the nodes under ``task`` (a node or nested groups).

        ``memo`` (by ``id`` of a group, valid while the task tree lives) makes repeated
        calls on the groups of one tree linear in its size.
        """
        if isinstance(task, int):
            r = pref.get(task)
            return [] if r is None else [r]
        if memo is not None:
            found = memo.get(id(task))
            if found is not None:
                return found
        out: list[int] = []
        for child in task:
            if isinstance(child, int):  # a leaf, inlined
                r = pref.get(child)
                if r is not None:
                    out.append(r)
            else:
                out.extend(_Context._prefs_of(child, pref, memo))
        if memo is not None:
            memo[id(task)] = out
        return out

    def _slots(self, children: list[Any], start: int, size: int,
               pref: dict[int, int], memo: dict[int, list[int]] | None = None) -> list[Any]:
        """Position pre-allocation of child groups (``sortFreeTasksByPreferredRank``)."""
        count = len(children)
        if count == 1 or not pref:
            return children
        end = start + count * size
        bids: list[tuple[int, int, int]] = []
        for i, child in enumerate(children):
            votes: dict[int, int] = {}
            for r in self._prefs_of(child, pref, memo):
                if start <= r < end:
                    slot = (r - start) // size
                    votes[slot] = votes.get(slot, 0) + 1
            if votes:
                slot, weight = max(votes.items(), key=lambda kv: (kv[1], -kv[0]))
                bids.append((-weight, i, slot))
        slots: list[Any] = [None] * count
        taken: set[int] = set()
        for _w, i, slot in sorted(bids):
            if slots[slot] is None:
                slots[slot] = children[i]
                taken.add(i)
        rest = iter(c for i, c in enumerate(children) if i not in taken)
        return [next(rest) if s is None else s for s in slots]

    def _write(self, run: _Run, base: int, out: list[int]) -> None:
        """Turn ``run``'s task tree into ranks ``base..`` of ``out``."""
        req, k1, pref = run.req, run.k1, run.pref
        groups: dict[str, list[int]] = {}
        a1 = req[k1]
        memo: dict[int, list[int]] = {}

        def descend(children: list[Any], depth: int, start: int) -> None:
            size = req[depth]
            if depth == k1 + 1:  # the sub-job is part of one level1 group: place leaves
                groups[str(start // a1)] = self._leaf_order(children, start, pref)
                return
            ordered = self._slots(children, start, size, pref, memo)
            for i, child in enumerate(ordered):
                first = start + i * size
                if depth == k1:
                    groups[str(first // a1)] = self._leaf_order(child, first, pref)
                else:
                    descend(child, depth + 1, first)

        descend(run.result, run.d0 + 1, base)
        if run.d0 == k1:  # single-leaf repair: the "group" starts at base, not at a1 * g
            (nodes,) = groups.values()
            out[base:base + len(nodes)] = nodes
            return
        for gid, nodes in groups.items():
            first = int(gid) * a1
            out[first:first + len(nodes)] = nodes
        if base == 0 and len(groups) * a1 == self.tasks:
            # Whole job: ranks follow getL1Ranks' convention over the level1 groups.
            out[:] = ranks_from_level1_groups(groups)

    def _leaf_order(self, leaves: list[int], start: int, pref: dict[int, int]) -> list[int]:
        ordered = sorted(leaves, key=self.npos.__getitem__)
        if not pref:
            return ordered
        # _order_by_cache with the cached layout ``preferred[start:start + size]``: a leaf
        # goes back to position q when it is the cached node of rank start + q and its
        # preferred rank (``pref[n] == r`` implies ``preferred[r] == n``, one rank a node)
        size = len(leaves)
        slots: list[int | None] | None = None
        for x in leaves:
            r = pref.get(x)
            if r is not None and 0 <= r - start < size:
                if slots is None:
                    slots = [None] * size
                slots[r - start] = x
        if slots is None:
            return ordered
        placed = {x for x in slots if x is not None}
        rest = iter([x for x in ordered if x not in placed])
        return [next(rest) if x is None else x for x in slots]

    # ----------------------------------------------------------------- history
    def _with_history(self) -> list[int] | None:
        """Reuse or repair the owner's cached layout (§2.6.9); ``None``: schedule afresh."""
        job = self.job
        if not job.prefer_previous or not (job.origin >= 0).any():
            return None
        problem = self.problem
        pinned = np.full(self.tasks, -1, dtype=np.int64)
        seen: set[int] = set()
        origin = job.origin.tolist()
        fault = job.fault.tolist()
        node_tree = problem.node_tree
        usable = np.zeros(self.num_nodes, dtype=bool)
        for cand in self.cand.values():
            usable |= cand
        for r in range(self.tasks):
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
        t = next(t for t in self.tree_order if per_tree.get(t, 0) == top)
        pinned[(pinned >= 0) & (node_tree[np.maximum(pinned, 0)] != t)] = -1
        self._keep_consistent(pinned, problem.trees[problem.tree_names[t]])
        if not (pinned >= 0).any():
            return None
        missing = pinned < 0
        if not missing.any():
            return pinned.tolist()
        return self._repair(t, pinned, missing)

    def _keep_consistent(self, pinned: np.ndarray, view: TreeView) -> None:
        """Per level (top down) and group keep the majority label value of pinned nodes."""
        for i in range(len(self.levels), 0, -1):
            size = self.levels[i - 1]
            values = view.level_value[i - 1]
            # only groups whose pinned nodes disagree need a look (a vectorised test)
            groups = self.tasks // size
            seg_all = pinned[:groups * size].reshape(groups, size)
            held_all = seg_all >= 0
            vals_all = values[np.where(held_all, seg_all, 0)].astype(np.int64)
            big = np.iinfo(np.int64).max
            low = np.where(held_all, vals_all, big).min(axis=1)
            high = np.where(held_all, vals_all, -big).max(axis=1)
            mixed = (held_all.sum(axis=1) >= 2) & (low != high)
            starts = (np.flatnonzero(mixed) * size).tolist()
            if groups * size < self.tasks:  # a last partial group (not expected)
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

    def _fault_subtrees(self, missing: np.ndarray, req: list[int]) -> list[tuple[int, int]]:
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

    def _repair(self, t: int, pinned: np.ndarray, missing: np.ndarray,
                max_escalation: int | None = None) -> list[int] | None:
        """``rescheduleWithSuperPods`` with escalation up to a full schedule (RFC)."""
        req = self.req_of(self.levels, self.tasks)
        tix = self.index(t, len(self.levels))
        # getMaxEscalationLevel: a fault job may escalate up to the whole job; the
        # prefer-previous source (no fault rank) may not (0) — its failures fall back to a
        # full ScheduleWithPreference in the caller (RFC, reference §3.7 #6).
        if max_escalation is None:
            max_escalation = len(req) if self.job.fault.any() else 0
        while True:
            avail = self.cand[t].copy()
            avail[pinned[pinned >= 0]] = False
            avail_pos = avail[tix.order]  # the same, per position of the tree index
            layout = pinned.tolist()
            failed: list[tuple[int, int]] = []
            for d, start in self._fault_subtrees(missing, req):
                if d == 0:
                    pref = self._pref_map(self.cand[t], range(self.tasks))
                    got, _why = self._schedule_tree(t, self.levels, pref)
                    return None if got is None else got[1]
                nodes = self._repair_subtree(tix, req, d, start, pinned, avail, avail_pos)
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
        self, tix: _TreeIndex, req: list[int], d: int, start: int, pinned: np.ndarray,
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
        pref = self._pref_map(avail, range(start, start + size))
        # The answer depends only on the nodes offered (the domain [lo, hi) and the mask
        # of its offered positions) and the preferred ones among them: a job scheduled
        # again (fault nodes held back) reuses every repair they left alone.
        position = tix.pos
        held = sorted((int(position[n]), n, r) for n, r in pref.items()
                      if lo <= position[n] < hi)
        key = (tix.view.name, tix.depth, tuple(sub), d, start, lo, hi,
               np.packbits(mask).tobytes(), tuple(held))
        if key in self.repairs:
            return self.repairs[key]
        found: list[int] | None = None
        if d - 1 == len(req) - 2:  # one pod inside its level1 domain
            found = self._repair_pod(tix, tix.order[idx], pref)
            self.repairs[key] = found
            return found
        run = _Run(self, tix, sub, d - 1, idx, pref, span=(lo, hi), offered=mask)
        if run.run():
            out: list[int] = [-1] * self.tasks
            self._write(run, start, out)
            found = out[start:start + size]
        self.repairs[key] = found
        return found

    def leaf_key(self, pref: dict[int, int], reserved: frozenset[int] | set[int],
                 x: int) -> tuple[int, int]:
        """Order of leaf ``x`` inside its level1 domain: preferred by rank, then healthy,
        sub-healthy, former fault nodes, and (pass 2 only) ``reserved`` ones, each in
        natural order."""
        r = pref.get(x)
        if r is not None:
            return 0, r
        npos = self.npos[x]
        if x in reserved:  # only reached in pass 2
            return 5, npos
        if x in self.fault_nodes:
            return 4, npos
        if self.health[x] == SUBHEALTHY:
            return 3, npos
        return 2, npos

    def _repair_pod(self, tix: _TreeIndex, leaves: np.ndarray,
                    pref: dict[int, int]) -> list[int] | None:
        """One pod inside its level1 domain: what a :class:`_Run` over ``leaves`` picks.

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
        return [min(usable, key=lambda x: self.leaf_key(pref, reserved, x))]

    # ----------------------------------------------------------------- finishing
    def _avoid_fault_returns(self, layout: list[int]) -> None:
        """Swap a fault rank off its cached node inside its lowest non-trivial group."""
        if not self.fault_origin:
            return
        size = next((a for a in self.levels if a >= 2), self.tasks)
        if size < 2:
            return
        preferred = self.preferred
        for r, x in sorted(self.fault_origin.items()):
            if layout[r] != x:
                continue
            lo = r - r % size
            options = [q for q in range(lo, lo + size)
                       if q != r and q not in self.fixed and self.fault_origin.get(q) != x]
            if not options:
                continue
            # Prefer a partner that is not on its own origin (keeps origin hits).
            q = next((q for q in options if preferred[q] != layout[q]), options[0])
            layout[r], layout[q] = layout[q], layout[r]

    def _verify(self, layout: list[int], t: int) -> None:
        """Internal guard: the answer satisfies every multilevel hard constraint."""
        nodes = np.asarray(layout, dtype=np.int64)
        problem = self.problem
        view = problem.trees[problem.tree_names[t]]
        ok = (
            len(nodes) == self.tasks
            and bool((nodes >= 0).all())
            and len(set(layout)) == self.tasks
            and bool(self.base[nodes[self.job.to_place]].all())
            and bool(self._labelled(view)[nodes].all())
        )
        if ok:
            for i, size in enumerate(self.levels):
                values = view.level_value[i][nodes].reshape(-1, size)
                if not (values == values[:, :1]).all():
                    ok = False
                    break
        if not ok:
            raise AssertionError(
                f"multilevel greedy produced an invalid layout for job '{self.job.name}'; "
                "this is a bug"
            )


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
    if job.family is not Family.MULTILEVEL or not job.levels:
        return JobOutcome.fail(f"job '{job.name}' is not a multilevel job")
    context = _Context(problem, job, state)
    full = context.solve()
    # Fault nodes are taken last across domains: when the layout takes one, schedule again
    # without them, and keep that layout unless the one using them has more origin hits
    # or fewer fault returns.
    preferred = set(context.preferred)
    held = sorted(n for n in context.fault_nodes if context.base[n] and n not in preferred)
    if full.nodes is None or not set(full.nodes.tolist()) & set(held):
        return full  # unplaced, or no fault node taken
    spare = _Context(problem, job, state, held, context.repairs).solve()
    if spare.nodes is None or _fault_key(job, full.nodes) > _fault_key(job, spare.nodes):
        return full
    return spare


def _leaf_rank(problem: Problem, fault_nodes: set[int], image: str | None = None
               ) -> list[int]:
    """:meth:`_Context.leaf_key` of every node that is not preferred nor reserved, as
    one integer ``class * 2 num_nodes + tie position`` (class 0 healthy, 1 sub-healthy,
    2 a fault node; the tie position is the natural one, holders of ``image`` first:
    :func:`heuristics.images.tie_positions`); a preferred node's key is then
    ``rank - tasks`` (negative)."""
    key = ("multilevel-leaf-rank", image if problem.image_mask(image) is not None else None)
    base: list[int] | None = problem.memo.get(key)
    span = 2 * problem.num_nodes
    tie = tie_positions(problem, image)
    if base is None:
        ranks = tie.astype(np.int64) + span * (problem.health == SUBHEALTHY)
        base = problem.memo[key] = ranks.tolist()
    if not fault_nodes:
        return base
    out = base.copy()
    for x in fault_nodes:
        out[x] = 2 * span + int(tie[x])
    return out


def _fault_key(job: JobView, nodes: np.ndarray) -> tuple[int, int]:
    """``(origin hits, -fault returns)`` of a layout of ``job``, larger is better."""
    on_origin = (nodes == job.origin) & (job.origin >= 0)
    hits = int((on_origin & (job.preferred >= 0)).sum())
    return hits, -int((on_origin & job.fault).sum())


__all__ = [
    "level1_rank",
    "place_multilevel",
    "ranks_from_level1_groups",
    "sort_nodes_by_cached_rank",
]

