"""Stateful clusters: a scenario and its compiled :class:`~models.compiled.Problem`, kept
between plan calls and updated by deltas.

A scheduler daemon calls the service once per session (about once a second).  Sending and
re-parsing an 8,000-node scenario every time costs more than the greedy answer itself, so a
cluster is ``PUT`` once and then moved forward by small :class:`ClusterDelta` documents.
A delta is applied in three tiers, each paying only for what changed:

``values``
    Only ``free`` and ``health`` of existing nodes changed: the node arrays are copied and
    patched (``O(nodes)`` memory copy, no validation beyond the changed nodes).
``jobs``
    Jobs were submitted or removed, cache events arrived, or ``now`` moved: the
    cross-field rules run again (they are cheap) and only the jobs and the live cache are
    recompiled (:func:`models.compiled.compile_jobs`); node arrays and multilevel trees are
    reused.
``structure``
    Nodes were added or removed, or a node's ``npus``, ``super-pod-id``, ``rack-id`` or
    ``labels`` changed: the in-memory scenario is compiled again (no JSON parsing).

The previous-node cache follows the RFC's lifecycle through
:class:`heuristics.lifecycle.CacheLifecycle`: ``bind`` records an allocation (the old node
becomes the rollback anchor), ``evict`` releases a pod and keeps its entry, ``discard``
rolls a discarded allocation back, ``delete-owner`` forgets a deleted job's entries and
``refresh`` sets an owner's time to ``now``.

Every applied delta yields a new immutable :class:`ClusterSnapshot`; a plan that started on
an older snapshot finishes on it, so deltas and plans never block each other for long.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from heuristics.lifecycle import CacheLifecycle
from models.compiled import (
    HEALTHY,
    SUBHEALTHY,
    UNHEALTHY,
    Problem,
    compile_jobs,
    compile_scenario,
    job_queue,
)
from models.scenario import AffinityCacheModel, Health, Job, Node, Scenario
from models.validation import InputError, JobShape, validate_scenario

_HEALTH_CODE = {Health.HEALTHY: HEALTHY, Health.SUBHEALTHY: SUBHEALTHY,
                Health.UNHEALTHY: UNHEALTHY}
#: Node fields whose change only needs the node arrays patched.
_VALUE_FIELDS = frozenset({"free", "health"})


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)


class NodeUpdate(_Model):
    """A change to one existing node; fields left out keep their value.

    ``super-pod-id`` / ``rack-id`` set to a negative number take the node out of its super
    pod / rack (the contract's "in none"); ``labels`` replaces the whole label map.
    """

    name: str = Field(min_length=1)
    free: int | None = None
    health: Health | None = None
    npus: int | None = Field(None, gt=0)
    super_pod_id: int | None = Field(None, alias="super-pod-id")
    rack_id: int | None = Field(None, alias="rack-id")
    labels: dict[str, str] | None = None


class CacheEventKind(StrEnum):
    """Previous-node cache events (the RFC's lifecycle)."""

    BIND = "bind"  # NPUAllocateFunc: record (owner, rank) -> node
    EVICT = "evict"  # NPUDeallocateFunc, Releasing: keep the entry
    DISCARD = "discard"  # NPUDeallocateFunc, Pending: roll the last record back
    DELETE_OWNER = "delete-owner"  # the job was deleted: forget its entries
    REFRESH = "refresh"  # the owner is present in this session: its time becomes now


class CacheEvent(_Model):
    """One cache event; ``rank`` is needed by bind/evict/discard, ``node`` by bind."""

    event: CacheEventKind
    owner_uid: str = Field(alias="owner-uid", min_length=1)
    rank: int | None = Field(None, ge=0)
    node: str | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _needs(self) -> CacheEvent:
        needs_rank = (CacheEventKind.BIND, CacheEventKind.EVICT, CacheEventKind.DISCARD)
        if self.event in needs_rank and self.rank is None:
            raise ValueError(f"a '{self.event.value}' event needs 'rank'")
        if self.event is CacheEventKind.BIND and self.node is None:
            raise ValueError("a 'bind' event needs 'node'")
        return self


class ClusterDelta(_Model):
    """Changes to a stored cluster since the last call.

    Applied in this order: ``now``, ``nodes-removed``, ``nodes-added``, ``node-updates``,
    ``jobs-removed``, ``jobs-submitted``, ``cache-events``.  A delta is applied whole or
    not at all (any error leaves the cluster unchanged).
    """

    now: int | None = Field(None, description="the session time (unix seconds)")
    expect_version: int | None = Field(
        None, alias="expect-version",
        description="refuse the delta (409) unless the cluster is at this version")
    node_updates: list[NodeUpdate] = Field(default_factory=list, alias="node-updates")
    nodes_added: list[Node] = Field(default_factory=list, alias="nodes-added")
    nodes_removed: list[str] = Field(default_factory=list, alias="nodes-removed")
    jobs_submitted: list[Job] = Field(default_factory=list, alias="jobs-submitted")
    jobs_removed: list[str] = Field(default_factory=list, alias="jobs-removed")
    cache_events: list[CacheEvent] = Field(default_factory=list, alias="cache-events")


class ClusterInfo(_Model):
    """A stored cluster's summary (the answer of PUT, PATCH and GET)."""

    name: str
    version: int
    nodes: int
    jobs: int
    cache_entries: int = Field(alias="cache-entries")
    cache_states: dict[str, int] = Field(default_factory=dict, alias="cache-states")
    now: int | None = None
    last_update: str = Field("full", alias="last-update",
                             description="values, jobs, structure, full or none")
    apply_seconds: float = Field(0.0, alias="apply-seconds")
    notes: list[str] = Field(default_factory=list)


class VersionConflict(Exception):
    """``expect-version`` does not match the cluster's version."""


@dataclass(frozen=True, eq=False)
class ClusterSnapshot:
    """One immutable version of a cluster: what a plan call reads."""

    name: str
    version: int
    problem: Problem
    solver_cache: Any = None  # seam: whatever the CP-SAT layer reuses between calls


def _shapes(problem: Problem) -> dict[str, JobShape]:
    return {job.name: JobShape(policy=job.policy, family=job.family, whole_node=job.whole_node,
                               node_npus=job.node_npus, sp_block=job.sp_block,
                               tp_block=job.tp_block, levels=job.levels, soft=job.soft)
            for job in problem.jobs}


def recompile_jobs(problem: Problem, scenario: Scenario,
                   shapes: dict[str, JobShape] | None = None) -> Problem:
    """A new problem with ``scenario``'s jobs, cache and ``now``; nodes and trees reused.

    ``scenario`` must have the same nodes (names and order) as ``problem.scenario``.
    Without ``shapes`` the cross-field rules run again (raising :class:`InputError`).
    """
    if shapes is None:
        shapes, messages = validate_scenario(scenario, "<delta>")
        if messages:
            raise InputError(messages)
    now = int(scenario.now) if scenario.now is not None else int(time.time())
    jobs, live = compile_jobs(scenario, shapes, problem.node_index, now)
    return replace(problem, scenario=scenario, now=now, jobs=jobs,
                   job_index={job.name: j for j, job in enumerate(jobs)},
                   queue=job_queue(jobs), live=live)


@dataclass
class _Applied:
    scenario: Scenario
    problem: Problem
    lifecycle: CacheLifecycle
    tier: str
    notes: list[str]


def apply_delta(problem: Problem, lifecycle: CacheLifecycle, delta: ClusterDelta
                ) -> _Applied:
    """Apply ``delta`` to a compiled cluster without touching the inputs.

    Parameters
    ----------
    problem
        The cluster's current compiled problem (its ``scenario`` is the current scenario).
    lifecycle
        The cluster's cache lifecycle.  Cache events are applied to it in place once the
        delta itself is known to be valid; if the resulting scenario is then refused
        (:class:`InputError`), the caller restores it from ``problem.scenario``.
    delta
        The changes.

    Returns
    -------
    _Applied
        The new scenario, problem and lifecycle, the tier that was paid (``values``,
        ``jobs``, ``structure`` or ``none``) and notes.

    Raises
    ------
    InputError
        With every problem found, each naming the delta field and the node, job or event.
    """
    scenario = problem.scenario
    errors: list[str] = []
    notes: list[str] = []

    def say(where: str, text: str) -> None:
        errors.append(f"<delta>: {where}: {text}")

    structural = False
    jobs_changed = delta.now is not None and delta.now != scenario.now
    now = delta.now if delta.now is not None else scenario.now
    nodes = list(scenario.nodes)

    removed = set(delta.nodes_removed)
    if removed:
        for i, name in enumerate(delta.nodes_removed):
            if name not in problem.node_index:
                say(f"field 'nodes-removed[{i}]'", f"node '{name}' does not exist")
        nodes = [n for n in nodes if n.name not in removed]
        structural = True
    if delta.nodes_added:
        present = {n.name for n in nodes}
        for i, node in enumerate(delta.nodes_added):
            if node.name in present:
                say(f"field 'nodes-added[{i}].name'",
                    f"node '{node.name}' already exists (use node-updates)")
            present.add(node.name)
        nodes.extend(delta.nodes_added)
        structural = True

    position = ({n.name: i for i, n in enumerate(nodes)} if structural
                else problem.node_index)
    changed: list[int] = []
    for i, node_update in enumerate(delta.node_updates):
        at = position.get(node_update.name)
        if at is None:
            say(f"field 'node-updates[{i}].name'", f"node '{node_update.name}' does not exist")
            continue
        fields = node_update.model_fields_set - {"name"}
        values = {f: getattr(node_update, f) for f in fields}
        node = nodes[at].model_copy(update=values)
        if node.free < 0 or node.free > node.npus:
            say(f"field 'node-updates[{i}].free'",
                f"node '{node.name}': free {node.free} must be between 0 and npus ({node.npus})")
        nodes[at] = node
        if fields - _VALUE_FIELDS:
            structural = True
        else:
            changed.append(at)

    jobs = list(scenario.jobs)
    if delta.jobs_removed:
        names = {j.name for j in jobs}
        for i, name in enumerate(delta.jobs_removed):
            if name not in names:
                say(f"field 'jobs-removed[{i}]'", f"job '{name}' is not pending")
        gone = set(delta.jobs_removed)
        jobs = [j for j in jobs if j.name not in gone]
        jobs_changed = True
    if delta.jobs_submitted:
        jobs.extend(delta.jobs_submitted)  # duplicates are reported by the rules below
        jobs_changed = True

    node_names = {n.name for n in nodes} if delta.cache_events else set()
    for i, event in enumerate(delta.cache_events):
        if event.event is CacheEventKind.BIND and event.node not in node_names:
            say(f"field 'cache-events[{i}].node'", f"node '{event.node}' does not exist")
    running = scenario.running
    if removed and running:
        running = [r.model_copy(update={"ranks": {k: v for k, v in r.ranks.items()
                                                  if v not in removed}}) for r in running]
    if errors:
        raise InputError(errors)

    cache_model = scenario.affinity_cache
    new_lifecycle = lifecycle  # modified in place from here on (see Cluster.apply)
    if delta.cache_events or removed:
        stamp = int(now) if now is not None else int(time.time())
        for i, event in enumerate(delta.cache_events):
            owner, rank = event.owner_uid, event.rank
            if event.event is CacheEventKind.BIND:
                assert rank is not None and event.node is not None
                new_lifecycle.allocate(owner, rank, event.node, stamp)
            elif event.event is CacheEventKind.EVICT:
                assert rank is not None
                if new_lifecycle.release(owner, rank) is None:
                    notes.append(f"cache-events[{i}]: no entry for ({owner}, {rank}) to keep")
            elif event.event is CacheEventKind.DISCARD:
                assert rank is not None
                new_lifecycle.discard(owner, rank)
            elif event.event is CacheEventKind.DELETE_OWNER:
                new_lifecycle.delete_owner(owner)
            else:
                if new_lifecycle.cache is not None:
                    new_lifecycle.cache.refresh_owner(owner, stamp)
        cache_model = new_lifecycle.to_model()
        if removed:
            cache_model, dropped = _drop_removed(cache_model, removed)
            if dropped:
                notes.append(f"dropped {dropped} cache entries of removed nodes")
                new_lifecycle = CacheLifecycle.from_model(cache_model)
        jobs_changed = True

    update: dict[str, Any] = {}
    if structural or changed:
        update["nodes"] = nodes
    if jobs_changed:
        update.update(jobs=jobs, affinity_cache=cache_model, now=now, running=running)
    if not update:
        return _Applied(scenario, problem, lifecycle, "none", notes)
    new = scenario.model_copy(update=update)
    if structural:
        return _Applied(new, compile_scenario(new, "<delta>"), new_lifecycle, "structure", notes)
    out = problem
    if changed:
        free = problem.free.copy()
        health = problem.health.copy()
        for at in changed:
            # a vNPU node serves vNPU jobs only: no free chip for the others (compiled)
            free[at] = 0 if nodes[at].vnpu is not None else nodes[at].free
            health[at] = _HEALTH_CODE[nodes[at].health]
        out = replace(out, scenario=new, free=free, health=health)
    if jobs_changed:
        return _Applied(new, recompile_jobs(out, new), new_lifecycle, "jobs", notes)
    return _Applied(new, replace(out, scenario=new), new_lifecycle, "values", notes)


def _drop_removed(model: AffinityCacheModel, removed: set[str]
                  ) -> tuple[AffinityCacheModel, int]:
    kept = []
    dropped = 0
    for entry in model.entries:
        if entry.node in removed:
            dropped += 1
            continue
        if entry.previous in removed:
            entry = entry.model_copy(update={"previous": None})
        kept.append(entry)
    return model.model_copy(update={"entries": kept}), dropped


class Cluster:
    """A named cluster held by the service: current snapshot plus the cache lifecycle.

    Deltas are serialised by a lock; plan calls read :attr:`snapshot` without locking.
    """

    def __init__(self, name: str, problem: Problem, version: int = 1) -> None:
        self.name = name
        self._lock = threading.Lock()
        self.lifecycle = CacheLifecycle.from_model(problem.scenario.affinity_cache)
        self.snapshot = ClusterSnapshot(name, version, problem)
        self.last_update = "full"
        self.apply_seconds = 0.0
        self.notes: list[str] = []

    def apply(self, delta: ClusterDelta) -> ClusterInfo:
        """Apply a delta (whole or not at all) and return the new summary.

        Raises
        ------
        InputError
            When the delta or the resulting scenario is invalid (the cluster is unchanged).
        VersionConflict
            When ``expect-version`` does not match.
        """
        with self._lock:
            started = time.perf_counter()
            current = self.snapshot
            if delta.expect_version is not None and delta.expect_version != current.version:
                raise VersionConflict(
                    f"cluster '{self.name}' is at version {current.version}, the delta "
                    f"expects {delta.expect_version}")
            try:
                applied = apply_delta(current.problem, self.lifecycle, delta)
            except InputError:
                if delta.cache_events or delta.nodes_removed:  # undo in-place cache events
                    self.lifecycle = CacheLifecycle.from_model(
                        current.problem.scenario.affinity_cache)
                raise
            self.lifecycle = applied.lifecycle
            if applied.tier != "none":
                # the seam: a solver cache would be updated (or dropped) here with the delta
                self.snapshot = ClusterSnapshot(self.name, current.version + 1,
                                                applied.problem, current.solver_cache)
            self.last_update = applied.tier
            self.apply_seconds = time.perf_counter() - started
            self.notes = applied.notes
            return self.info()

    def refresh_clock(self) -> ClusterSnapshot:
        """The snapshot to plan on; without a scenario ``now`` the live cache follows the clock.

        A cluster whose scenario has no ``now`` had its live cache computed at the last
        update; when the clock has moved on since, the jobs are recompiled (cheap) so that
        TTL expiry is measured from the time of the plan, as a fresh snapshot would be.
        """
        snap = self.snapshot
        if snap.problem.scenario.now is not None or snap.problem.now >= int(time.time()):
            return snap
        with self._lock:
            snap = self.snapshot
            if snap.problem.now < int(time.time()):
                problem = recompile_jobs(snap.problem, snap.problem.scenario,
                                         _shapes(snap.problem))
                snap = replace(snap, problem=problem)
                self.snapshot = snap
            return snap

    def info(self) -> ClusterInfo:
        """The cluster's summary."""
        problem = self.snapshot.problem
        scenario = problem.scenario
        return ClusterInfo(
            name=self.name, version=self.snapshot.version, nodes=problem.num_nodes,
            jobs=len(problem.jobs), cache_entries=len(scenario.affinity_cache.entries),
            cache_states=self.lifecycle.counts(), now=scenario.now,
            last_update=self.last_update, apply_seconds=round(self.apply_seconds, 6),
            notes=list(self.notes))


class ClusterStore:
    """The service's clusters by name, bounded in number."""

    def __init__(self, max_clusters: int = 16) -> None:
        self.max_clusters = max_clusters
        self._clusters: dict[str, Cluster] = {}
        self._lock = threading.Lock()

    def put(self, name: str, problem: Problem, version: int = 1) -> tuple[Cluster, bool]:
        """Store (or replace) a cluster; returns it and whether it is new.

        Raises
        ------
        OverflowError
            When the store is full and ``name`` is new.
        """
        with self._lock:
            created = name not in self._clusters
            if created and len(self._clusters) >= self.max_clusters:
                raise OverflowError(f"the service holds {self.max_clusters} clusters already; "
                                    "delete one first")
            cluster = Cluster(name, problem, version)
            self._clusters[name] = cluster
            return cluster, created

    def get(self, name: str) -> Cluster | None:
        """The cluster named ``name``, or ``None``."""
        return self._clusters.get(name)

    def delete(self, name: str) -> bool:
        """Forget a cluster; returns whether it existed."""
        with self._lock:
            return self._clusters.pop(name, None) is not None

    def __len__(self) -> int:
        return len(self._clusters)
