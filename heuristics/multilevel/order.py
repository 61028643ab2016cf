"""Rank order of a multilevel layout: which node each rank gets.

The public helpers are upstream's rank conventions (``sortNodesByCachedRank``,
``getL1Ranks``); :func:`write_layout` turns a finished
:class:`heuristics.multilevel.run.Run`'s task tree into ranks, with the RFC's position
pre-allocation (``sortFreeTasksByPreferredRank``: :func:`slots_by_votes`) at every level
and cached positions inside a level1 group (:func:`leaf_order`).  Part of
:mod:`heuristics.multilevel`, which re-exports the public helpers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from models.compiled import natural_key

if TYPE_CHECKING:
    from heuristics.multilevel.run import Run

T = TypeVar("T")


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


def prefs_of(task: Any, pref: dict[int, int],
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
            out.extend(prefs_of(child, pref, memo))
    if memo is not None:
        memo[id(task)] = out
    return out


def slots_by_votes(children: list[Any], start: int, size: int,
                   pref: dict[int, int], memo: dict[int, list[int]] | None = None) -> list[Any]:
    """Position pre-allocation of child groups (``sortFreeTasksByPreferredRank``)."""
    count = len(children)
    if count == 1 or not pref:
        return children
    end = start + count * size
    bids: list[tuple[int, int, int]] = []
    for i, child in enumerate(children):
        votes: dict[int, int] = {}
        for r in prefs_of(child, pref, memo):
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


def write_layout(run: Run, base: int, out: list[int], npos: list[int], tasks: int) -> None:
    """Turn ``run``'s task tree into ranks ``base..`` of ``out`` (a job of ``tasks``
    ranks; ``npos``: tie position per node, :func:`heuristics.images.tie_list`)."""
    req, k1, pref = run.req, run.k1, run.pref
    groups: dict[str, list[int]] = {}
    a1 = req[k1]
    memo: dict[int, list[int]] = {}
    # the task tree depth first, children in slot order (a stack, not a nested function
    # that calls itself: that would be a reference cycle holding ``groups`` and ``memo``
    # until the cyclic collector finds it)
    stack: list[tuple[list[Any], int, int]] = [(run.result, run.d0 + 1, base)]
    while stack:
        children, depth, start = stack.pop()
        size = req[depth]
        if depth == k1 + 1:  # the sub-job is part of one level1 group: place leaves
            groups[str(start // a1)] = leaf_order(children, start, pref, npos)
            continue
        ordered = slots_by_votes(children, start, size, pref, memo)
        below: list[tuple[list[Any], int, int]] = []
        for i, child in enumerate(ordered):
            first = start + i * size
            if depth == k1:
                groups[str(first // a1)] = leaf_order(child, first, pref, npos)
            else:
                below.append((child, depth + 1, first))
        stack.extend(reversed(below))
    if run.d0 == k1:  # single-leaf repair: the "group" starts at base, not at a1 * g
        (nodes,) = groups.values()
        out[base:base + len(nodes)] = nodes
        return
    for gid, nodes in groups.items():
        first = int(gid) * a1
        out[first:first + len(nodes)] = nodes
    if base == 0 and len(groups) * a1 == tasks:
        # Whole job: ranks follow getL1Ranks' convention over the level1 groups.
        out[:] = ranks_from_level1_groups(groups)


def leaf_order(leaves: list[int], start: int, pref: dict[int, int], npos: list[int]
               ) -> list[int]:
    """``leaves`` of one level1 group placed from rank ``start``: ``npos`` (tie) order,
    every preferred leaf back at its cached position."""
    ordered = sorted(leaves, key=npos.__getitem__)
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


__all__ = [
    "leaf_order",
    "level1_rank",
    "prefs_of",
    "ranks_from_level1_groups",
    "slots_by_votes",
    "sort_nodes_by_cached_rank",
    "write_layout",
]
