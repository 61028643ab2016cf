"""A stored cluster that keeps itself current: the Kubernetes watch as the service's deltas.

:class:`ClusterWatcher` joins the watched objects (:class:`models.kube.watch.WatchedCluster`,
fed by :class:`models.kube.stream.ClusterStreams`) to a stored cluster:

* the first send ``PUT`` s the import of the listed objects (the cluster's version 1 of
  this watcher);
* every later send imports the objects at that moment, with ``--previous`` the import
  before it (:meth:`~models.kube.watch.WatchedCluster.advance`: only the nodes and jobs
  that changed, when it can), and sends the difference
  (:func:`~solver.service.scenario_diff.pieces_delta`, or
  :func:`~solver.service.scenario_diff.scenario_delta` after a whole import) as one
  ``PATCH`` with ``expect-version`` (nothing when nothing changed); a delta the stored
  cluster refuses makes the next send a whole import from the last stored one;
* sends are coalesced (:class:`~solver.service.coalesce.Coalescer`): at most one per
  ``interval``, whatever the event rate; a ``410 Gone`` resync is one list whose
  differences go out in the next delta, like any other change;
* when the stored cluster was changed or deleted by someone else (``409``, ``404``), the
  whole current import is ``PUT`` again, and the watcher goes on from its version.

The importer is the oracle: after any sequence of events the stored cluster's scenario is
the chain of imports of the objects at each event boundary, each with ``--previous`` the
import before (``tests/service/test_watcher.py`` checks it on random event sequences).

Where the cluster lives is a :class:`ClusterTarget`: :class:`StoreTarget` (a
:class:`~solver.service.state.ClusterStore` in this process), :class:`PoolTarget` (the
service's worker pool: ``serve --watch``), :class:`HttpTarget` (a service over HTTP:
``npu-place watch``).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from models.compiled import compile_scenario
from models.kube.stream import ClusterStreams
from models.kube.watch import WatchedCluster, WatchSettings
from models.scenario import Scenario
from models.validation import InputError
from solver.service.coalesce import DEFAULT_INTERVAL, Coalescer
from solver.service.scenario_diff import pieces_delta, scenario_delta
from solver.service.state import ClusterDelta, ClusterStore, VersionConflict

log = logging.getLogger("npu_place.watch")

#: Lag samples kept (seconds from an event's arrival to the version that has it).
LAG_SAMPLES = 100_000


class Replaced(Exception):
    """The stored cluster is not the one this watcher wrote (409 or 404): ``PUT`` again."""


class ClusterTarget(Protocol):
    """Where the watched cluster is stored."""

    def put(self, scenario: dict[str, Any]) -> int:
        """Store the whole scenario; the new version."""

    def patch(self, delta: dict[str, Any]) -> int:
        """Apply a delta (with ``expect-version``); the new version.

        Raises
        ------
        Replaced
            On a version conflict or a missing cluster.
        """


class StoreTarget:
    """A cluster of a :class:`ClusterStore` in this process (tests, benchmarks)."""

    def __init__(self, store: ClusterStore, name: str) -> None:
        self.store = store
        self.name = name

    def put(self, scenario: dict[str, Any]) -> int:
        """Compile and store the scenario."""
        problem = compile_scenario(Scenario.model_validate(scenario), f"watch of {self.name}")
        cluster = self.store.get(self.name)
        version = cluster.snapshot.version + 1 if cluster is not None else 1
        self.store.put(self.name, problem, version)
        return version

    def patch(self, delta: dict[str, Any]) -> int:
        """Apply the delta to the stored cluster."""
        cluster = self.store.get(self.name)
        if cluster is None:
            raise Replaced(f"cluster '{self.name}' is not stored")
        try:
            info = cluster.apply(ClusterDelta.model_validate(delta))
        except VersionConflict as exc:
            raise Replaced(str(exc)) from None
        return info.version


class PoolTarget:
    """A cluster of the service's worker pool (``serve --watch``): the pool's own ``PUT``
    and ``PATCH``, run on the service's event loop from the watcher's thread."""

    def __init__(self, pool: Any, name: str, loop: asyncio.AbstractEventLoop,
                 timeout: float = 60.0) -> None:
        self.pool = pool
        self.name = name
        self.loop = loop
        self.timeout = timeout

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(self.timeout)

    def put(self, scenario: dict[str, Any]) -> int:
        """``PUT`` through the pool."""
        body = orjson.dumps(scenario, option=orjson.OPT_NON_STR_KEYS)  # rank maps
        reply = self._run(self.pool.put_cluster(self.name, body))
        return int(reply["info"]["version"])

    def patch(self, delta: dict[str, Any]) -> int:
        """``PATCH`` through the pool."""
        from solver.service.parsing import BadRequest

        try:
            body = orjson.dumps(delta, option=orjson.OPT_NON_STR_KEYS)
            reply = self._run(self.pool.patch_cluster(self.name, body))
        except BadRequest as exc:
            if exc.status in (404, 409):
                raise Replaced("; ".join(exc.messages[:2])) from None
            raise
        return int(reply["info"]["version"] if "info" in reply else reply["version"])


class HttpTarget:
    """A cluster of a planning service over HTTP (``npu-place watch``)."""

    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.name = name

    def put(self, scenario: dict[str, Any]) -> int:
        """``PUT /v1/clusters/{name}``."""
        return int(self.client.put_cluster(self.name, scenario)["version"])

    def patch(self, delta: dict[str, Any]) -> int:
        """``PATCH /v1/clusters/{name}``."""
        from solver.service.client import ServiceError

        try:
            return int(self.client.patch_cluster(self.name, delta)["version"])
        except ServiceError as exc:
            if exc.status in (404, 409):
                raise Replaced(str(exc)) from None
            raise


class ClusterWatcher:
    """Watch a Kubernetes cluster into a stored cluster.

    Parameters
    ----------
    watched
        The objects (its ``on_change`` is set to this watcher's).
    target
        Where the cluster is stored.
    interval
        Seconds between two sends, at least (the coalescing interval).
    settle
        Called after each ``PUT`` of the whole import (the first stored cluster, a cluster
        stored again): ``npu-place watch`` and ``serve --watch`` pass
        :func:`solver.service.worker.settle_heap`, which moves the watched objects, alive
        from then on, out of the garbage collector's full collections (as the service's
        worker does after a ``PUT``).
    """

    def __init__(self, watched: WatchedCluster, target: ClusterTarget,
                 interval: float = DEFAULT_INTERVAL,
                 settle: Callable[[], None] | None = None) -> None:
        self.watched = watched
        self.target = target
        self.settle = settle
        self.coalescer = Coalescer(self._send, interval, name="watch")
        self.version: int | None = None
        #: CPU seconds (the sending thread's) of each PATCH's import and delta, and of the
        #: PATCH itself (a target in this process applies it on this thread)
        self.import_cpu: collections.deque[float] = collections.deque(maxlen=LAG_SAMPLES)
        self.patch_cpu: collections.deque[float] = collections.deque(maxlen=LAG_SAMPLES)
        self._lock = threading.Lock()
        self._arrivals: list[float] = []  # monotonic arrival of each change since a send
        self.lags: collections.deque[float] = collections.deque(maxlen=LAG_SAMPLES)
        self.puts = 0
        self.patches = 0
        self.empty = 0
        self.failed_builds = 0
        self.last_error: str | None = None
        self.last_delta_keys: list[str] = []
        self.applied: Callable[[int], None] | None = None  # called with each new version
        watched.on_change = self._changed

    def _changed(self) -> None:
        with self._lock:
            if len(self._arrivals) < LAG_SAMPLES:
                self._arrivals.append(time.monotonic())
        self.coalescer.poke()

    def start(self) -> ClusterWatcher:
        """Start the sending thread (the streams are started by their owner)."""
        self.coalescer.start()
        return self

    def stop(self) -> None:
        """Send what is pending and stop."""
        self.coalescer.stop(flush=True)

    def _send(self, events: list[dict[str, Any]]) -> None:
        with self._lock:
            arrivals, self._arrivals = self._arrivals, []
        cpu = time.thread_time()
        try:
            step = self.watched.advance()
        except InputError as exc:
            self.failed_builds += 1
            self.last_error = "; ".join(exc.messages[:3])
            log.warning("watch: the objects do not import: %s", self.last_error)
            return
        if self.version is None or step.old is None:
            self.version = self.target.put(step.data())
            self.puts += 1
            self._settle()
        else:
            delta = (pieces_delta(step.old, step.new, step.changes)
                     if step.changes is not None
                     else scenario_delta(step.old.scenario(), step.result.scenario
                                         if step.result is not None
                                         else step.new.scenario()))
            self.import_cpu.append(time.thread_time() - cpu)
            if delta is None:
                self.empty += 1
                self.watched.commit(step)
                self._lags(arrivals)
                return
            self.last_delta_keys = sorted(delta)
            delta["expect-version"] = self.version
            try:
                cpu = time.thread_time()
                self.version = self.target.patch(delta)
                self.patch_cpu.append(time.thread_time() - cpu)
                self.patches += 1
            except Replaced as exc:
                log.warning("watch: the stored cluster changed under the watcher (%s): "
                            "storing the whole import again", exc)
                self.version = self.target.put(step.data())
                self.puts += 1
                self._settle()
            except Exception:
                # refused (or lost): the next send is a whole import from the last one
                self.watched.abandon(step)
                raise
        self.watched.commit(step)
        self._lags(arrivals)
        if self.applied is not None:
            self.applied(self.version)

    def _settle(self) -> None:
        if self.settle is not None:
            self.settle()

    def _lags(self, arrivals: list[float]) -> None:
        done = time.monotonic()
        self.lags.extend(done - t for t in arrivals)

    def counts(self) -> dict[str, Any]:
        """Sends, PUTs, PATCHes, the streams' counts and the last error."""
        return {"puts": self.puts, "patches": self.patches, "empty": self.empty,
                "failed-builds": self.failed_builds, "version": self.version,
                "last-error": self.last_error, **self.watched.counts()}


def start_watch(api: Any, target: ClusterTarget, *, interval: float = DEFAULT_INTERVAL,
                settings: WatchSettings | None = None,
                clock: Callable[[], float] = time.time, previous: Scenario | None = None,
                sync_timeout: float = 300.0, settle: Callable[[], None] | None = None
                ) -> tuple[ClusterWatcher, ClusterStreams]:
    """List and watch every object of ``import --kubeconfig`` through ``api`` (an
    ``ApiClient``) into ``target``; the running watcher and its streams (``settle``: see
    :class:`ClusterWatcher`).

    The first send happens once every stream has listed (the first stored cluster is the
    import of the listed objects); stop with ``streams.stop()`` then ``watcher.stop()``.

    Raises
    ------
    InputError
        When a stream has not listed within ``sync_timeout`` seconds (each named with its
        last error); the streams are stopped.
    """
    from models.kube.live import list_calls

    watched = WatchedCluster(list_calls(api), clock=clock, previous=previous)
    watcher = ClusterWatcher(watched, target, interval, settle)
    streams = ClusterStreams(watched, settings)
    streams.start()
    if not streams.wait_synced(sync_timeout):
        missing = streams.unsynced()
        streams.stop()
        raise InputError([f"watch: no list within {sync_timeout:g} s of {m}"
                          for m in missing])
    watcher.start()
    watcher.coalescer.poke()  # the first stored cluster: the listed objects
    return watcher, streams


@dataclass(frozen=True)
class WatchConfig:
    """``serve --watch NAME``: the cluster to keep current and where to read it from.

    Parameters
    ----------
    cluster
        The stored cluster's name.
    kubeconfig, context, in_cluster
        As ``import --kubeconfig/--context/--in-cluster``.
    host
        An API server's URL without credentials (the loopback test server); overrides the
        kubeconfig.
    interval
        The coalescing interval in seconds.
    settings
        Paging, timeouts and backoff of the streams.
    clock
        Unix seconds: each import's ``now``.
    """

    cluster: str
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    host: str | None = None
    interval: float = DEFAULT_INTERVAL
    settings: WatchSettings = field(default_factory=WatchSettings)
    clock: Callable[[], float] = time.time

    def api(self) -> Any:
        """The ``ApiClient`` of these settings.

        Raises
        ------
        InputError
            When no configuration can be loaded.
        """
        from kubernetes import client

        from models.kube.live import api_client

        if self.host is not None:
            return client.ApiClient(client.Configuration(host=self.host))
        return api_client(self.kubeconfig, self.context, self.in_cluster)


class ServiceWatch:
    """The watcher of ``serve --watch``, in the service's process: the pool's ``PUT`` and
    ``PATCH`` on the service's event loop, the streams and the coalescer in threads.

    :meth:`start` returns at once; the first list runs in a background thread (the service
    answers meanwhile: the cluster is stored once every stream has listed).
    """

    def __init__(self, config: WatchConfig, pool: Any) -> None:
        self.config = config
        self.pool = pool
        self.watcher: ClusterWatcher | None = None
        self.streams: ClusterStreams | None = None
        self.error: str | None = None
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """List and watch in the background, storing into the pool on ``loop``."""
        def run() -> None:
            from solver.service.worker import settle_heap

            try:
                target = PoolTarget(self.pool, self.config.cluster, loop)
                watcher, streams = start_watch(self.config.api(), target,
                                               interval=self.config.interval,
                                               settings=self.config.settings,
                                               clock=self.config.clock, settle=settle_heap)
            except InputError as exc:
                self.error = "; ".join(exc.messages[:3])
                log.error("watch of cluster %s: %s", self.config.cluster, self.error)
                return
            self.watcher, self.streams = watcher, streams
            if self._stopped.is_set():
                self.stop()

        self._thread = threading.Thread(target=run, name="watch-start", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the streams and the coalescer (what is pending is not sent)."""
        self._stopped.set()
        if self.streams is not None:
            self.streams.stop()
        if self.watcher is not None:
            self.watcher.coalescer.stop(flush=False)

    def status(self) -> dict[str, Any]:
        """The watcher's counts (or its start error)."""
        if self.watcher is None:
            return {"cluster": self.config.cluster, "state": "listing" if self.error is None
                    else "failed", "error": self.error}
        return {"cluster": self.config.cluster, "state": "watching",
                **self.watcher.counts()}
