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

:class:`WatchedCluster` keeps the objects and the importer's records of the bulky kinds
(Nodes, Pods, PodGroups: parsed once per change), and builds the scenario of the objects
at a moment (:meth:`WatchedCluster.build`) exactly as ``import`` would from them, with
``--previous`` the build before.  Between two builds it notes, per Pod event, the ranks
that the Pod's job has bound at that event: the import chain at every event boundary
records those in its cache even when the Pod is gone by the next build.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from models.kube.build import ClusterImport, ImportResult
from models.kube.jobs import GROUP_ANNOTATION, JobGroup, PodRecord, job_spec
from models.kube.live import ListCall
from models.kube.source import Diagnostics, describe
from models.scenario import AffinityCacheModel, CacheEntry, Scenario

log = logging.getLogger("npu_place.watch")

#: Annotation ``kubectl apply`` writes: a copy of the whole object, never read.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: Subtrees of each kind that the importer does not read (dropped on arrival).
UNUSED = {
    "Pod": (("spec", "volumes"), ("spec", "tolerations"), ("spec", "initContainers"),
            ("status", "containerStatuses"), ("status", "initContainerStatuses"),
            ("status", "conditions"), ("status", "podIPs")),
    "Node": (("status", "volumesAttached"), ("status", "volumesInUse"),
             ("status", "daemonEndpoints"), ("status", "nodeInfo"), ("status", "addresses")),
}
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


def strip_object(obj: dict[str, Any]) -> dict[str, Any]:
    """Drop what the importer never reads (in place); the object."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop(LAST_APPLIED, None)
    for path in UNUSED.get(str(obj.get("kind")), ()):
        parent = obj.get(path[0])
        if isinstance(parent, dict):
            parent.pop(path[1], None)
    return obj


def wanted(obj: dict[str, Any]) -> bool:
    """Whether the importer reads this object: every object but Pods that neither
    request a ``huawei.com/`` resource nor carry the Volcano group annotation."""
    if obj.get("kind") != "Pod":
        return True
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if isinstance(annotations, dict) and GROUP_ANNOTATION in annotations:
        return True
    spec = obj.get("spec") or {}
    containers = spec.get("containers") if isinstance(spec, dict) else None
    for container in containers if isinstance(containers, list) else ():
        resources = container.get("resources") if isinstance(container, dict) else None
        if not isinstance(resources, dict):
            continue
        for section in ("requests", "limits"):
            values = resources.get(section)
            if isinstance(values, dict) and any(str(k).startswith("huawei.com/")
                                                for k in values):
                return True
    return False


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _version(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata") or {}
    value = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return str(value) if value else None


@dataclass
class StreamState:
    """What one stream has seen: its objects (stripped) and its version."""

    call: ListCall
    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    version: str | None = None
    lists: int = 0
    watches: int = 0
    gone: int = 0
    reconnects: int = 0
    events: int = 0
    bookmarks: int = 0


class WatchedCluster:
    """The objects of every stream and the importer's records, built into a scenario.

    Thread-safe: the streams call :meth:`replace` and :meth:`event`; :meth:`build` reads
    under the same lock, so a build sees the objects at one event boundary.

    Parameters
    ----------
    calls
        The list calls (one stream each), in the order ``import`` lists them.
    clock
        Unix seconds: the ``now`` of each build and the time of the ranks noted between
        builds.
    previous
        The scenario the first build takes as ``--previous`` (``None``: none).
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
        self._records: dict[str, dict[tuple[str, str], Any]] = {k: {} for k in RECORD_KINDS}
        self._owners_of: dict[tuple[str, str, str], int] = {}  # kind, key -> its stream
        self._groups: dict[str, set[tuple[str, str]]] = {}  # job id -> pod keys
        self._pods_on: dict[str, set[tuple[str, str]]] = {}  # node -> pod keys bound there
        #: cache changes of the event boundaries since the last build: (owner, rank) ->
        #: (node, time) bound then, or ``None``: dropped with its node
        self._noted: dict[tuple[str, int], tuple[str, int] | None] = {}
        self.previous = previous
        self.last: ImportResult | None = None
        self.refused: dict[str, list[str]] = {}  # object -> its errors (not kept)
        self.changes = 0
        self.builds = 0
        #: the importer of the ConfigMaps and PriorityClasses (``None``: one changed)
        self._static: ClusterImport | None = None

    # ------------------------------------------------------------------ intake
    def replace(self, index: int, objects: list[dict[str, Any]]) -> None:
        """A fresh list of stream ``index``: its objects become exactly ``objects``."""
        with self._lock:
            stream = self.streams[index]
            if stream.call.kind not in RECORD_KINDS:
                self._static = None
            fresh = {_key(o): o for o in objects if wanted(o)}
            for key in [k for k in stream.objects if k not in fresh]:
                self._forget(index, stream.objects.pop(key))
            for key, obj in fresh.items():
                if stream.objects.get(key) is not obj:
                    stream.objects[key] = obj
                    self._remember(index, obj)
            self.changes += 1
        if self.on_change is not None:
            self.on_change()

    def event(self, index: int, kind: str, obj: dict[str, Any]) -> None:
        """One watch event (``ADDED``, ``MODIFIED``, ``DELETED``) of stream ``index``."""
        with self._lock:
            stream = self.streams[index]
            if stream.call.kind not in RECORD_KINDS:
                self._static = None
            key = _key(obj)
            if kind == "DELETED" or not wanted(obj):
                old = stream.objects.pop(key, None)
                if old is not None:
                    self._forget(index, old)
            else:
                stream.objects[key] = obj
                self._remember(index, obj)
            self.changes += 1
        if self.on_change is not None:
            self.on_change()

    def _remember(self, index: int, obj: dict[str, Any]) -> None:
        kind = str(obj.get("kind"))
        if kind not in RECORD_KINDS:
            return
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
        records = self._records[kind]
        if kind == "Node":
            record: Any = next(iter(probe.nodes.values()), None)
            rkey = ("", key[1])
        elif kind == "Pod":
            record = next(iter(probe.pods.values()), None)
            rkey = key
        else:
            record = next(iter(probe.podgroups.values()), None)
            rkey = key
        if record is None:
            return
        old = records.get(rkey)
        if kind == "Pod":
            if old is not None:
                self._unindex(rkey, old)
            if record.group is not None:
                self._groups.setdefault(f"{record.namespace}/{record.group}", set()).add(rkey)
            if record.node:
                self._pods_on.setdefault(record.node, set()).add(rkey)
        records[rkey] = record
        self._owners_of[(kind, *rkey)] = index
        if kind == "Pod" and record.group is not None:
            self._note_bound(f"{record.namespace}/{record.group}")
        elif kind == "Node" and record.resource is None and record.npu_core <= 0:
            self._note_dropped(record.name)  # not an NPU node (any more): not imported
        elif kind == "Node" and (old is None or (old.resource is None and old.npu_core <= 0)):
            # imported again: an import here records the ranks bound on it
            groups = {f"{p.namespace}/{p.group}" for k in self._pods_on.get(record.name, ())
                      if (p := self._records["Pod"][k]).group is not None}
            for job_id in sorted(groups):
                self._note_bound(job_id)

    def _forget(self, index: int, obj: dict[str, Any]) -> None:
        kind = str(obj.get("kind"))
        if kind not in RECORD_KINDS:
            return
        key = _key(obj)
        rkey = ("", key[1]) if kind == "Node" else key
        if self._owners_of.get((kind, *rkey)) != index:
            return
        self._owners_of.pop((kind, *rkey), None)
        record = self._records[kind].pop(rkey, None)
        if kind == "Node":
            self._note_dropped(key[1])
        if kind == "Pod" and record is not None:
            self._unindex(rkey, record)

    def _unindex(self, key: tuple[str, str], pod: PodRecord) -> None:
        """Take a pod out of the group and node indexes."""
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

    def _note_bound(self, job_id: str) -> None:
        """Note the ranks ``job_id`` has bound now (the cache of an import at this event)."""
        pods: list[PodRecord] = [self._records["Pod"][k]
                                 for k in sorted(self._groups.get(job_id, ()))]
        if any(p.npu_core > 0 and p.resource is None for p in pods):
            return  # dynamic vNPU jobs: their cache entries are written by the build
        if not any(p.node for p in pods):
            return
        diag = Diagnostics()
        namespace, _, name = job_id.partition("/")
        group = JobGroup(job_id, self._records["PodGroup"].get((namespace, name)))
        group.pods.extend(pods)
        try:
            spec = job_spec(group, self._static_import().classes, diag)
        except (ValueError, KeyError, TypeError):
            return
        if spec is None or spec.owner is None:
            return
        nodes = self._records["Node"]
        stamp = int(self.clock())
        for rank, node in spec.bound.items():
            record = nodes.get(("", node))
            if record is not None and (record.resource is not None or record.npu_core > 0):
                self._noted[(spec.owner, rank)] = (node, stamp)

    def _note_dropped(self, node: str) -> None:
        """Note that ``node`` is not imported at this event: an import here drops the
        cache entries on it (those of the last build and those noted since)."""
        base = self.previous.affinity_cache.entries if self.previous is not None else []
        for entry in base:
            if entry.node == node and (entry.owner_uid, entry.rank) not in self._noted:
                self._noted[(entry.owner_uid, entry.rank)] = None
        for key, value in self._noted.items():
            if value is not None and value[0] == node:
                self._noted[key] = None

    # ------------------------------------------------------------------ build
    def build(self, now: int | None = None) -> ImportResult:
        """The scenario of the objects now, imported with ``--previous`` the last build
        (and the ranks noted bound since).

        Raises
        ------
        models.validation.InputError
            When the objects do not make a valid scenario (the last build stays).
        """
        with self._lock:
            now = int(self.clock()) if now is None else now
            importer = ClusterImport(Diagnostics())
            importer.nodes = {key[1]: record for key, record in
                              self._records["Node"].items()}
            importer.pods = {key: self._records["Pod"][key]
                             for key in sorted(self._records["Pod"])}
            importer.podgroups = {f"{key[0]}/{key[1]}": self._records["PodGroup"][key]
                                  for key in sorted(self._records["PodGroup"])}
            static = self._static_import()
            importer.devices, importer.classes = static.devices, static.classes
            importer.scheduler_cm, importer.reschedule = static.scheduler_cm, static.reschedule
            importer.diag.errors.extend(static.diag.errors)
            for text, objs in static.diag._warnings.items():
                importer.diag._warnings.setdefault(text, []).extend(objs)
            importer.objects = sum(len(stream.objects) for stream in self.streams)
            previous = self._previous_with_noted()
            noted = self._noted
            self._noted = {}
        try:
            result = importer.build(now=now, previous=previous)
        except Exception:
            with self._lock:  # the noted ranks wait for the next build
                self._noted = {**noted, **self._noted}
            raise
        self.previous = result.scenario
        self.last = result
        self.builds += 1
        return result

    def _static_import(self) -> ClusterImport:
        """The ConfigMaps and PriorityClasses added to an importer, in the order of the
        list calls; kept until one of them changes (device info is parsed once per
        change, not once per build)."""
        if self._static is None:
            static = ClusterImport(Diagnostics())
            for stream in self.streams:
                if stream.call.kind in RECORD_KINDS:
                    continue
                for _, obj in sorted(stream.objects.items()):
                    static.add(obj, f"watch of {stream.call.what}")
            self._static = static
        return self._static

    def _previous_with_noted(self) -> Scenario | None:
        """The last build's scenario with the ranks noted since written into its cache."""
        base = self.previous
        if not self._noted:
            return base
        ttl = base.affinity_cache.ttl_seconds if base is not None else None
        entries = {(e.owner_uid, e.rank): e for e in
                   (base.affinity_cache.entries if base is not None else [])}
        for (owner, rank), noted in self._noted.items():
            if noted is None:
                entries.pop((owner, rank), None)
            else:
                entries[(owner, rank)] = CacheEntry(owner_uid=owner, rank=rank,
                                                    node=noted[0], updated=noted[1])
        cache = (AffinityCacheModel(ttl_seconds=ttl) if ttl is not None
                 else AffinityCacheModel())
        cache = cache.model_copy(update={"entries": [entries[k] for k in sorted(entries)]})
        if base is None:
            return Scenario.model_construct(affinity_cache=cache)
        return base.model_copy(update={"affinity_cache": cache})

    def counts(self) -> dict[str, int]:
        """Objects kept, lists, watches, 410s, reconnects, events and bookmarks."""
        with self._lock:
            return {"objects": sum(len(s.objects) for s in self.streams),
                    "lists": sum(s.lists for s in self.streams),
                    "watches": sum(s.watches for s in self.streams),
                    "gone": sum(s.gone for s in self.streams),
                    "reconnects": sum(s.reconnects for s in self.streams),
                    "events": sum(s.events for s in self.streams),
                    "bookmarks": sum(s.bookmarks for s in self.streams),
                    "refused": len(self.refused), "builds": self.builds}


def _lines(response: Any) -> Iterator[bytes]:
    """The lines of a chunked watch answer, as they arrive."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=False):
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if line.strip():
                yield line
    if pending.strip():
        yield pending


class ResourceStream:
    """List then watch one resource into a :class:`WatchedCluster`, until stopped.

    Parameters
    ----------
    cluster
        Where the objects go.
    index
        The stream's index in ``cluster.streams``.
    settings
        Paging, timeouts and backoff.
    stop
        Set to end the stream (its open watch ends at the next line or read timeout).
    """

    def __init__(self, cluster: WatchedCluster, index: int, settings: WatchSettings,
                 stop: threading.Event) -> None:
        self.cluster = cluster
        self.index = index
        self.state = cluster.streams[index]
        self.settings = settings
        self.stop = stop
        self.synced = threading.Event()  # set after the first list
        self.response: Any = None
        self.last_error: str | None = None

    def run(self) -> None:
        """List, watch, resume, list again on 410; backoff between failed attempts."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        delay = self.settings.backoff
        while not self.stop.is_set():
            try:
                if self.state.version is None:
                    self._list()
                    self.synced.set()
                if self._watch():
                    delay = self.settings.backoff
                continue
            except Gone:
                with self.cluster._lock:
                    self.state.gone += 1
                    self.state.version = None
                continue  # a fresh list at once
            except ApiException as exc:
                if exc.status == 410:
                    with self.cluster._lock:
                        self.state.gone += 1
                        self.state.version = None
                    continue
                why = f"HTTP {exc.status} {exc.reason}"
                if not self.state.call.required and exc.status in (403, 404):
                    self.synced.set()  # as import does: imported without these objects
            except (HTTPError, OSError, ValueError) as exc:
                why = f"{type(exc).__name__}: {exc}"
            self.last_error = why
            if self.stop.is_set():
                return
            with self.cluster._lock:
                self.state.reconnects += 1
            wait = delay * random.uniform(0.5, 1.0)
            log.info("watch of %s: %s; again in %.2f s", self.state.call.what, why, wait)
            self.stop.wait(wait)
            delay = min(self.settings.backoff_max, delay * 2)

    def _list(self) -> None:
        call, settings = self.state.call, self.settings
        items: list[dict[str, Any]] = []
        token: str | None = None
        version = None
        while True:
            kwargs = dict(call.kwargs, limit=settings.page_size, _preload_content=False,
                          _request_timeout=(settings.connect_seconds, 60.0))
            if token:
                kwargs["_continue"] = token
            response = call.call(**kwargs)
            body = json.loads(response.data)
            if not isinstance(body, dict) or not isinstance(body.get("items"), list):
                raise ValueError(f"list of {call.what}: the answer is not a list object")
            meta = body.get("metadata") or {}
            version = str(meta.get("resourceVersion") or "") or version
            for item in body["items"]:
                if isinstance(item, dict):
                    item.setdefault("kind", call.kind)
                    items.append(strip_object(item))
            del body
            token = meta.get("continue")
            if not token:
                break
        self.cluster.replace(self.index, items)
        with self.cluster._lock:
            self.state.version = version
            self.state.lists += 1

    def _watch(self) -> bool:
        """One watch from the stream's version; whether any line arrived."""
        call, settings = self.state.call, self.settings
        kwargs = dict(call.kwargs, watch=True, resource_version=self.state.version,
                      allow_watch_bookmarks=True, timeout_seconds=settings.watch_seconds,
                      _preload_content=False,
                      _request_timeout=(settings.connect_seconds, settings.quiet_seconds))
        response = call.call(**kwargs)
        self.response = response
        with self.cluster._lock:
            self.state.watches += 1
        seen = False
        try:
            for line in _lines(response):
                if self.stop.is_set():
                    return seen
                seen = True
                event = json.loads(line)
                kind = event.get("type")
                obj = event.get("object")
                if not isinstance(obj, dict):
                    raise ValueError(f"watch of {call.what}: an event without an object")
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise Gone(str(obj.get("message")))
                    raise ValueError(f"watch of {call.what}: error event "
                                     f"{obj.get('code')} {obj.get('message')}")
                version = _version(obj)
                if kind == "BOOKMARK":
                    with self.cluster._lock:
                        self.state.bookmarks += 1
                        if version:
                            self.state.version = version
                    continue
                obj.setdefault("kind", call.kind)
                self.cluster.event(self.index, str(kind), strip_object(obj))
                with self.cluster._lock:
                    self.state.events += 1
                    if version:
                        self.state.version = version
        finally:
            self.response = None
            response.release_conn()
        return seen


class ClusterStreams:
    """Every stream of a :class:`WatchedCluster`, each in its own thread."""

    def __init__(self, cluster: WatchedCluster, settings: WatchSettings | None = None
                 ) -> None:
        self.cluster = cluster
        self.settings = settings or WatchSettings()
        self.stop_event = threading.Event()
        self.streams = [ResourceStream(cluster, i, self.settings, self.stop_event)
                        for i in range(len(cluster.streams))]
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start every stream."""
        for stream in self.streams:
            thread = threading.Thread(target=stream.run, daemon=True,
                                      name=f"watch-{stream.state.call.kind}-{stream.index}")
            thread.start()
            self.threads.append(thread)

    def wait_synced(self, timeout: float) -> bool:
        """Wait until every stream has listed once; whether they have."""
        ends = time.monotonic() + timeout
        return all(s.synced.wait(max(0.0, ends - time.monotonic())) for s in self.streams)

    def unsynced(self) -> list[str]:
        """The streams that have not listed yet, each with its last error."""
        return [f"{s.state.call.what}: {s.last_error or 'no answer yet'}"
                for s in self.streams if not s.synced.is_set()]

    def stop(self, timeout: float = 5.0) -> None:
        """End every stream (open watches are closed)."""
        self.stop_event.set()
        for stream in self.streams:
            response = stream.response
            if response is not None:
                try:
                    response.shutdown()
                except (AttributeError, OSError, ValueError):
                    with contextlib.suppress(OSError):
                        response.close()
        for thread in self.threads:
            thread.join(timeout)
