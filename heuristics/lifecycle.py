"""The previous-node cache across sessions: the RFC's state diagram (seed §3.1.10) on top of
:class:`models.cache.AffinityCache` (the released operations, reference §3.2–§3.3).

Per ``(owner, rank)`` entry the states of the diagram are:

=============  ======================================================================
``recorded``   已记录: written by an allocation (``NPUAllocateFunc`` → ``RecordAssignment``)
``updated``    已更新: written again by a later allocation (a new node overwrites the old
               value; the same node re-confirms it)
``kept``       已保留: the pod was released (evicted by preempt/reclaim, or scaled down:
               ``NPUDeallocateFunc`` with status ``Releasing``); the entry stays so that the
               next pod of that rank can return
``hit``        已命中: a new pod of the rank queried the cache and found its origin node
(no entry)     已清理 / ``[*]``: rolled back without a previous node, evicted by TTL, or the
               owner was deleted
=============  ======================================================================

Transitions (method → diagram edge):

* :meth:`CacheLifecycle.allocate`: ``[*] → recorded``; ``recorded / hit / updated / kept →
  updated`` (a new node overwrites, the previous node is kept as the rollback anchor).
* :meth:`CacheLifecycle.release` (``Releasing``): ``recorded / updated / hit → kept``; the
  entry and its node are unchanged.
* :meth:`CacheLifecycle.discard` (``Pending``: a discarded allocation, e.g. a gang that did
  not become ready): the released code's single-level undo: with a previous node the entry
  returns to that node and to the state it had before the allocation; without one it is
  deleted (the RFC's ``已清理``).  :class:`GangAllocation` discards a whole gang so that no
  half-placed job leaves a stale entry.
* :meth:`CacheLifecycle.lookup`: ``kept → hit``.
* :meth:`CacheLifecycle.start_session`: a *cold start* (no cache yet: the scheduler just
  started, or :meth:`CacheLifecycle.restart` was called) rebuilds the cache from running
  pods and does not evict; a *warm* session refreshes every owner present in the session
  and then evicts owners older than the TTL (``kept → [*]``).
* :meth:`CacheLifecycle.delete_owner`: the RFC's "Job 删除时清理对应缓存" (``kept → [*]``).

Time is always passed in; there is no hidden clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from models.cache import AffinityCache
from models.scenario import DEFAULT_CACHE_TTL_SECONDS, AffinityCacheModel, CacheEntry


class EntryState(StrEnum):
    """State of one ``(owner, rank)`` cache entry in the RFC's diagram."""

    RECORDED = "recorded"
    UPDATED = "updated"
    KEPT = "kept"
    HIT = "hit"


class TaskStatus(StrEnum):
    """The task status ``NPUDeallocateFunc`` sees."""

    RELEASING = "Releasing"  # evicted (preempt/reclaim) or scaled down: keep the entry
    PENDING = "Pending"  # an allocation rolled back (discard, unpipeline): undo the record


@dataclass
class SessionStart:
    """What :meth:`CacheLifecycle.start_session` did."""

    cold: bool
    rebuilt: int = 0  # entries recorded from running pods (cold start)
    refreshed: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RunningPods:
    """The pods of one running job, for a cold start: owner and rank → node."""

    owner: str | None
    ranks: Mapping[int, str]


class CacheLifecycle:
    """The affinity cache held across sessions (upstream's ``ScheduleHandler``).

    Parameters
    ----------
    cache
        An existing cache (warm), or ``None``: the first session is then a cold start.
    ttl_seconds
        TTL used when a cold start creates the cache.
    """

    def __init__(
        self, cache: AffinityCache | None = None, ttl_seconds: int = DEFAULT_CACHE_TTL_SECONDS
    ) -> None:
        self.cache = cache
        self.ttl_seconds = cache.ttl_seconds if cache is not None else ttl_seconds
        self._state: dict[tuple[str, int], EntryState] = {}
        self._before: dict[tuple[str, int], EntryState | None] = {}
        if cache is not None:
            self._adopt_entries()

    @classmethod
    def from_model(cls, model: AffinityCacheModel, *, cold_if_empty: bool = False
                   ) -> CacheLifecycle:
        """Start from a scenario's ``affinity-cache`` section.

        With ``cold_if_empty`` an empty section means "no cache yet" (cold start), which
        is how a scenario without entries describes a freshly started scheduler.
        """
        if cold_if_empty and not model.entries:
            return cls(None, model.ttl_seconds)
        return cls(AffinityCache.from_model(model))

    def _adopt_entries(self) -> None:
        # Entries that exist before this run started: their pods are not known to run.
        assert self.cache is not None
        for owner in self.cache.owners():
            for rank in (self.cache.get_map(owner) or {}):
                self._state[(owner, rank)] = EntryState.KEPT

    def copy(self) -> CacheLifecycle:
        """An independent copy: cache, entry states and rollback states."""
        out = CacheLifecycle(None, self.ttl_seconds)
        out.cache = self.cache.copy() if self.cache is not None else None
        out._state = dict(self._state)
        out._before = dict(self._before)
        return out

    def export_states(self) -> dict[str, list[list[object]]]:
        """The entry states and rollback states as plain data (JSON-ready).

        The cache itself is :meth:`to_model`; :meth:`from_model` followed by
        :meth:`restore_states` rebuilds an equal lifecycle (a scenario alone cannot: it
        has no states, so every entry would start ``kept``).
        """
        return {"states": [[o, r, s.value] for (o, r), s in sorted(self._state.items())],
                "before": [[o, r, s.value if s is not None else None]
                           for (o, r), s in sorted(self._before.items())]}

    def restore_states(self, data: Mapping[str, list[list[object]]]) -> None:
        """Set the states written by :meth:`export_states` (entries not in the cache are
        ignored)."""
        def key(row: list[object]) -> tuple[str, int]:
            return str(row[0]), int(str(row[1]))

        present = {(o, r) for o in (self.cache.owners() if self.cache is not None else [])
                   for r in (self.cache.get_map(o) or {})} if self.cache is not None else set()
        self._state = {key(row): EntryState(str(row[2])) for row in data.get("states", [])
                       if key(row) in present}
        self._before = {key(row): (EntryState(str(row[2])) if row[2] is not None else None)
                        for row in data.get("before", []) if key(row) in present}

    # ------------------------------------------------------------------ queries
    @property
    def cold(self) -> bool:
        """True when no cache exists (the next session is a cold start)."""
        return self.cache is None

    def state(self, owner: str, rank: int) -> EntryState | None:
        """The entry's state, or ``None`` when there is no entry."""
        if self.cache is None or not self.cache.get(owner, rank):
            return None
        return self._state.get((owner, rank), EntryState.KEPT)

    def node(self, owner: str, rank: int) -> str:
        """The cached node of ``(owner, rank)`` or ``""`` (no state change)."""
        return self.cache.get(owner, rank) if self.cache is not None else ""

    def lookup(self, owner: str, rank: int) -> str:
        """A new pod of ``rank`` queries the cache: ``kept → hit`` when an entry exists."""
        node = self.node(owner, rank)
        if node and self._state.get((owner, rank)) is EntryState.KEPT:
            self._state[(owner, rank)] = EntryState.HIT
        return node

    def counts(self) -> dict[str, int]:
        """Number of entries per state (states with no entry are omitted)."""
        out: dict[str, int] = {}
        if self.cache is None:
            return out
        states, kept = self._state, EntryState.KEPT
        for owner in self.cache.owners():
            for rank in self.cache.get_map(owner) or {}:  # non-empty entries: a state each
                value = states.get((owner, rank), kept).value
                out[value] = out.get(value, 0) + 1
        return out

    def owner_counts(self, owners: Iterable[str]) -> Counter[str]:
        """Entries per state, as :meth:`counts` gives them, among ``owners``' entries
        alone (each owner counted once)."""
        by_state: Counter[EntryState] = Counter()
        cache = self.cache
        if cache is None:
            return Counter()
        states, kept = self._state, EntryState.KEPT
        for owner in set(owners):
            by_state.update(states.get((owner, rank), kept) for rank in cache.ranks(owner))
        return Counter({state.value: count for state, count in by_state.items()})

    def to_model(self) -> AffinityCacheModel:
        """The cache as a scenario section (empty when no cache exists)."""
        if self.cache is None:
            return AffinityCacheModel(ttl_seconds=self.ttl_seconds)
        return self.cache.to_model()

    # ------------------------------------------------------------------ session start
    def restart(self) -> None:
        """The scheduler restarted: the in-memory cache is lost (next session is cold)."""
        self.cache = None
        self._state.clear()
        self._before.clear()

    def start_session(
        self, now: int, present_owners: Iterable[str], running: Iterable[RunningPods] = ()
    ) -> SessionStart:
        """``initAffinityCache``: cold start or refresh-and-evict (reference §3.3 step 1).

        Parameters
        ----------
        now
            The session time.
        present_owners
            Owner UIDs of every job in the session (running or pending).
        running
            Pods running now; used only by a cold start, which records each of them.
        """
        if self.cache is None:
            self.cache = AffinityCache(self.ttl_seconds)
            rebuilt = 0
            for pods in running:
                if not pods.owner:
                    continue  # jobs without an owner UID are never cached
                for rank, node in sorted(pods.ranks.items()):
                    self.cache.record(pods.owner, rank, node, now)
                    self._state[(pods.owner, rank)] = EntryState.RECORDED
                    rebuilt += 1
            # Upstream does not run EvictExpired in the cold-start branch.
            return SessionStart(cold=True, rebuilt=rebuilt)
        refreshed = []
        for owner in sorted(set(present_owners)):
            if owner and self.cache.updated(owner) is not None:
                self.cache.refresh_owner(owner, now)
                refreshed.append(owner)
        evicted = self.cache.evict_expired(now)
        for owner in evicted:
            self._forget(owner)
        return SessionStart(cold=False, refreshed=refreshed, evicted=sorted(evicted))

    # ------------------------------------------------------------------ allocate / release
    def _require(self) -> AffinityCache:
        if self.cache is None:
            raise RuntimeError("no cache: call start_session first (cold start)")
        return self.cache

    def allocate(self, owner: str | None, rank: int, node: str, now: int) -> EntryState | None:
        """``NPUAllocateFunc``: record ``(owner, rank) → node``.

        Returns the new state (``recorded`` for a new entry, ``updated`` otherwise), or
        ``None`` when the job has no owner UID (never cached).
        """
        cache = self._require()
        if not owner:
            return None
        key = (owner, rank)
        existed = bool(cache.get(owner, rank))
        self._before[key] = self._state.get(key) if existed else None
        cache.record(owner, rank, node, now)
        state = EntryState.UPDATED if existed else EntryState.RECORDED
        self._state[key] = state
        return state

    def release(self, owner: str | None, rank: int) -> EntryState | None:
        """``NPUDeallocateFunc`` with status ``Releasing``: the entry is kept."""
        return self.deallocate(owner, rank, TaskStatus.RELEASING)

    def discard(self, owner: str | None, rank: int) -> EntryState | None:
        """``NPUDeallocateFunc`` with status ``Pending``: undo the last record."""
        return self.deallocate(owner, rank, TaskStatus.PENDING)

    def deallocate(self, owner: str | None, rank: int, status: TaskStatus) -> EntryState | None:
        """``NPUDeallocateFunc``: keep the entry (``Releasing``) or roll it back (``Pending``).

        Returns the entry's state afterwards (``None`` when no entry remains).
        """
        if not owner or self.cache is None:
            return None
        key = (owner, rank)
        if not self.cache.get(owner, rank):
            return None
        if status is TaskStatus.RELEASING:
            self._state[key] = EntryState.KEPT
            self._before.pop(key, None)
            return EntryState.KEPT
        self.cache.rollback(owner, rank)
        if self.cache.get(owner, rank):
            before = self._before.pop(key, None)
            self._state[key] = before if before is not None else EntryState.KEPT
            return self._state[key]
        self._state.pop(key, None)
        self._before.pop(key, None)
        return None

    def drop_entries(self, problem: Callable[[str, int, str, str | None], str | None]
                     ) -> list[tuple[str, int, str]]:
        """Remove the entries for which ``problem(owner, rank, node, previous)`` gives a
        reason, with their states; returns ``(owner, rank, reason)`` of each."""
        if self.cache is None:
            return []
        dropped = self.cache.drop_entries(problem)
        for owner, rank, _ in dropped:
            self._state.pop((owner, rank), None)
            self._before.pop((owner, rank), None)
        return dropped

    def delete_owner(self, owner: str | None) -> None:
        """The owner (the job's controller) was deleted: forget all its entries."""
        if not owner or self.cache is None:
            return
        self.cache.remove_owner(owner)
        self._forget(owner)

    def replace_owner(self, owner: str, entries: Sequence[CacheEntry]) -> None:
        """Hold ``entries`` (of ``owner``, distinct ranks) as the owner's entries, as a
        new ``affinity-cache`` section would (:meth:`from_model`): their states become
        ``kept``; the other owners' entries and states stay.  A cold lifecycle gets a
        cache."""
        if self.cache is None:
            self.cache = AffinityCache(self.ttl_seconds)
        states, before = self._state, self._before
        for rank in self.cache.ranks(owner):
            states.pop((owner, rank), None)
            if before:
                before.pop((owner, rank), None)
        self.cache.replace_owner(owner, entries)
        kept = EntryState.KEPT
        for entry in entries:  # every entry names a node (CacheEntry)
            states[(owner, entry.rank)] = kept
            if before:
                before.pop((owner, entry.rank), None)

    def _forget(self, owner: str) -> None:
        for key in [k for k in self._state if k[0] == owner]:
            del self._state[key]
        for key in [k for k in self._before if k[0] == owner]:
            del self._before[key]

    def begin(self, owner: str | None, now: int) -> GangAllocation:
        """Open a gang transaction (Volcano's ``Statement``) for one job."""
        return GangAllocation(self, owner, now)


class GangAllocation:
    """The allocations of one gang job within a session, committed or discarded together.

    Volcano allocates a gang's tasks one by one (each ``NPUAllocateFunc`` records the cache
    entry) and discards them all when the job does not become ready; the discard
    deallocates each task with status ``Pending``, in reverse order, which rolls every
    record back.  A committed gang keeps its records.
    """

    def __init__(self, lifecycle: CacheLifecycle, owner: str | None, now: int) -> None:
        self._lifecycle = lifecycle
        self.owner = owner
        self.now = now
        self._ranks: list[int] = []
        self.closed = False

    def allocate(self, rank: int, node: str) -> EntryState | None:
        """Allocate one task of the gang."""
        if self.closed:
            raise RuntimeError("the gang allocation is already committed or discarded")
        self._ranks.append(rank)
        return self._lifecycle.allocate(self.owner, rank, node, self.now)

    def commit(self) -> list[int]:
        """The gang became ready: keep every record.  Returns the ranks allocated."""
        self.closed = True
        return list(self._ranks)

    def discard(self) -> list[int]:
        """The gang did not become ready: roll every record back, last first."""
        self.closed = True
        for rank in reversed(self._ranks):
            self._lifecycle.discard(self.owner, rank)
        return list(self._ranks)
