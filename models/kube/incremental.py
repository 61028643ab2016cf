"""The import of one change: a watched cluster's next scenario from its last, per object.

:meth:`models.kube.build.ClusterImport.build` imports every object; a watcher that does
so on every change pays for the whole cluster per event (seconds at 16,384 nodes).
:class:`ImportPieces` keeps what the last import decided per object (each node's item and
health, each job's spec and item, the cache entries), and :func:`advance` computes the
next import from the objects that changed since:

* a node whose record or device records changed, or whose pods' chips changed: that
  node's item again (:meth:`~models.kube.build.ClusterImport.npu_node`); when its health
  changes, the jobs with a pod or a cache entry on it are computed again (their fault and
  running ranks read it);
* a job whose pods or PodGroup changed: its spec again
  (:func:`~models.kube.jobs.job_spec`, from the held records of its pods and PodGroup),
  its owner's cache entries (bound ranks, reschedule records, over the last import's
  entries, which are its ``--previous``) and its item
  (:meth:`~models.kube.build.ClusterImport.job_item`);
* the ranks noted bound (or dropped) at the event boundaries since the last import are
  written into the last import's cache first, as the import chain's ``--previous`` has
  them;
* a moved ``now`` re-stamps the bound ranks of the owners whose
  :func:`~models.kube.jobs.bound_stamp` moved with it, as an import at that time does
  (each owner once a grain, 60 s; an owner whose stamp did not move keeps its entries).

What this cannot decide raises :class:`NeedsWhole`, and the caller imports every object
(the importer stays the oracle): a node that joins or leaves the import, a change of a
node's images (the jobs' image sizes read every node), dynamic vNPU nodes or jobs, any
error of the strict import.  The ConfigMaps other than device records and the
PriorityClasses are read by every job; their changes are whole imports too.

The result equals the whole import of the same objects with ``--previous`` the last one
(``tests/models/kube/test_incremental.py`` checks every path against it).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from models.compiled import natural_key
from models.kube.build import (
    _NODE_FIELDS,
    ClusterImport,
    ImportResult,
    _validated,
    queue_key,
    set_image_size,
)
from models.kube.jobs import JobGroup, JobSpec, PodRecord, bound_stamp, job_spec
from models.kube.nodes import NodeUsage
from models.kube.source import Diagnostics
from models.scenario import (
    AffinityCacheModel,
    CacheEntry,
    Config,
    Health,
    Job,
    Node,
    RunningJob,
    Scenario,
    VnpuJob,
)

CacheKey = tuple[str, int]


class NeedsWhole(Exception):
    """The change cannot be imported alone: import every object."""


@dataclass
class ImportPieces:
    """One import, kept per object (what :func:`advance` starts from).

    ``nodes``, ``jobs`` and ``running`` hold the scenario's items in the order of the
    stored scenario (``jobs``/``running`` keyed by job name, which is the job id
    ``namespace/podgroup``); ``specs`` every job the import decided on (also those whose
    item it did not import), ``owners`` owner uid -> its job ids.
    """

    now: int
    mode: str
    self_maintain: bool
    config: dict[str, Any]
    ttl: int
    nodes: dict[str, dict[str, Any]]
    models: dict[str, Node]
    health: dict[str, Health]
    bad_chips: dict[str, set[str]]
    image_sizes: dict[str, float]
    specs: dict[str, JobSpec]
    owners: dict[str, set[str]]
    jobs: dict[str, dict[str, Any]]
    running: dict[str, dict[str, Any]]
    vnpu_jobs: list[dict[str, Any]]
    cache: dict[CacheKey, dict[str, Any]]
    #: dynamic vNPU nodes or jobs: every change is a whole import
    whole_only: bool = False
    #: the config as the job rules read it (``derive_shape`` reads only the config)
    base: Scenario = field(default_factory=Scenario.model_construct)

    @classmethod
    def of(cls, result: ImportResult) -> ImportPieces:
        """The pieces of a whole import."""
        parts = result.parts
        assert parts is not None, "an import of ClusterImport.build has its parts"
        data = result.data
        scenario = result.scenario
        specs = {spec.name: spec for spec in parts.specs}
        owners: dict[str, set[str]] = {}
        for spec in parts.specs:
            if spec.owner is not None:
                owners.setdefault(spec.owner, set()).add(spec.name)
        nodes = {item["name"]: item for item in data["nodes"]}
        vnpu = bool(data.get("vnpu-jobs")) or any("vnpu" in n for n in data["nodes"])
        return cls(
            now=int(data["now"]), mode=parts.mode, self_maintain=parts.self_maintain,
            config=data["config"], ttl=int(data["affinity-cache"]["ttl-seconds"]),
            nodes=nodes, models={n.name: n for n in scenario.nodes},
            health=dict(parts.health), bad_chips=dict(parts.bad_chips),
            image_sizes=parts.image_sizes, specs=specs, owners=owners,
            jobs={j["name"]: j for j in data["jobs"]},
            running={r["name"]: r for r in data["running"]},
            vnpu_jobs=list(data.get("vnpu-jobs", [])),
            cache={(e["owner-uid"], e["rank"]): e for e in data["affinity-cache"]["entries"]},
            whole_only=vnpu,
            base=Scenario.model_construct(config=scenario.config))

    def copy(self) -> ImportPieces:
        """A copy whose dicts can change without changing these (items are shared)."""
        return replace(self, nodes=dict(self.nodes), models=dict(self.models),
                       health=dict(self.health), bad_chips=dict(self.bad_chips),
                       specs=dict(self.specs), owners=dict(self.owners),
                       jobs=dict(self.jobs), running=dict(self.running),
                       vnpu_jobs=list(self.vnpu_jobs), cache=dict(self.cache))

    def cache_entries(self) -> list[dict[str, Any]]:
        """The cache section's entries, in the import's order (owner, rank)."""
        return [self.cache[key] for key in sorted(self.cache)]

    def data(self) -> dict[str, Any]:
        """The scenario as plain data, as the import writes it."""
        out: dict[str, Any] = {
            "now": self.now, "config": self.config, "nodes": list(self.nodes.values()),
            "affinity-cache": {"ttl-seconds": self.ttl, "entries": self.cache_entries()},
            "jobs": list(self.jobs.values()), "running": list(self.running.values())}
        if self.vnpu_jobs:
            out["vnpu-jobs"] = self.vnpu_jobs
        return out

    def scenario(self) -> Scenario:
        """The scenario of these pieces (the items validated one by one, the scenario's
        own rules not run again: they held for the import)."""
        return Scenario.model_construct(
            now=self.now, config=Config.model_validate(self.config),
            nodes=list(self.models.values()),
            jobs=[Job.model_validate(j) for j in self.jobs.values()],
            running=[RunningJob.model_validate(r) for r in self.running.values()],
            vnpu_jobs=[VnpuJob.model_validate(v) for v in self.vnpu_jobs],
            affinity_cache=self.cache_model())

    def cache_model(self) -> AffinityCacheModel:
        """The cache section as its model."""
        return AffinityCacheModel.model_construct(
            ttl_seconds=self.ttl,
            entries=[CacheEntry.model_validate(e) for e in self.cache_entries()])


@dataclass
class Changes:
    """What :func:`advance` changed: the scenario items to send again."""

    now_moved: bool = False
    nodes: list[str] = field(default_factory=list)
    jobs: set[str] = field(default_factory=set)
    running: set[str] = field(default_factory=set)
    #: the cache owners whose entries changed (each sent with all of its entries)
    cache_owners: set[str] = field(default_factory=set)

    @property
    def cache(self) -> bool:
        """Whether a cache entry changed."""
        return bool(self.cache_owners)

    def __bool__(self) -> bool:
        return bool(self.now_moved or self.nodes or self.jobs or self.running or self.cache)


@dataclass
class HeldObjects:
    """The records of the held objects, and the indexes :func:`advance` reads.

    ``source`` holds the records (``nodes`` by name, ``pods`` by (namespace, name),
    ``podgroups`` by job id) and the device records, classes and reschedule records;
    ``groups`` job id -> its pods' keys, ``pods_on`` node -> the keys of pods bound there.
    """

    source: ClusterImport
    groups: Mapping[str, Collection[tuple[str, str]]]
    pods_on: Mapping[str, Collection[tuple[str, str]]]


def _usage(held: HeldObjects, node: str) -> NodeUsage:
    """What the active pods bound to ``node`` hold (as the import sums it)."""
    usage = NodeUsage()
    pods = held.source.pods
    for key in held.pods_on.get(node, ()):
        pod = pods[key]
        if pod.active:
            usage.chips.update(pod.chips)
            usage.requested += pod.request
    return usage


def _spec(held: HeldObjects, job_id: str, sizes: dict[str, float],
          diag: Diagnostics) -> JobSpec | None:
    """The job's spec from its held pods and PodGroup (``None``: not imported)."""
    source = held.source
    pods: list[PodRecord] = [source.pods[k] for k in sorted(held.groups.get(job_id, ()))]
    if any(p.npu_core > 0 and p.resource is None for p in pods):
        raise NeedsWhole(f"job {job_id} is a dynamic vNPU job")
    podgroup = source.podgroups.get(job_id)
    if not pods and podgroup is None:
        return None
    group = JobGroup(job_id, podgroup)
    group.pods.extend(pods)
    spec = job_spec(group, source.classes, diag)
    if spec is None or spec.rank_problem:
        return None  # not imported (a rank problem: left to Volcano)
    set_image_size(spec, sizes)
    return spec


def _in_order(old: Mapping[str, dict[str, Any]], items: dict[str, dict[str, Any]],
              again: set[str], key: Callable[[str], Any]) -> dict[str, dict[str, Any]]:
    """``items`` in the order of ``key``, given that ``old`` is in that order and only
    the items named in ``again`` may have moved."""
    order = [n for n in old if n in items and n not in again]
    for name in sorted(n for n in again if n in items):
        bisect.insort(order, name, key=key)
    return {name: items[name] for name in order}


def advance(pieces: ImportPieces, held: HeldObjects, dirty_nodes: Iterable[str],
            dirty_jobs: Iterable[str], noted: Mapping[CacheKey, tuple[str, int] | None],
            now: int) -> tuple[ImportPieces, Changes]:
    """The import of the held objects at ``now``, from ``pieces`` (the last import) and
    what changed since: the nodes and jobs whose objects changed and the cache changes
    noted at the event boundaries between (``(node, time)`` bound then; ``None``: its
    node left the import).  ``pieces`` is not changed.

    Raises
    ------
    NeedsWhole
        When the change needs a whole import (see the module's docstring).
    """
    if pieces.whole_only:
        raise NeedsWhole("dynamic vNPU nodes or jobs")
    source = held.source
    diag = Diagnostics()
    new = pieces.copy()
    new.now = now
    changes = Changes(now_moved=now != pieces.now)
    jobs_again = set(dirty_jobs)

    # nodes: each dirty node's item again
    sick: set[str] = set()
    for name in sorted(set(dirty_nodes), key=natural_key):
        record = source.nodes.get(name)
        if record is not None and record.resource is None and record.npu_core > 0:
            raise NeedsWhole(f"node {name} is a dynamic vNPU node")
        imported = record is not None and record.resource is not None
        if imported != (name in pieces.nodes):
            raise NeedsWhole(f"node {name} joins or leaves the import")
        if record is None or not imported:
            continue
        item, state, bad = source.npu_node(record, pieces.mode, _usage(held, name),
                                           pieces.self_maintain, now, diag)
        model = _validated(Node, item, record.obj, _NODE_FIELDS, diag)
        if model is None or diag.errors:
            raise NeedsWhole(f"node {name} does not import alone")
        if item.get("images") != pieces.nodes[name].get("images"):
            raise NeedsWhole(f"node {name}'s images changed (the jobs' image sizes)")
        if model != pieces.models[name]:
            changes.nodes.append(name)
        new.nodes[name], new.models[name], new.bad_chips[name] = item, model, bad
        if state is not new.health[name]:
            new.health[name] = state
            sick.add(name)
    if sick:  # the jobs that read the health of those nodes
        for name in sick:
            for key in held.pods_on.get(name, ()):
                pod = source.pods[key]
                if pod.group is not None:
                    jobs_again.add(f"{pod.namespace}/{pod.group}")
        for (owner, _), entry in pieces.cache.items():
            if entry["node"] in sick:
                jobs_again.update(pieces.owners.get(owner, ()))

    # specs of the jobs whose objects changed
    owners: set[str] = set()
    for job_id in sorted(set(dirty_jobs), key=natural_key):
        old = pieces.specs.get(job_id)
        spec = _spec(held, job_id, pieces.image_sizes, diag)
        if diag.errors:
            raise NeedsWhole(f"job {job_id} does not import alone")
        if old is not None and old.owner is not None:
            owners.add(old.owner)
            new.owners[old.owner] = new.owners[old.owner] - {job_id}
            if not new.owners[old.owner]:
                del new.owners[old.owner]
        if spec is None:
            new.specs.pop(job_id, None)
            continue
        new.specs[job_id] = spec
        if spec.owner is not None:
            owners.add(spec.owner)
            new.owners[spec.owner] = new.owners.get(spec.owner, set()) | {job_id}

    # the cache: the noted changes (the chain's --previous), then the owners' entries
    cache = new.cache
    before = {key: cache.get(key) for key in noted}
    for slot, value in noted.items():
        owners.add(slot[0])
        if value is None or value[0] not in new.health:
            cache.pop(slot, None)
        else:
            cache[slot] = {"owner-uid": slot[0], "rank": slot[1], "node": value[0],
                           "updated": value[1]}
    changes.cache_owners.update(slot[0] for slot, was in before.items()
                                if cache.get(slot) != was)
    # a moved now re-stamps only the owners whose bound_stamp moved with it (once a
    # grain each, spread over the grain by the owners' phases); the others' entries are
    # those the last import wrote at the same stamp
    stamped = owners | ({owner for owner in new.owners
                         if bound_stamp(owner, now) != bound_stamp(owner, pieces.now)}
                        if changes.now_moved else set())
    for owner in sorted(stamped):
        for job_id in sorted(new.owners.get(owner, ()), key=natural_key):
            for slot, entry in source.spec_entries(new.specs[job_id], new.health.keys(),
                                                   now, diag).items():
                if cache.get(slot) != entry:
                    cache[slot] = entry
                    changes.cache_owners.add(slot[0])
    for owner in owners:
        jobs_again.update(new.owners.get(owner, ()))

    # the items of every job whose spec, cache entries or nodes' health changed
    for job_id in sorted(jobs_again, key=natural_key):
        spec = new.specs.get(job_id)
        section, job = (source.job_item(spec, new.health.keys(), new.health, new.bad_chips,
                                         cache, now, pieces.base, diag)
                         if spec is not None else ("", None))
        if diag.errors:
            raise NeedsWhole(f"job {job_id} does not import alone")
        for name, items, changed in (("jobs", new.jobs, changes.jobs),
                                     ("running", new.running, changes.running)):
            was = items.get(job_id)
            if section == name and job is not None:
                if was != job:
                    items[job_id] = job
                    changed.add(job_id)
            elif was is not None:
                del items[job_id]
                changed.add(job_id)
    # the import's order (the delta keeps the stored one equal to it): the items not
    # computed again keep their places, the others are inserted by the import's key
    if changes.jobs:
        new.jobs = _in_order(pieces.jobs, new.jobs, jobs_again,
                             lambda n: queue_key(new.specs[n]))
    if changes.running:
        new.running = _in_order(pieces.running, new.running, jobs_again, natural_key)
    return new, changes
