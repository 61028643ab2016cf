"""The previous-node (affinity) cache with the operations of the released plugin (§3.2).

Time is always passed in (the scenario's ``now``); there is no hidden clock, so every run
is reproducible.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from models.scenario import DEFAULT_CACHE_TTL_SECONDS, AffinityCacheModel, CacheEntry


@dataclass
class _Slot:
    node: str
    previous: str | None
    updated: int


class AffinityCache:
    """Owner UID → rank → node, with one update time per owner (``PodNodeAffinityCache``).

    :meth:`copy` is copy-on-write: the copy and the original share each owner's entries
    until one of them changes that owner (then it takes a copy of that owner's entries
    alone), so copying costs one dictionary copy, not one object per entry.
    """

    def __init__(self, ttl_seconds: int = DEFAULT_CACHE_TTL_SECONDS) -> None:
        self.ttl_seconds = ttl_seconds
        self._owners: dict[str, dict[int, _Slot]] = {}
        self._updated: dict[str, int] = {}
        #: owners whose entry dictionary another cache (a copy) may hold too
        self._shared: set[str] = set()

    # ------------------------------------------------------------------ conversion
    @classmethod
    def from_model(cls, model: AffinityCacheModel) -> AffinityCache:
        """Build the cache from a scenario's ``affinity-cache`` section."""
        cache = cls(model.ttl_seconds)
        for entry in model.entries:
            cache._owners.setdefault(entry.owner_uid, {})[entry.rank] = _Slot(
                entry.node, entry.previous, entry.updated
            )
            cache._updated[entry.owner_uid] = max(
                cache._updated.get(entry.owner_uid, entry.updated), entry.updated
            )
        return cache

    def copy(self) -> AffinityCache:
        """An independent copy (changing one never changes the other).

        Copy-on-write: both share every owner's entries until one of them changes an
        owner (:meth:`_writable`); the copy costs ``O(owners)`` dictionary work.
        """
        out = AffinityCache(self.ttl_seconds)
        out._owners = dict(self._owners)
        out._updated = dict(self._updated)
        self._shared = set(self._owners)
        out._shared = set(self._owners)
        return out

    def _writable(self, owner: str) -> dict[int, _Slot] | None:
        """The owner's entries, copied first when another cache may hold them too."""
        slots = self._owners.get(owner)
        if slots is not None and owner in self._shared:
            slots = {rank: _Slot(slot.node, slot.previous, slot.updated)
                     for rank, slot in slots.items()}
            self._owners[owner] = slots
            self._shared.discard(owner)
        return slots

    def owner_entries(self, owner: str) -> list[CacheEntry]:
        """The owner's entries as :meth:`to_model` writes them, by rank ([] for none)."""
        slots = self._owners.get(owner)
        if not slots:
            return []
        return [
            CacheEntry(
                owner_uid=owner,
                rank=rank,
                node=slot.node,
                updated=self._updated.get(owner, slot.updated),
                previous=slot.previous or None,  # "" (no rollback anchor) is not written
            )
            for rank, slot in sorted(slots.items())
        ]

    def to_model(self) -> AffinityCacheModel:
        """Write the cache back as a scenario section (every entry carries its owner's time).

        Entries are ordered by owner, then rank.
        """
        entries = [entry for owner in sorted(self._owners)
                   for entry in self.owner_entries(owner)]
        return AffinityCacheModel(ttl_seconds=self.ttl_seconds, entries=entries)

    # ------------------------------------------------------------------ operations
    def record(self, owner: str, rank: int, node: str, now: int) -> None:
        """``RecordAssignment``: remember ``node`` and keep the old one as rollback anchor.

        ``previous`` becomes the old node even when the same node is recorded again; the
        owner's update time becomes ``now``.  An empty owner is never cached.
        """
        if not owner:
            return
        slots = self._writable(owner)
        if slots is None:
            slots = self._owners[owner] = {}
        slot = slots.get(rank)
        if slot is None:
            slots[rank] = _Slot(node, "", now)
        else:
            slot.previous = slot.node
            slot.node = node
            slot.updated = now
        self._updated[owner] = now

    def rollback(self, owner: str, rank: int) -> None:
        """``RollbackAssignment``: undo one record (a discarded allocation).

        With a previous node, restore it and clear the anchor; without one, delete the
        entry, and the owner too when it becomes empty.
        """
        slots = self._writable(owner)
        if slots is None or rank not in slots:
            return
        slot = slots[rank]
        if slot.previous:
            slot.node = slot.previous
            slot.previous = ""
            return
        del slots[rank]
        if not slots:
            del self._owners[owner]
            self._updated.pop(owner, None)
            self._shared.discard(owner)

    def get(self, owner: str, rank: int) -> str:
        """``GetPreferredNode``: the cached node or ``""``."""
        slot = self._owners.get(owner, {}).get(rank)
        return slot.node if slot is not None else ""

    def get_map(self, owner: str) -> dict[int, str] | None:
        """``GetPreferredNodeMap``: rank → node for every non-empty entry, or ``None``."""
        slots = self._owners.get(owner)
        if not slots:
            return None
        found = {rank: slot.node for rank, slot in slots.items() if slot.node}
        return found or None

    def ranks(self, owner: str) -> list[int]:
        """The ranks of the owner's non-empty entries (the keys of :meth:`get_map`)."""
        slots = self._owners.get(owner)
        return [rank for rank, slot in slots.items() if slot.node] if slots else []

    def refresh_owner(self, owner: str, now: int) -> None:
        """``RefreshOwner``: set the owner's time to ``now`` if the owner exists."""
        if owner in self._owners:
            self._updated[owner] = now

    def evict_expired(self, now: int, ttl_seconds: int | None = None) -> list[str]:
        """``EvictExpired``: drop owners whose time is older than ``now - ttl``.

        Returns the evicted owners.
        """
        ttl = self.ttl_seconds if ttl_seconds is None else ttl_seconds
        gone = [owner for owner, t in self._updated.items() if t < now - ttl]
        for owner in gone:
            self.remove_owner(owner)
        return gone

    def replace_owner(self, owner: str, entries: Sequence[CacheEntry]) -> None:
        """Hold ``entries`` (of ``owner``, distinct ranks) as the owner's entries, each
        with its own time; the owner's time becomes the newest of them (none: the owner
        is forgotten), as :meth:`from_model` reads a section."""
        if not entries:
            self.remove_owner(owner)
            return
        self._owners[owner] = {entry.rank: _Slot(entry.node, entry.previous, entry.updated)
                               for entry in entries}
        self._updated[owner] = max(entry.updated for entry in entries)
        self._shared.discard(owner)

    def remove_owner(self, owner: str) -> None:
        """``RemoveOwner``: forget every entry of ``owner`` (job deleted)."""
        self._owners.pop(owner, None)
        self._updated.pop(owner, None)
        self._shared.discard(owner)

    def drop_entries(self, problem: Callable[[str, int, str, str | None], str | None]
                     ) -> list[tuple[str, int, str]]:
        """Remove every entry for which ``problem(owner, rank, node, previous)`` gives a
        reason; returns ``(owner, rank, reason)`` of each removed entry."""
        dropped: list[tuple[str, int, str]] = []
        for owner in list(self._owners):
            slots = self._owners[owner]
            bad = [(rank, why) for rank, slot in slots.items()
                   if (why := problem(owner, rank, slot.node, slot.previous or None))]
            if not bad:
                continue
            writable = self._writable(owner)
            assert writable is not None
            for rank, why in bad:
                del writable[rank]
                dropped.append((owner, rank, why))
            if not writable:
                self.remove_owner(owner)
        return dropped

    def owners(self) -> list[str]:
        """Owners currently cached, sorted."""
        return sorted(self._owners)

    def updated(self, owner: str) -> int | None:
        """The owner's update time, or ``None``."""
        return self._updated.get(owner)

    def __len__(self) -> int:
        return len(self._owners)
