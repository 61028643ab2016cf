"""The own view's cache events, coalesced: at most one ``PATCH`` per interval.

In own-view mode (``--extender-cluster``) Volcano's ``allocateFunc`` / ``deallocateFunc``
become the stored cluster's cache events (``bind``, ``evict``, ``discard``).  Sent one
``PATCH`` each, a gang of thousands of pods queues thousands of deltas behind the stored
cluster, without bound, and the next ``onSessionOpen`` waits behind them.
:class:`CacheEventForwarder` queues them in a bounded :class:`~solver.service.coalesce.Coalescer`
and sends what accumulated as one delta of ``cache-events`` at most once per interval:
the cache-event path of :func:`~solver.service.state.apply_delta` (only the touched owners'
entries written, only their jobs' origins recomputed; no job is compiled again).

A delta is applied whole or not at all, so one bad event (a node the cluster does not
hold) would refuse its batch: a refused batch is split in halves and each half sent
again, down to the single bad events, which are dropped with a log line (at most about
``2 log2(n)`` extra ``PATCH`` es per bad event).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson

from solver.service.coalesce import DEFAULT_INTERVAL, DEFAULT_MAX_EVENTS, Coalescer

log = logging.getLogger("npu_place.extender")
#: Seconds between two PATCHes of cache events (read when a forwarder is made).
EVENT_INTERVAL = DEFAULT_INTERVAL


class CacheEventForwarder:
    """Coalesce the own view's cache events into one ``PATCH`` per interval.

    Parameters
    ----------
    pool
        The service's :class:`~solver.service.pool.WorkerPool`.
    cluster
        The stored cluster's name.
    interval, max_events
        The coalescer's interval (default :data:`EVENT_INTERVAL`) and queue bound.
    timeout
        Seconds one ``PATCH`` may take.
    """

    def __init__(self, pool: Any, cluster: str, interval: float | None = None,
                 max_events: int = DEFAULT_MAX_EVENTS, timeout: float = 30.0) -> None:
        self.pool = pool
        self.cluster = cluster
        self.timeout = timeout
        self.loop: asyncio.AbstractEventLoop | None = None
        self.coalescer = Coalescer(self._send, EVENT_INTERVAL if interval is None
                                   else interval, max_events,
                                   name="extender-cache-events")
        self.patches = 0
        self.refused = 0
        self._started = False

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start sending on ``loop`` (the service's event loop)."""
        self.loop = loop
        if not self._started:
            self._started = True
            self.coalescer.start()

    def add(self, event: dict[str, Any] | None) -> None:
        """Queue one cache event (``None``: nothing to send)."""
        if event is not None:
            self.coalescer.add(event)

    def stop(self) -> None:
        """Stop (what is queued is sent first, within the coalescer's join timeout)."""
        if self._started:
            self.coalescer.stop(flush=True, timeout=self.timeout)

    def _send(self, events: list[dict[str, Any]]) -> None:
        if events:
            self._patch(events)

    def _patch(self, events: list[dict[str, Any]]) -> None:
        from solver.service.parsing import BadRequest

        pool, name, loop = self.pool, self.cluster, self.loop
        record = pool.clusters.get(name)
        if record is None or loop is None:
            log.warning("extender: %d cache events not applied: cluster '%s' is not stored",
                        len(events), name)
            return
        body = orjson.dumps({"cache-events": events})
        future = asyncio.run_coroutine_threadsafe(pool.patch_cluster(name, body), loop)
        try:
            future.result(self.timeout)
            self.patches += 1
        except BadRequest as exc:
            if exc.status != 422 or len(events) == 1:
                self.refused += len(events)
                log.warning("extender: %d cache events not applied (first %s): %s",
                            len(events), events[0], exc.messages[:2])
                return
            half = len(events) // 2  # find the bad events: each half on its own
            self._patch(events[:half])
            self._patch(events[half:])
