"""A stored cluster's previous-node cache, indexed by owner, so that a delta pays for the
owners it changes and not for every entry.

A ``PATCH`` with cache events (``bind``, ``evict``, ...) or a ``now`` that expires or
revives an owner used to rebuild the whole ``affinity-cache`` section (one validated
:class:`~models.scenario.CacheEntry` per entry), check every entry again and recompute the
live cache: ``O(entries)`` of Python work, 22-62 ms at 65,536 nodes with 2,500-3,700
entries.  :class:`CacheView` keeps, per compiled problem, the section's entries grouped by
owner and each owner's newest time; from it

* :func:`patch_cache` writes the section after the events by replacing the changed
  owners' entries only (the others are the same objects), exactly as
  :meth:`models.cache.AffinityCache.to_model` would write the whole cache;
* :func:`patch_live` gives the live cache at a new ``now`` reusing every unchanged
  owner's entry map (:func:`models.compiled.live_cache` would rebuild them all);
* :func:`same_live_owners` decides by two binary searches whether a ``now`` move expires
  or revives any owner at all.

What is left per delta is dictionary work over the owners (a few hundred to a few
thousand: copying and walking dictionaries), not model work over the entries.  The
results are equal to the full rebuild's, in the same order: ``tests/solver/service/
test_cache_incremental.py`` applies random delta sequences both ways and compares.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain

import numpy as np
from pydantic import ValidationError

from heuristics.lifecycle import CacheLifecycle
from models.cache import AffinityCache
from models.compiled import Problem
from models.scenario import AffinityCacheModel, CacheEntry


@dataclass(frozen=True, eq=False)
class CacheView:
    """A problem's ``affinity-cache`` entries by owner.

    Attributes
    ----------
    by_owner
        Owner → its entries in section order; the owners in order of first appearance.
    newest
        Owner → the newest ``updated`` of its entries (what its liveness depends on).
    grouped
        The section is ``by_owner``'s entries owner after owner, the owners in uid order.
    irregular
        The owners whose entries are not what :meth:`~models.cache.AffinityCache.to_model`
        writes for them: ranks not ascending, an entry older than the owner's newest, or
        a ``previous`` of ``""``.
    """

    by_owner: dict[str, tuple[CacheEntry, ...]]
    newest: dict[str, int]
    grouped: bool
    irregular: frozenset[str] = frozenset()

    @property
    def canonical(self) -> bool:
        """The section is what :meth:`~models.cache.AffinityCache.to_model` writes: ordered
        by owner, then rank, every entry carrying its owner's newest time and no
        ``previous`` of ``""``.  Only then can a change of some owners be written by
        replacing their entries alone (:func:`patch_cache`)."""
        return self.grouped and not self.irregular

    @cached_property
    def times(self) -> np.ndarray:
        """Every owner's newest time, sorted (int64)."""
        return np.sort(np.fromiter(self.newest.values(), dtype=np.int64,
                                   count=len(self.newest)))


def _regular(entries: Sequence[CacheEntry], newest: int) -> bool:
    """Whether one owner's entries are as :meth:`~models.cache.AffinityCache.to_model`
    writes them (ranks ascending, each at the owner's newest time, no ``previous`` "")."""
    last = -1
    for entry in entries:
        if entry.rank <= last or entry.updated != newest or entry.previous == "":
            return False
        last = entry.rank
    return True


#: Per compiled problem, its :class:`CacheView`; a problem made from another with the same
#: cache section shares it.
_VIEWS: weakref.WeakKeyDictionary[Problem, CacheView] = weakref.WeakKeyDictionary()


def build_view(model: AffinityCacheModel) -> CacheView:
    """The :class:`CacheView` of a cache section: one pass over its entries."""
    by_owner: dict[str, list[CacheEntry]] = {}
    newest: dict[str, int] = {}
    grouped = True
    last: str | None = None
    for entry in model.entries:
        owner = entry.owner_uid
        if owner != last:
            if grouped and last is not None and owner < last:
                grouped = False
            if owner in by_owner:
                grouped = False
            last = owner
        by_owner.setdefault(owner, []).append(entry)
        old = newest.get(owner)
        if old is None or entry.updated > old:
            newest[owner] = entry.updated
    irregular = frozenset(owner for owner, entries in by_owner.items()
                          if not _regular(entries, newest[owner]))
    return CacheView({owner: tuple(entries) for owner, entries in by_owner.items()}, newest,
                     grouped, irregular)


def cache_view(problem: Problem) -> CacheView:
    """The :class:`CacheView` of ``problem``'s cache section, built once per problem."""
    view = _VIEWS.get(problem)
    if view is None:
        view = _VIEWS[problem] = build_view(problem.scenario.affinity_cache)
    return view


def remember_view(problem: Problem, view: CacheView) -> None:
    """Record ``view`` as ``problem``'s (its cache section is the one ``view`` indexes)."""
    _VIEWS[problem] = view


def owner_times(problem: Problem) -> np.ndarray:
    """The newest ``updated`` time of every cache owner of ``problem``, sorted (int64).

    Computed once per cache section and kept while a problem with it lives.
    """
    return cache_view(problem).times


def same_live_owners(problem: Problem, now: int) -> bool:
    """Whether the same cache owners are live at ``now`` as at ``problem.now``.

    An owner is live at ``t`` while its newest entry time is at least ``t - ttl``
    (:func:`models.compiled.live_cache`); between the two times an owner changes exactly
    when its newest time lies in ``[min - ttl, max - ttl)``.
    """
    if now == problem.now:
        return True
    ttl = problem.scenario.affinity_cache.ttl_seconds
    low, high = sorted((problem.now, now))
    times = owner_times(problem)
    return bool(np.searchsorted(times, low - ttl) == np.searchsorted(times, high - ttl))


def patch_cache(view: CacheView, cache: AffinityCache, owners: Iterable[str],
                nodes: Mapping[str, int]) -> tuple[AffinityCacheModel, CacheView] | None:
    """The cache section after ``owners`` changed in ``cache``, and its view.

    ``view`` is the section before the change (it must be :attr:`CacheView.canonical`);
    ``cache`` holds every owner as the section does, except ``owners``.  The result equals
    ``cache.to_model()``: the changed owners' entries are written anew (and checked by
    :class:`~models.scenario.CacheEntry`), every other entry is the same object, and the
    section's own bounds (its length) are checked.  ``None`` when the section cannot be
    patched (``view`` is not canonical) or an entry or the section breaks a rule, or names
    a node not in ``nodes``: the caller then writes it whole, which gives the messages.
    """
    if not view.canonical:
        return None
    by_owner = dict(view.by_owner)
    newest = dict(view.newest)
    for owner in set(owners):
        try:
            entries = cache.owner_entries(owner)
        except ValidationError:
            return None
        if any(entry.node not in nodes or (entry.previous is not None
                                           and entry.previous not in nodes)
               for entry in entries):
            return None
        if entries:
            by_owner[owner] = tuple(entries)
            newest[owner] = entries[0].updated
        else:
            by_owner.pop(owner, None)
            newest.pop(owner, None)
    ordered = sorted(by_owner)
    try:
        model = AffinityCacheModel(
            ttl_seconds=cache.ttl_seconds,
            entries=list(chain.from_iterable(map(by_owner.__getitem__, ordered))))
    except ValidationError:
        return None
    return model, CacheView({owner: by_owner[owner] for owner in ordered}, newest, True)


def replace_owners(view: CacheView, ttl: int,
                   given: Mapping[str, Sequence[CacheEntry]]
                   ) -> tuple[AffinityCacheModel, CacheView]:
    """The cache section ``view`` indexes with ``given`` owners' entries replaced (``[]``:
    the owner is gone): the owners in uid order, each owner's entries in section order
    (a given owner's in the order given), every entry not given the same object.

    The given entries must be of their owner, with distinct ranks, on existing nodes
    (the caller checks); the section's own bounds (its length) are checked here.

    Raises
    ------
    pydantic.ValidationError
        When the section breaks its bounds.
    """
    by_owner = dict(view.by_owner)
    newest = dict(view.newest)
    irregular = set(view.irregular)
    for owner, entries in given.items():
        irregular.discard(owner)
        if not entries:
            by_owner.pop(owner, None)
            newest.pop(owner, None)
            continue
        by_owner[owner] = tuple(entries)
        newest[owner] = max(entry.updated for entry in entries)
        if not _regular(entries, newest[owner]):
            irregular.add(owner)
    ordered = sorted(by_owner)
    model = AffinityCacheModel(
        ttl_seconds=ttl, entries=list(chain.from_iterable(map(by_owner.__getitem__, ordered))))
    return model, CacheView({owner: by_owner[owner] for owner in ordered}, newest, True,
                            frozenset(irregular))


def patch_live(live: dict[str, dict[int, str]], view: CacheView, changed: Iterable[str],
               now: int, ttl: int) -> dict[str, dict[int, str]]:
    """The live cache at ``now`` of the section ``view`` indexes.

    ``live`` is the live cache of the section before ``changed`` owners changed (at any
    time): an owner live now keeps its map from ``live`` when it has one there, unless
    it is among ``changed`` and its map is not the same any more.  Equal to
    :func:`models.compiled.live_cache` of the section, in the same order.
    """
    cutoff = now - ttl
    fresh = set(changed)
    out: dict[str, dict[int, str]] = {}
    newest = view.newest
    for owner, entries in view.by_owner.items():
        if newest[owner] >= cutoff:
            ranks = live.get(owner)
            if ranks is None or owner in fresh:
                written = {e.rank: e.node for e in entries}
                # a changed owner whose map is the same (its times alone moved) keeps
                # the old map: its jobs' origins need not be computed again
                if ranks is None or list(ranks.items()) != list(written.items()):
                    ranks = written
            out[owner] = ranks
    return out


def owner_state_counts(lifecycle: CacheLifecycle, owners: Iterable[str]) -> Counter[str]:
    """Entries per state (:meth:`heuristics.lifecycle.CacheLifecycle.counts`) among
    ``owners``' entries alone."""
    return lifecycle.owner_counts(owners)
