"""A loopback Kubernetes API server for the watcher's tests and benchmark: list and watch.

:class:`LoopbackApiServer` serves the objects the importer reads (Nodes, Pods, ConfigMaps,
PriorityClasses, Volcano PodGroups) at the API server's paths, the way the API server does
for a client of list and watch:

* one ``resourceVersion`` counter for every change (as etcd's revision); each object
  carries the version of its last change, a list carries the version it was read at;
* ``limit`` / ``continue`` paging of a list read at one version (the later pages come from
  the snapshot of the first; a ``continue`` token older than the compaction is refused with
  ``410 Expired``, as the API server does);
* ``labelSelector`` (``k=v`` terms joined by commas) and ``fieldSelector``
  (``metadata.name=`` / ``metadata.namespace=``);
* ``watch=true`` from a ``resourceVersion``: a chunked stream of one JSON event per line
  (``ADDED``, ``MODIFIED``, ``DELETED``; an object that leaves a label selector is sent as
  ``DELETED``), ``BOOKMARK`` events every ``bookmark_seconds`` with
  ``allowWatchBookmarks=true``, the stream ended after ``timeoutSeconds``; a version older
  than the compaction gets the API server's ``ERROR`` event with a ``410 Expired`` status;
* :meth:`LoopbackApiServer.compact` forgets the events up to now (the next watch from an
  older version gets 410); :meth:`LoopbackApiServer.drop_watches` cuts every open stream
  mid-way (no final chunk), as a restarting API server or a load balancer does;
  :attr:`LoopbackApiServer.unavailable` answers every request ``503`` meanwhile (an API
  server that is down), :attr:`LoopbackApiServer.refuse_watches` only the watches.

Every object is held as its JSON text (with the small part the selectors read: name,
namespace, labels), not as a parsed dict: a list page and a watch event are written by
joining stored bytes, and 65,536 nodes with their pods fit in a few hundred MB (a dict per
object grew the benchmark's server past 18 GB).  The event history is searched by version
(binary search), not scanned.

What it does not model: authentication and RBAC, ``resourceVersionMatch`` and the
consistent-read semantics of ``resourceVersion=0`` (every list is read at the newest
version), set-based label selectors, field selectors other than name and namespace,
watch-cache delays (events are sent as soon as they are written), protobuf, HTTP/2, the
``sendInitialEvents`` streaming list, and server-side apply (no ``managedFields`` are
written unless the object carries them).
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

#: Resource name -> (path after the group prefix, kind, namespaced, group path).
RESOURCES = {
    "nodes": ("Node", False, "/api/v1"),
    "pods": ("Pod", True, "/api/v1"),
    "configmaps": ("ConfigMap", True, "/api/v1"),
    "priorityclasses": ("PriorityClass", False, "/apis/scheduling.k8s.io/v1"),
    "podgroups": ("PodGroup", True, "/apis/scheduling.volcano.sh/v1beta1"),
}
KIND_RESOURCE = {kind: name for name, (kind, _, _) in RESOURCES.items()}
#: List snapshots kept for ``continue`` tokens.
MAX_SNAPSHOTS = 64


@dataclass(frozen=True)
class _Stored:
    """One stored object: its JSON text and what the selectors read."""

    data: bytes
    namespace: str
    name: str
    labels: dict[str, str] | None

    @classmethod
    def of(cls, obj: dict[str, Any]) -> _Stored:
        """The stored form of ``obj`` (serialised now: later changes to ``obj`` do not
        reach it)."""
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or None
        return cls(json.dumps(obj, separators=(",", ":")).encode(),
                   str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                   dict(labels) if labels else None)

    def value(self) -> dict[str, Any]:
        """A fresh dict of the object."""
        loaded: dict[str, Any] = json.loads(self.data)
        return loaded


@dataclass
class _Event:
    version: int
    resource: str
    type: str
    obj: _Stored
    old: _Stored | None


@dataclass
class _Watcher:
    sock: socket.socket
    closed: threading.Event = field(default_factory=threading.Event)


def _labels_match(obj: _Stored | None, selector: str | None) -> bool:
    if obj is None:
        return False
    if not selector:
        return True
    labels = obj.labels or {}
    for term in selector.split(","):
        name, _, value = term.partition("=")
        if labels.get(name.strip()) != value.strip():
            return False
    return True


def _fields_match(obj: _Stored | None, selector: str | None,
                  namespace: str | None) -> bool:
    if obj is None:
        return False
    ns, name = obj.namespace, obj.name
    if namespace is not None and ns != namespace:
        return False
    for term in (selector or "").split(","):
        if not term:
            continue
        what, _, value = term.partition("=")
        if what == "metadata.name" and name != value:
            return False
        if what == "metadata.namespace" and ns != value:
            return False
    return True


class LoopbackApiServer:
    """The API server's list and watch of the importer's objects, on 127.0.0.1.

    Use as a context manager (or :meth:`start` / :meth:`stop`); change objects with
    :meth:`apply` / :meth:`delete`; :attr:`url` is the ``host`` of a client configuration.

    Parameters
    ----------
    bookmark_seconds
        Interval of ``BOOKMARK`` events on watches that allow them.
    """

    def __init__(self, bookmark_seconds: float = 1.0) -> None:
        self.bookmark_seconds = bookmark_seconds
        self.version = 1
        self.compacted = 0
        self._objects: dict[str, dict[tuple[str, str], _Stored]] = {
            name: {} for name in RESOURCES}
        self.events: list[_Event] = []
        #: the versions of :attr:`events` (ascending), for a binary search
        self._event_versions: list[int] = []
        self._snapshots: dict[str, tuple[int, list[_Stored]]] = {}
        self._lock = threading.Condition()
        self._watchers: list[_Watcher] = []
        #: per resource, the newest event version a compaction forgot
        self._cleared: dict[str, int] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.requests: dict[str, int] = {"list": 0, "watch": 0, "gone": 0, "refused": 0}
        #: while set, every request is answered 503 (the API server is down)
        self.unavailable = False
        #: while set, every watch request is answered 503 (lists are served)
        self.refuse_watches = False

    # ------------------------------------------------------------------ objects
    @property
    def objects(self) -> dict[str, dict[tuple[str, str], dict[str, Any]]]:
        """Every stored object by resource and (namespace, name): fresh dicts (changing
        them changes nothing on the server; :meth:`apply` does)."""
        with self._lock:
            stored = {name: dict(items) for name, items in self._objects.items()}
        return {name: {key: obj.value() for key, obj in items.items()}
                for name, items in stored.items()}

    @objects.setter
    def objects(self, objects: dict[str, dict[tuple[str, str], dict[str, Any]]]) -> None:
        """Replace every stored object (no events: as a server started on these)."""
        with self._lock:
            self._objects = {name: {key: _Stored.of(obj)
                                    for key, obj in objects.get(name, {}).items()}
                             for name in RESOURCES}

    def stored_json(self, kind: str, name: str, namespace: str = "") -> bytes | None:
        """The JSON text of a stored object (``None`` when there is none)."""
        with self._lock:
            stored = self._objects[KIND_RESOURCE[kind]].get((namespace, name))
        return None if stored is None else stored.data

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> LoopbackApiServer:
        """Listen on a free loopback port and serve in a thread."""
        owner = self

        class Handler(_Handler):
            server_state = owner

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="loopback-apiserver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Cut every watch and stop serving."""
        self.drop_watches()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> LoopbackApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ changes
    def apply(self, obj: dict[str, Any]) -> int:
        """Create or replace an object (its ``kind`` says which resource); its version."""
        resource = KIND_RESOURCE[obj["kind"]]
        with self._lock:
            self.version += 1
            stored = _Stored.of(_with_version(obj, self.version))
            key = (stored.namespace, stored.name)
            old = self._objects[resource].get(key)
            self._objects[resource][key] = stored
            self._record(_Event(self.version, resource,
                                "MODIFIED" if old is not None else "ADDED", stored, old))
            return self.version

    def apply_all(self, objects: Iterable[dict[str, Any]]) -> int:
        """:meth:`apply` each of ``objects`` (an iterator is consumed one object at a
        time, so a generator's objects need not all exist at once); the last version."""
        for obj in objects:
            self.apply(obj)
        return self.version

    def delete(self, kind: str, name: str, namespace: str = "") -> bool:
        """Delete an object; whether it existed."""
        resource = KIND_RESOURCE[kind]
        with self._lock:
            old = self._objects[resource].pop((namespace, name), None)
            if old is None:
                return False
            self.version += 1
            gone = _Stored.of(_with_version(old.value(), self.version))
            self._record(_Event(self.version, resource, "DELETED", gone, old))
            return True

    def _record(self, event: _Event) -> None:
        """Append an event to the history and wake the watches (the lock is held)."""
        self.events.append(event)
        self._event_versions.append(event.version)
        self._lock.notify_all()

    def _pending(self, resource: str, position: int) -> list[_Event]:
        """The events of ``resource`` after version ``position`` (the lock is held)."""
        start = bisect.bisect_right(self._event_versions, position)
        return [e for e in self.events[start:] if e.resource == resource]

    def compact(self) -> None:
        """Forget every event up to the current version (etcd compaction): a watch or a
        ``continue`` from an older version is answered with 410."""
        with self._lock:
            self.compacted = self.version
            for event in self.events:
                self._cleared[event.resource] = max(self._cleared.get(event.resource, 0),
                                                    event.version)
            self.events.clear()
            self._event_versions.clear()
            self._snapshots.clear()
            self._lock.notify_all()

    def drop_watches(self) -> int:
        """Cut every open watch connection without the final chunk; how many were cut."""
        with self._lock:
            watchers, self._watchers = self._watchers, []
            self._lock.notify_all()
        for watcher in watchers:
            watcher.closed.set()
            with contextlib.suppress(OSError):
                watcher.sock.shutdown(socket.SHUT_RDWR)
        return len(watchers)

    def open_watches(self) -> int:
        """Watch connections open now."""
        with self._lock:
            return len(self._watchers)

    # ------------------------------------------------------------------ reads
    def list_page(self, resource: str, namespace: str | None, labels: str | None,
                  fields: str | None, limit: int, token: str | None
                  ) -> tuple[int, dict[str, Any]]:
        """A list answer (status, body) as the API server writes it (its items fresh
        dicts)."""
        status, body, page = self._list(resource, namespace, labels, fields, limit, token)
        if page is not None:
            body["items"] = [obj.value() for obj in page]
        return status, body

    def list_json(self, resource: str, namespace: str | None, labels: str | None,
                  fields: str | None, limit: int, token: str | None) -> tuple[int, bytes]:
        """:meth:`list_page` as the JSON text sent: the stored objects' text joined, none
        of them parsed."""
        status, body, page = self._list(resource, namespace, labels, fields, limit, token)
        if page is None:
            return status, json.dumps(body).encode()
        head = json.dumps({**body, "items": []}, separators=(",", ":")).encode()
        assert head.endswith(b"[]}")
        return status, head[:-3] + b"[" + b",".join(obj.data for obj in page) + b"]}"

    def _list(self, resource: str, namespace: str | None, labels: str | None,
              fields: str | None, limit: int, token: str | None
              ) -> tuple[int, dict[str, Any], list[_Stored] | None]:
        """(status, body without its items, the stored items of the page); the page is
        ``None`` when the body is an error status."""
        kind, _, group = RESOURCES[resource]
        with self._lock:
            self.requests["list"] += 1
            if token:
                try:
                    state = json.loads(base64.urlsafe_b64decode(token.encode()))
                    version, start = int(state["rv"]), int(state["start"])
                    snapshot = self._snapshots[state["id"]]
                except (ValueError, KeyError, TypeError):
                    self.requests["gone"] += 1
                    return 410, _status(410, "Expired", "The provided continue parameter is "
                                        "too old to display a consistent list result."), None
                items = snapshot[1]
                snap_id = state["id"]
            else:
                version, start = self.version, 0
                # stored objects are replaced, never changed: a snapshot holds them
                items = [o for _, o in sorted(self._objects[resource].items())
                         if _labels_match(o, labels) and _fields_match(o, fields, namespace)]
                snap_id = f"{resource}-{version}-{len(self._snapshots)}-{time.monotonic_ns()}"
                if limit and len(items) > limit:
                    self._snapshots[snap_id] = (version, items)
                    while len(self._snapshots) > MAX_SNAPSHOTS:
                        self._snapshots.pop(next(iter(self._snapshots)))
        page = items[start:start + limit] if limit else items[start:]
        meta: dict[str, Any] = {"resourceVersion": str(version)}
        if limit and start + limit < len(items):
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(
                {"rv": version, "start": start + limit, "id": snap_id}).encode()).decode()
            meta["remainingItemCount"] = len(items) - start - limit
        api_version = group.removeprefix("/api/").removeprefix("/apis/")
        return 200, {"kind": f"{kind}List", "apiVersion": api_version, "metadata": meta}, page

    def watch_events(self, resource: str, namespace: str | None, labels: str | None,
                     fields: str | None, since: int, bookmarks: bool, timeout: float,
                     watcher: _Watcher) -> Iterator[bytes]:
        """The events of a watch from ``since``, each one line of JSON text."""
        kind, _, group = RESOURCES[resource]
        api_version = group.removeprefix("/api/").removeprefix("/apis/")
        ends = time.monotonic() + timeout
        next_bookmark = time.monotonic() + self.bookmark_seconds
        position = since
        with self._lock:
            self.requests["watch"] += 1
            if self.unavailable or self.refuse_watches:
                # refused while this request was on its way in (past the handler's check,
                # not yet open for drop_watches to cut): it ends at once, so a drop after
                # ``refuse_watches`` is set cuts every watch, and the client's next watch
                # is refused until watches are allowed
                self.requests["refused"] += 1
                return
            if since < self.compacted:
                self.requests["gone"] += 1
                yield _event_line("ERROR", _status(
                    410, "Expired", f"too old resource version: {since} ({self.compacted})"))
                return
            self._watchers.append(watcher)
        try:
            while not watcher.closed.is_set():
                with self._lock:
                    if position < self._cleared.get(resource, 0):
                        self.requests["gone"] += 1
                        yield _event_line("ERROR", _status(
                            410, "Expired", f"too old resource version: {position}"))
                        return
                    pending = self._pending(resource, position)
                    if not pending:
                        wait = min(ends, next_bookmark if bookmarks else ends) - time.monotonic()
                        if wait > 0:
                            self._lock.wait(min(wait, 0.5))
                        pending = self._pending(resource, position)
                    current = self.version
                for event in pending:
                    position = event.version
                    now_in = (_labels_match(event.obj, labels)
                              and _fields_match(event.obj, fields, namespace))
                    was_in = (_labels_match(event.old, labels)
                              and _fields_match(event.old, fields, namespace))
                    if event.type == "DELETED":
                        if was_in:
                            yield _stored_line("DELETED", event.obj)
                    elif now_in:
                        yield _stored_line("ADDED" if not was_in else event.type, event.obj)
                    elif was_in:
                        yield _stored_line("DELETED", event.obj)
                if watcher.closed.is_set():
                    return
                if time.monotonic() >= ends:
                    return
                if bookmarks and time.monotonic() >= next_bookmark:
                    next_bookmark = time.monotonic() + self.bookmark_seconds
                    position = max(position, current)
                    yield _event_line("BOOKMARK", {
                        "kind": kind, "apiVersion": api_version,
                        "metadata": {"resourceVersion": str(position)}})
        finally:
            with self._lock:
                if watcher in self._watchers:
                    self._watchers.remove(watcher)


def _with_version(obj: dict[str, Any], version: int) -> dict[str, Any]:
    """``obj`` with ``metadata.resourceVersion`` set (a shallow copy: ``obj`` unchanged)."""
    meta = dict(obj.get("metadata") or {})
    meta["resourceVersion"] = str(version)
    return {**obj, "metadata": meta}


def _event_line(kind: str, obj: dict[str, Any]) -> bytes:
    """A watch event of a built object, one line of JSON."""
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def _stored_line(kind: str, obj: _Stored) -> bytes:
    """A watch event of a stored object, its text not parsed again."""
    return b'{"type":"' + kind.encode() + b'","object":' + obj.data + b"}\n"


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def _route(path: str) -> tuple[str, str | None] | None:
    """(resource, namespace) of a list/watch path; ``None`` when not served."""
    for resource, (_, namespaced, group) in RESOURCES.items():
        if path == f"{group}/{resource}":
            return resource, None
        if namespaced and path.startswith(f"{group}/namespaces/") and path.endswith(
                f"/{resource}"):
            namespace = path[len(f"{group}/namespaces/"):-len(f"/{resource}")]
            if namespace and "/" not in namespace:
                return resource, namespace
    return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    #: TCP_NODELAY, as the Kubernetes API server's Go listener has: with Nagle's algorithm
    #: on, a body written after its headers, and each watch event after the one before,
    #: waited about 40 ms for the client's delayed ACK
    disable_nagle_algorithm = True
    server_state: LoopbackApiServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests read the server's counters, not its log."""

    def _send_json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        """List or watch."""
        parts = urlsplit(self.path)
        route = _route(parts.path)
        if route is None:
            self._send_json(404, _status(404, "NotFound", f"no route {parts.path}"))
            return
        resource, namespace = route
        watch = "watch=true" in parts.query or "watch=1" in parts.query
        if self.server_state.unavailable or (watch and self.server_state.refuse_watches):
            self.server_state.requests["refused"] += 1
            self._send_json(503, _status(503, "ServiceUnavailable", "the API server is down"))
            return
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        labels, fields = query.get("labelSelector"), query.get("fieldSelector")
        state = self.server_state
        if query.get("watch") in ("true", "1"):
            self._watch(state, resource, namespace, labels, fields, query)
            return
        status, data = state.list_json(resource, namespace, labels, fields,
                                       int(query.get("limit") or 0), query.get("continue"))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _watch(self, state: LoopbackApiServer, resource: str, namespace: str | None,
               labels: str | None, fields: str | None, query: dict[str, str]) -> None:
        since = int(query.get("resourceVersion") or state.version)
        timeout = float(query.get("timeoutSeconds") or 1800)
        bookmarks = query.get("allowWatchBookmarks") == "true"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        watcher = _Watcher(self.connection)
        try:
            for line in state.watch_events(resource, namespace, labels, fields, since,
                                           bookmarks, timeout, watcher):
                self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.flush()
            if not watcher.closed.is_set():
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except OSError:
            pass
        self.close_connection = True
