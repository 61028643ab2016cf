"""List then watch, one resource at a time, under the API server's watch contract.

:class:`ResourceStream` lists one resource (paged with ``limit``/``continue``) and then
watches it from the list's ``resourceVersion`` with the official ``kubernetes`` client:
bookmarks move the version, a dropped or ended watch is resumed after a jittered backoff,
a quiet watch is restarted, and ``410 Gone`` means a fresh list.  The objects go into a
:class:`models.kube.watch.WatchedCluster`; :class:`ClusterStreams` runs one stream per
list call of the importer.  What is kept of an object, and how the kept objects are
imported, is :mod:`models.kube.watch`'s.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

from models.documents import paused_gc
from models.kube.pages import page_identities, page_items
from models.kube.watch import Gone, WatchedCluster, WatchSettings, strip_object, version_of

log = logging.getLogger("npu_place.watch")

try:
    import orjson
except ImportError:  # the ``kube`` extra brings it; without it the standard library reads
    orjson = None  # type: ignore[assignment]


def _loads(data: bytes) -> Any:
    """One JSON document from the API server, read as :func:`json.loads` reads it.

    By ``orjson`` (a list of 65,536 nodes' objects took most of a relist's CPU in the
    standard library's decoder), and by :mod:`json` when orjson refuses it or is missing.
    The two read every document the API server writes alike: its objects are Go structs
    whose integers are at most 64 bits (orjson reads a longer integer as a float; a
    search for long digit runs before each parse cost more than the parse)."""
    if orjson is not None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


def _lines(response: Any) -> Iterator[bytes]:
    """The lines of a chunked watch answer, as they arrive (each chunk split once: a chunk
    of many events is not copied again for each line)."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=False):
        if b"\n" not in chunk:
            pending += chunk
            continue
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
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
        """List the resource into the cluster, compared page by page with the held
        objects: an unchanged object (same uid and ``resourceVersion``) is not built at
        all when the stream holds objects (:func:`models.kube.pages.page_identities`
        reads what the comparison needs), or dropped with its page (parsed whole: the
        first list, or a page of another shape); only the others are stripped and kept
        until the list ends."""
        call, settings = self.state.call, self.settings
        kept: set[tuple[str, str]] = set()
        changed: list[dict[str, Any]] = []
        token: str | None = None
        version = None
        cluster, index = self.cluster, self.index
        # a list of 65,536 nodes makes millions of objects, and none of them is garbage
        # yet: the collector's passes over the whole heap cost more than the reading
        with paused_gc():
            while True:
                kwargs = dict(call.kwargs, limit=settings.page_size, _preload_content=False,
                              _request_timeout=(settings.connect_seconds, 60.0))
                if token:
                    kwargs["_continue"] = token
                data = call.call(**kwargs).data
                read = page_identities(data) if self.state.objects else None
                items: list[Any] | None = None
                if read is not None:
                    listed, page_version, token = read
                    version = page_version or version
                    positions = cluster.changed_positions(index, list(listed), kept)
                    texts = page_items(data, positions) if positions else []
                    if texts is not None:
                        items = [_loads(text) for text in texts]
                    else:  # cut out as it was read: not expected to happen
                        items = _loads(data)["items"]
                        items = [items[at] for at in positions]
                else:
                    body = _loads(data)
                    if not isinstance(body, dict) or not isinstance(body.get("items"), list):
                        raise ValueError(f"list of {call.what}: the answer is not a list "
                                         "object")
                    meta = body.get("metadata") or {}
                    version = str(meta.get("resourceVersion") or "") or version
                    token = meta.get("continue")
                    items = cluster.split_page(index, body["items"], kept)
                    del body
                for item in items:
                    if isinstance(item, dict):
                        item.setdefault("kind", call.kind)
                        changed.append(strip_object(item))
                del data, items
                if not token:
                    break
            cluster.relisted(index, kept, changed)
        with cluster._lock:
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
                event = _loads(line)
                kind = event.get("type")
                obj = event.get("object")
                if not isinstance(obj, dict):
                    raise ValueError(f"watch of {call.what}: an event without an object")
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise Gone(str(obj.get("message")))
                    raise ValueError(f"watch of {call.what}: error event "
                                     f"{obj.get('code')} {obj.get('message')}")
                version = version_of(obj)
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
