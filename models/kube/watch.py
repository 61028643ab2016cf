"""The live watcher: list, then watch, the objects the importer reads, and keep them.

The same list calls as ``import --kubeconfig`` (:func:`models.kube.live.list_calls`), each
followed by a watch from the list's ``resourceVersion``, with the official ``kubernetes``
client and the API server's watch contract:

* every event moves the stream's ``resourceVersion``; ``allowWatchBookmarks`` lets the API
  server move it without an object change, so a reconnect resumes where the stream was;
* a dropped connection, or a stream the API server ends (``timeoutSeconds``), is resumed
  from that version after a jittered backoff (doubling from :attr:`WatchSettings.backoff`
  to :attr:`WatchSettings.backoff_max`; reset by the next event);
* a watch that stays quiet (no event, no bookmark) for :attr:`WatchSettings.quiet_seconds`
  is restarted: the client's read timeout ends it;
* ``410 Gone`` (the version was compacted away, or a ``continue`` token expired) means a
  fresh list: the stream's objects are replaced by the list's, and the next build shows the
  differences;
* ``managedFields``, ``kubectl``'s last-applied annotation and the subtrees the importer
  never reads are dropped on arrival, and Pods that neither request NPUs nor belong to a
  Volcano group are not kept at all: memory follows the cluster's NPU objects, not the
  event rate (an event replaces the object it changes).

:class:`WatchedCluster` keeps the importer's records of the bulky kinds (Nodes, Pods,
PodGroups: parsed once per change; of the objects themselves only their name, uid and
``resourceVersion``) and the ConfigMaps and PriorityClasses, and imports the objects at a
moment exactly as ``import`` would from them, with ``--previous`` the import before
(:meth:`WatchedCluster.advance`).  It notes which nodes and jobs each event touches, so
that the next import computes only those (:func:`models.kube.incremental.advance`); a
change it cannot import alone is a whole import.  A fresh list (the first, or after 410)
is compared with the held objects by ``resourceVersion`` and uid first: an unchanged
object costs a comparison.  Between two imports it notes, per Pod event, the ranks that
the Pod's job has bound at that event: the import chain at every event boundary records
those in its cache even when the Pod is gone by the next import.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from models.kube.build import FAULT_NPU_CM, ClusterImport, ImportResult
from models.kube.config import is_scheduler_configmap
from models.kube.incremental import (
    CacheKey,
    Changes,
    HeldObjects,
    ImportPieces,
    NeedsWhole,
    advance,
)
from models.kube.jobs import (
    RESCHEDULE_CM,
    JobGroup,
    PodRecord,
    bound_stamp,
    job_spec,
)
from models.kube.live import ListCall
from models.kube.nodes import DeviceState
from models.kube.objects import identity as _identity
from models.kube.objects import object_key as _key
from models.kube.objects import same_object as _same
from models.kube.objects import strip_object as strip_object
from models.kube.objects import stub as _stub
from models.kube.objects import version_of as version_of
from models.kube.objects import wanted as wanted
from models.kube.pages import Identity
from models.kube.source import Diagnostics, describe
from models.scenario import AffinityCacheModel, CacheEntry, Scenario

log = logging.getLogger("npu_place.watch")

#: Kinds whose importer records are kept per object (the bulky ones).
RECORD_KINDS = ("Node", "Pod", "PodGroup")


@dataclass(frozen=True)
class WatchSettings:
    """How the streams list and watch.

    Parameters
    ----------
    page_size
        Objects per list page (``limit``).
    watch_seconds
        ``timeoutSeconds`` asked of the API server per watch (then resumed).
    quiet_seconds
        A watch without any line (event or bookmark) for this long is restarted.
    connect_seconds
        Connect timeout of every request.
    backoff, backoff_max
        First and largest wait before a reconnect (jittered: 50-100 % of it).
    """

    page_size: int = 500
    watch_seconds: int = 300
    quiet_seconds: float = 90.0
    connect_seconds: float = 10.0
    backoff: float = 0.2
    backoff_max: float = 30.0


class Gone(Exception):
    """The API server answered 410: the version or continue token is too old."""


@dataclass
class StreamState:
    """What one stream has seen: its objects (stripped) and its version."""

    call: ListCall
    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: (uid, resourceVersion) of the listed or watched objects that are not kept (Pods
    #: that are not NPU pods), so that a fresh list skips them unread when unchanged
    skipped: dict[tuple[str, str], tuple[Any, Any]] = field(default_factory=dict)
    version: str | None = None
    lists: int = 0
    watches: int = 0
    gone: int = 0
    reconnects: int = 0
    events: int = 0
    bookmarks: int = 0


def _device_part(obj: dict[str, Any]) -> DeviceState | None:
    """The records of a device-info, NodeD or switch ConfigMap read alone; ``None`` when
    ``obj`` is another object, or when it does not read without errors (the whole
    import reads it then, and reports them)."""
    if obj.get("kind") != "ConfigMap" or is_scheduler_configmap(obj):
        return None
    name = (obj.get("metadata") or {}).get("name")
    if name in (RESCHEDULE_CM, FAULT_NPU_CM):
        return None
    part = DeviceState()
    diag = Diagnostics()
    if not part.add_configmap(obj, diag) or diag.errors:
        return None
    return part


@dataclass
class Advance:
    """One step of the import chain: from the import ``old`` (``None``: none yet) to
    ``new``.  ``changes`` says what differs when it was computed per object
    (:func:`models.kube.incremental.advance`); ``result`` is the whole import when it was
    not.  :meth:`WatchedCluster.commit` makes ``new`` the base of the next step."""

    old: ImportPieces | None
    new: ImportPieces
    changes: Changes | None
    result: ImportResult | None
    noted: dict[CacheKey, tuple[str, int] | None]

    def data(self) -> dict[str, Any]:
        """The new import's scenario as plain data."""
        return self.result.data if self.result is not None else self.new.data()


class WatchedCluster:
    """The objects of every stream and the importer's records, imported into a scenario.

    Thread-safe: the streams call :meth:`replace` and :meth:`event`; :meth:`advance` reads
    under the same lock, so an import sees the objects at one event boundary.

    Parameters
    ----------
    calls
        The list calls (one stream each), in the order ``import`` lists them.
    clock
        Unix seconds: the ``now`` of each import and of the ranks noted bound between
        imports (stamped as an import then stamps them:
        :func:`~models.kube.jobs.bound_stamp`).
    previous
        The scenario the first import takes as ``--previous`` (``None``: none).
    on_change
        Called (without the lock) after every change: the coalescer's wake-up.
    """

    def __init__(self, calls: list[ListCall], clock: Callable[[], float] = time.time,
                 previous: Scenario | None = None,
                 on_change: Callable[[], None] | None = None) -> None:
        self.streams = [StreamState(call) for call in calls]
        self.clock = clock
        self.on_change = on_change
        self._lock = threading.Lock()
        #: the records of the Nodes (by name), Pods (by namespace, name) and PodGroups
        #: (by job id), as the importer keeps them
        self._source = ClusterImport(Diagnostics())
        self._owners_of: dict[tuple[str, str, str], int] = {}  # kind, key -> its stream
        self._groups: dict[str, set[tuple[str, str]]] = {}  # job id -> pod keys
        self._pods_on: dict[str, set[tuple[str, str]]] = {}  # node -> pod keys bound there
        #: cache changes of the event boundaries since the last import: (owner, rank) ->
        #: (node, time) bound then, or ``None``: dropped with its node
        self._noted: dict[CacheKey, tuple[str, int] | None] = {}
        #: what changed since the last import: nodes, jobs, or anything (a whole import)
        self._dirty_nodes: set[str] = set()
        self._dirty_jobs: set[str] = set()
        self._whole = True
        self.previous = previous
        #: the last import sent (:meth:`commit`)
        self.pieces: ImportPieces | None = None
        self.refused: dict[str, list[str]] = {}  # object -> its errors (not kept)
        self.changes = 0
        self.builds = 0
        self.whole_builds = 0
        #: why the last whole import was one
        self.whole_reason = "first import"
        #: the importer of the ConfigMaps and PriorityClasses (``None``: one changed)
        self._static: ClusterImport | None = None
        #: each device record ConfigMap's records (stream, key) -> its own parse
        self._device_parts: dict[tuple[int, tuple[str, str]], DeviceState] = {}
        #: while a fresh list is taken: the jobs whose bound ranks to note after it
        self._later: set[str] | None = None

    # ------------------------------------------------------------------ intake
    def replace(self, index: int, objects: list[dict[str, Any]]) -> None:
        """A fresh list of stream ``index``: its objects become exactly ``objects``.

        Objects held with the same uid and ``resourceVersion`` are kept as they are.
        """
        kept: set[tuple[str, str]] = set()
        self.relisted(index, kept, self.split_page(index, objects, kept))

    def split_page(self, index: int, items: list[Any], kept: set[tuple[str, str]]
                   ) -> list[dict[str, Any]]:
        """One parsed page of a fresh list of stream ``index``: the keys of the objects
        the stream holds unchanged are added to ``kept`` (:meth:`changed_positions`); the
        other objects are returned (new or changed; items that are not objects are left
        out)."""
        listed: list[Identity | None] = []
        for item in items:
            meta = item.get("metadata") if isinstance(item, dict) else None
            listed.append(((str(meta.get("namespace") or ""), str(meta.get("name") or "")),
                           meta.get("uid"), meta.get("resourceVersion"))
                          if isinstance(meta, dict) else None)
        return [item for at in self.changed_positions(index, listed, kept)
                if isinstance(item := items[at], dict)]

    def changed_positions(self, index: int, listed: list[Identity | None],
                          kept: set[tuple[str, str]]) -> list[int]:
        """One page of a fresh list of stream ``index``, by the identity of each item
        (key, uid, resourceVersion; ``None``: unreadable): the keys of the objects the
        stream holds unchanged (the same uid and ``resourceVersion``: the same object,
        kept as it was), or skipped unchanged (:attr:`StreamState.skipped`: still not
        kept), are added to ``kept``; the positions of the others (new or changed) are
        returned.

        Called by the stream's own thread while it lists, without the lock: only that
        thread changes the stream's objects.  The comparison of :func:`_same`, inlined:
        a page is hundreds of objects and a list of 65,536 nodes hundreds of pages."""
        held = self.streams[index].objects
        skipped = self.streams[index].skipped
        changed: list[int] = []
        for at, identity in enumerate(listed):
            if identity is not None:
                key, uid, version = identity
                was = held.get(key)
                if was is not None and version:
                    old = was.get("metadata") or {}
                    if old.get("resourceVersion") == version and old.get("uid") == uid:
                        kept.add(key)
                        continue
                elif was is None and version and skipped.get(key) == (uid, version):
                    kept.add(key)
                    continue
            changed.append(at)
        return changed

    def relisted(self, index: int, kept: set[tuple[str, str]],
                 changed: list[dict[str, Any]]) -> None:
        """A fresh list of stream ``index``, compared page by page as it was read: the
        keys of the objects found held unchanged (:meth:`split_page`) and the others
        (stripped; those :func:`wanted` drops are left out).  The stream's objects become
        those: the held ones not listed are forgotten, the changed ones taken.

        The list is one event boundary: the ranks its pods' jobs have bound are noted
        once, after every object is taken (a job's pods taken one by one are not
        boundaries)."""
        changed_any = False
        with self._lock:
            stream = self.streams[index]
            fresh: dict[tuple[str, str], dict[str, Any]] = {}
            skipped = {key: same for key, same in stream.skipped.items() if key in kept}
            for obj in changed:
                key = _key(obj)
                if wanted(obj):
                    fresh[key] = obj
                    skipped.pop(key, None)
                else:
                    skipped[key] = _identity(obj)
            stream.skipped = skipped
            gone = sorted(k for k in stream.objects.keys() - kept if k not in fresh)
            self._later = set()
            try:
                for key in gone:
                    self._forget(index, stream.objects.pop(key))
                    self._device_parts.pop((index, key), None)
                    changed_any = True
                for key, obj in fresh.items():
                    if _same(stream.objects.get(key), obj):
                        continue
                    self._take(index, key, obj)
                    if stream.call.kind not in RECORD_KINDS:
                        self._device_parts.pop((index, key), None)
                    changed_any = True
                later, self._later = self._later, None
            except BaseException:
                self._later = None
                raise
            for job_id in sorted(later):
                self._note_bound(job_id)
            if changed_any and stream.call.kind not in RECORD_KINDS:
                self._static_changed()
            self.changes += 1
        if changed_any and self.on_change is not None:
            self.on_change()

    def event(self, index: int, kind: str, obj: dict[str, Any]) -> None:
        """One watch event (``ADDED``, ``MODIFIED``, ``DELETED``) of stream ``index``."""
        with self._lock:
            stream = self.streams[index]
            key = _key(obj)
            if kind == "DELETED" or not wanted(obj):
                if kind == "DELETED":
                    stream.skipped.pop(key, None)
                else:
                    stream.skipped[key] = _identity(obj)
                old = stream.objects.pop(key, None)
                if old is not None:
                    self._forget(index, old)
            else:
                stream.skipped.pop(key, None)
                self._take(index, key, obj)
            if stream.call.kind not in RECORD_KINDS:
                self._config_changed(index, key, None if kind == "DELETED" else obj)
            self.changes += 1
        if self.on_change is not None:
            self.on_change()

    def _config_changed(self, index: int, key: tuple[str, str],
                        obj: dict[str, Any] | None) -> None:
        """A ConfigMap or PriorityClass changed (``obj`` ``None``: deleted).  A device
        record ConfigMap (device info, NodeD, switch) changes the nodes it describes
        (before and after) alone, unless it adds or removes a mode's records (which
        may switch the import's mode); any other is read again in a whole import."""
        was = self._device_parts.pop((index, key), None)
        part = _device_part(obj) if obj is not None else None
        if part is not None:
            self._device_parts[(index, key)] = part
        self._static = None
        if (obj is not None and part is None) or (was is None and part is None):
            self._static_changed()  # not a device record ConfigMap
            return
        if part is None or was is None or any(
                part.has_mode(m) != was.has_mode(m) for m in ("device-plugin", "clusterd")):
            self._static_changed()
            self.whole_reason = "a device record ConfigMap appeared, left or moved mode"
            return
        for state in (was, part):
            for tables in (state.devices, state.noded, state.switches):
                for names in tables.values():
                    self._dirty_nodes.update(names)

    def _static_changed(self) -> None:
        """A ConfigMap or PriorityClass changed: read again, and a whole import."""
        self._static = None
        self._whole = True
        self.whole_reason = "a ConfigMap or PriorityClass changed"

    def _take(self, index: int, key: tuple[str, str], obj: dict[str, Any]) -> None:
        """Hold ``obj`` (its record and stub for the bulky kinds, else itself)."""
        stream = self.streams[index]
        if str(obj.get("kind")) in RECORD_KINDS:
            stream.objects[key] = _stub(obj)
            self._remember(index, obj)
        else:
            stream.objects[key] = obj

    def _remember(self, index: int, obj: dict[str, Any]) -> None:
        kind = str(obj.get("kind"))
        probe = ClusterImport(Diagnostics())
        probe.add(obj, f"watch of {self.streams[index].call.what}")
        who = describe(obj, kind)
        if probe.diag.errors:
            if who not in self.refused:
                log.warning("watch: %s refused: %s", who, "; ".join(probe.diag.errors[:3]))
            self.refused[who] = list(probe.diag.errors)
            self._forget(index, obj)
            return
        self.refused.pop(who, None)
        key = _key(obj)
        source = self._source
        if kind == "Node":
            node = next(iter(probe.nodes.values()), None)
            if node is None:
                return
            old_node = source.nodes.get(node.name)
            source.nodes[node.name] = node
            self._owners_of[(kind, "", node.name)] = index
            self._dirty_nodes.add(node.name)
            if node.resource is None and node.npu_core <= 0:
                self._note_dropped(node.name)  # not an NPU node (any more): not imported
            elif old_node is None or (old_node.resource is None and old_node.npu_core <= 0):
                # imported again: an import here records the ranks bound on it
                groups = {f"{p.namespace}/{p.group}" for k in self._pods_on.get(node.name, ())
                          if (p := source.pods[k]).group is not None}
                for job_id in sorted(groups):
                    self._note_bound_at_boundary(job_id)
        elif kind == "Pod":
            pod = next(iter(probe.pods.values()), None)
            if pod is None:
                return
            old = source.pods.get(key)
            if old is not None:
                self._unindex(key, old)
            if pod.group is not None:
                self._groups.setdefault(f"{pod.namespace}/{pod.group}", set()).add(key)
            if pod.node:
                self._pods_on.setdefault(pod.node, set()).add(key)
            source.pods[key] = pod
            self._owners_of[(kind, *key)] = index
            self._dirty_pod(pod)
            if pod.group is not None:
                self._note_bound_at_boundary(f"{pod.namespace}/{pod.group}")
        else:
            group = next(iter(probe.podgroups.values()), None)
            if group is None:
                return
            job_id = f"{group.namespace}/{group.name}"
            source.podgroups[job_id] = group
            self._owners_of[(kind, *key)] = index
            self._dirty_jobs.add(job_id)

    def _dirty_pod(self, pod: PodRecord) -> None:
        """A pod changed: its node's chips and its job."""
        if pod.node:
            self._dirty_nodes.add(pod.node)
        if pod.group is not None:
            self._dirty_jobs.add(f"{pod.namespace}/{pod.group}")

    def _forget(self, index: int, obj: dict[str, Any]) -> None:
        kind = str(obj.get("kind"))
        if kind not in RECORD_KINDS:
            return
        key = _key(obj)
        rkey = ("", key[1]) if kind == "Node" else key
        if self._owners_of.get((kind, *rkey)) != index:
            return
        self._owners_of.pop((kind, *rkey), None)
        source = self._source
        if kind == "Node":
            if source.nodes.pop(key[1], None) is not None:
                self._dirty_nodes.add(key[1])
            self._note_dropped(key[1])
        elif kind == "Pod":
            pod = source.pods.pop(key, None)
            if pod is not None:
                self._unindex(key, pod)
                self._dirty_pod(pod)
        else:
            job_id = f"{key[0] or 'default'}/{key[1]}"
            for job in (job_id, f"{key[0]}/{key[1]}"):
                if source.podgroups.pop(job, None) is not None:
                    self._dirty_jobs.add(job)

    def _unindex(self, key: tuple[str, str], pod: PodRecord) -> None:
        """Take a pod out of the group and node indexes (its node and job are dirty)."""
        self._dirty_pod(pod)
        if pod.group is not None:
            job_id = f"{pod.namespace}/{pod.group}"
            members = self._groups.get(job_id)
            if members is not None:
                members.discard(key)
                if not members:
                    del self._groups[job_id]
        if pod.node:
            bound = self._pods_on.get(pod.node)
            if bound is not None:
                bound.discard(key)
                if not bound:
                    del self._pods_on[pod.node]

    def _note_bound_at_boundary(self, job_id: str) -> None:
        """Note the ranks ``job_id`` has bound at this event, or, inside a fresh list,
        once the whole list is taken."""
        if self._later is not None:
            self._later.add(job_id)
        else:
            self._note_bound(job_id)

    def _note_bound(self, job_id: str) -> None:
        """Note the ranks ``job_id`` has bound now (the cache of an import at this event)."""
        source = self._source
        pods: list[PodRecord] = [source.pods[k] for k in sorted(self._groups.get(job_id, ()))]
        if any(p.npu_core > 0 and p.resource is None for p in pods):
            return  # dynamic vNPU jobs: their cache entries are written by the build
        if not any(p.node for p in pods):
            return
        diag = Diagnostics()
        group = JobGroup(job_id, source.podgroups.get(job_id))
        group.pods.extend(pods)
        try:
            spec = job_spec(group, self._static_import().classes, diag)
        except (ValueError, KeyError, TypeError):
            return
        if spec is None or spec.owner is None:
            return
        nodes = source.nodes
        stamp = bound_stamp(spec.owner, int(self.clock()))
        for rank, node in spec.bound.items():
            record = nodes.get(node)
            if record is not None and (record.resource is not None or record.npu_core > 0):
                self._noted[(spec.owner, rank)] = (node, stamp)

    def _note_dropped(self, node: str) -> None:
        """Note that ``node`` is not imported at this event: an import here drops the
        cache entries on it (those of the last import and those noted since)."""
        for owner, rank, on in self._base_entries():
            if on == node and (owner, rank) not in self._noted:
                self._noted[(owner, rank)] = None
        for key, value in self._noted.items():
            if value is not None and value[0] == node:
                self._noted[key] = None

    def _base_entries(self) -> Iterator[tuple[str, int, str]]:
        """(owner, rank, node) of the last import's cache entries (the next one's
        ``--previous``)."""
        if self.pieces is not None:
            for (owner, rank), entry in self.pieces.cache.items():
                yield owner, rank, entry["node"]
        elif self.previous is not None:
            for e in self.previous.affinity_cache.entries:
                yield e.owner_uid, e.rank, e.node

    # ------------------------------------------------------------------ import
    def advance(self, now: int | None = None) -> Advance:
        """The import of the objects now, with ``--previous`` the last committed import
        (and the ranks noted bound since): computed for the changed nodes and jobs alone
        when it can be (:func:`models.kube.incremental.advance`), else a whole import.
        Nothing is kept until :meth:`commit`.

        Raises
        ------
        models.validation.InputError
            When the objects do not make a valid scenario (the last import stays; the
            next advance is a whole import).
        """
        with self._lock:
            now = int(self.clock()) if now is None else now
            noted, self._noted = self._noted, {}
            nodes, self._dirty_nodes = self._dirty_nodes, set()
            jobs, self._dirty_jobs = self._dirty_jobs, set()
            whole, self._whole = self._whole, False
            base = self.pieces
            if base is not None and not whole:
                try:
                    new, changes = advance(base, self._held(), nodes, jobs, noted, now)
                except NeedsWhole as why:
                    self.whole_reason = str(why)
                else:
                    self.builds += 1
                    return Advance(base, new, changes, None, noted)
            importer = self._importer()
            previous = self._previous_with_noted(noted)
        try:
            result = importer.build(now=now, previous=previous)
        except Exception:
            self.abandon_noted(noted)
            raise
        self.builds += 1
        self.whole_builds += 1
        return Advance(base, ImportPieces.of(result), None, result, noted)

    def commit(self, step: Advance) -> None:
        """``step`` was stored: its import is the base of the next."""
        with self._lock:
            self.pieces = step.new

    def abandon(self, step: Advance) -> None:
        """``step`` was not stored: the next advance is a whole import from the last
        committed one, with the ranks ``step`` had noted."""
        self.abandon_noted(step.noted)

    def abandon_noted(self, noted: dict[CacheKey, tuple[str, int] | None]) -> None:
        """The noted ranks wait for the next import, which is a whole one."""
        with self._lock:
            self._noted = {**noted, **self._noted}
            self._whole = True
            self.whole_reason = "the last import was not stored"

    def build(self, now: int | None = None) -> ImportResult:
        """The whole import of the objects now (with ``--previous`` the last committed
        import), committed.

        Raises
        ------
        models.validation.InputError
            When the objects do not make a valid scenario.
        """
        with self._lock:
            self._whole = True
        step = self.advance(now)
        assert step.result is not None
        self.commit(step)
        return step.result

    def _held(self) -> HeldObjects:
        """The records and indexes an incremental import reads (under the lock)."""
        static = self._static_import()
        source = self._source
        source.devices, source.classes = static.devices, static.classes
        source.scheduler_cm, source.reschedule = static.scheduler_cm, static.reschedule
        return HeldObjects(source, self._groups, self._pods_on)

    def _importer(self) -> ClusterImport:
        """A whole importer of the held records (under the lock)."""
        source = self._source
        importer = ClusterImport(Diagnostics())
        importer.nodes = dict(source.nodes)
        importer.pods = {key: source.pods[key] for key in sorted(source.pods)}
        importer.podgroups = {key: source.podgroups[key] for key in sorted(
            source.podgroups, key=lambda k: tuple(k.split("/", 1)))}
        static = self._static_import()
        importer.devices, importer.classes = static.devices, static.classes
        importer.scheduler_cm, importer.reschedule = static.scheduler_cm, static.reschedule
        importer.diag.errors.extend(static.diag.errors)
        for text, objs in static.diag._warnings.items():
            importer.diag._warnings.setdefault(text, []).extend(objs)
        importer.objects = sum(len(stream.objects) for stream in self.streams)
        return importer

    def _static_import(self) -> ClusterImport:
        """The ConfigMaps and PriorityClasses added to an importer, in the order of the
        list calls; kept until one of them changes (device info is parsed once per
        change, not once per import)."""
        if self._static is None:
            static = ClusterImport(Diagnostics())
            for index, stream in enumerate(self.streams):
                if stream.call.kind in RECORD_KINDS:
                    continue
                for key, obj in sorted(stream.objects.items()):
                    part = self._device_parts.get((index, key))
                    if part is None and (part := _device_part(obj)) is not None:
                        self._device_parts[(index, key)] = part
                    if part is None:
                        static.add(obj, f"watch of {stream.call.what}")
                        continue
                    # a device record ConfigMap: its own parse, merged in the same order
                    static.objects += 1
                    for mode, infos in part.devices.items():
                        static.devices.devices[mode].update(infos)
                    for mode, health in part.noded.items():
                        static.devices.noded[mode].update(health)
                    for mode, health in part.switches.items():
                        static.devices.switches[mode].update(health)
            self._static = static
        return self._static

    def _previous_with_noted(self, noted: dict[CacheKey, tuple[str, int] | None]
                             ) -> Scenario | None:
        """The last import's cache with the ranks noted since written into it: the
        whole import's ``--previous``."""
        if self.pieces is not None:
            ttl: int | None = self.pieces.ttl
            entries = {key: CacheEntry.model_validate(e) for key, e in self.pieces.cache.items()}
        elif self.previous is not None:
            ttl = self.previous.affinity_cache.ttl_seconds
            entries = {(e.owner_uid, e.rank): e for e in self.previous.affinity_cache.entries}
        else:
            ttl, entries = None, {}
        if not noted and self.pieces is None:
            return self.previous
        for (owner, rank), value in noted.items():
            if value is None:
                entries.pop((owner, rank), None)
            else:
                entries[(owner, rank)] = CacheEntry(owner_uid=owner, rank=rank,
                                                    node=value[0], updated=value[1])
        cache = (AffinityCacheModel(ttl_seconds=ttl) if ttl is not None
                 else AffinityCacheModel())
        cache = cache.model_copy(update={"entries": [entries[k] for k in sorted(entries)]})
        return Scenario.model_construct(affinity_cache=cache)

    def counts(self) -> dict[str, Any]:
        """Objects kept, lists, watches, 410s, reconnects, events and bookmarks; imports
        (whole ones among them, and why the last was whole)."""
        with self._lock:
            return {"objects": sum(len(s.objects) for s in self.streams),
                    "lists": sum(s.lists for s in self.streams),
                    "watches": sum(s.watches for s in self.streams),
                    "gone": sum(s.gone for s in self.streams),
                    "reconnects": sum(s.reconnects for s in self.streams),
                    "events": sum(s.events for s in self.streams),
                    "bookmarks": sum(s.bookmarks for s in self.streams),
                    "refused": len(self.refused), "builds": self.builds,
                    "whole-builds": self.whole_builds, "whole-reason": self.whole_reason}
