"""Slow and idle clients: a header timeout and a bound on open connections.

uvicorn closes a keep-alive connection that stays idle after an answer, but not one that
opens and never finishes its request headers: 2,000 such half-sent connections were held
for as long as their clients liked, and with ``ulimit -n 256`` 300 of them took every file
descriptor, so ``/healthz`` stopped answering (a liveness probe would restart the pod and
lose every stored cluster).  :class:`ConnectionGuard` wraps uvicorn's HTTP protocol class:

* a connection that has not sent complete request headers ``header_timeout`` seconds after
  it opened (or after its last answer) is closed;
* at most ``max_connections`` connections are open: a new one beyond the bound closes the
  oldest connection that has no request being answered (idle, or still sending its
  headers) — or itself when every other connection is being answered — so a probe always
  gets a connection while attackers hold half-sent ones.

Slow *bodies* are bounded by the routes (:meth:`~solver.service.app.PlanningService.read_body`).
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import time
from typing import Any

#: Key of ``scope["state"]``: ``time.monotonic()`` when the request's first bytes were
#: read from its connection (before its headers were parsed, and long before its body was
#: read).  The deadlines of the verbs count from it.
FIRST_BYTE = "first-byte"

#: Highest default connection bound.
MAX_DEFAULT_CONNECTIONS = 1024


def default_max_connections() -> int:
    """Half the process's file-descriptor limit (the rest: workers' pipes, logs, the
    listening socket), between 16 and :data:`MAX_DEFAULT_CONNECTIONS`."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_DEFAULT_CONNECTIONS
    return max(16, min(MAX_DEFAULT_CONNECTIONS, soft // 2))


def _busy(protocol: Any) -> bool:
    """The connection has a request whose headers arrived and whose answer is not sent."""
    cycle = getattr(protocol, "cycle", None)
    return cycle is not None and not getattr(cycle, "response_complete", True)


class ConnectionGuard:
    """Header timeout and connection bound for one server.

    Parameters
    ----------
    max_connections
        Open connections at most (0: :func:`default_max_connections`).
    header_timeout
        Seconds a connection may take to send a request's headers.
    """

    def __init__(self, max_connections: int = 0, header_timeout: float = 10.0) -> None:
        self.max_connections = max_connections or default_max_connections()
        self.header_timeout = header_timeout
        #: open connections -> when they last started waiting for headers (oldest first)
        self.open: dict[Any, float] = {}
        self.evicted = 0
        self.timed_out = 0

    def protocol_class(self, base: type[asyncio.Protocol] | None = None
                       ) -> type[asyncio.Protocol]:
        """uvicorn's HTTP protocol class (``base``; default: what ``http="auto"`` picks)
        reporting its connections to this guard; pass it as ``uvicorn.Config(http=...)``."""
        if base is None:
            from uvicorn.protocols.http.auto import AutoHTTPProtocol

            base = AutoHTTPProtocol
        guard = self

        class GuardedHTTPProtocol(base):  # type: ignore[valid-type,misc]
            def connection_made(self, transport: Any) -> None:
                super().connection_made(transport)
                self.first_byte: float | None = None
                self.shared_state: dict[str, Any] = getattr(self, "app_state", {})
                guard.opened(self)

            def data_received(self, data: bytes) -> None:
                # the first bytes of a request: its time goes into the request's
                # ``scope["state"]`` (uvicorn copies ``app_state`` into each scope)
                if self.first_byte is None and not _busy(self):
                    self.first_byte = time.monotonic()
                    self.app_state = {**self.shared_state, FIRST_BYTE: self.first_byte}
                super().data_received(data)
                if _busy(self):  # the request began: the next one is stamped anew
                    self.first_byte = None

            def connection_lost(self, exc: Exception | None) -> None:
                guard.closed(self)
                super().connection_lost(exc)

            def on_response_complete(self) -> None:
                super().on_response_complete()
                guard.waiting(self)

        return GuardedHTTPProtocol

    # ------------------------------------------------------------------ events
    def opened(self, protocol: Any) -> None:
        """A connection opened: bound the count, start its header timer."""
        self.waiting(protocol)
        while len(self.open) > self.max_connections:
            victim = next((p for p in self.open if p is not protocol and not _busy(p)),
                          protocol)
            self.evicted += 1
            self._close(victim)
            if victim is protocol:
                break

    def waiting(self, protocol: Any) -> None:
        """The connection waits for a request's headers (just opened, or answered)."""
        if getattr(protocol, "transport", None) is None:
            return
        since = time.monotonic()
        self.open.pop(protocol, None)
        self.open[protocol] = since  # to the end: the newest waiting connection
        with contextlib.suppress(RuntimeError):  # no running loop: nothing to time
            asyncio.get_running_loop().call_later(self.header_timeout, self._expire,
                                                  protocol, since)

    def closed(self, protocol: Any) -> None:
        """The connection closed."""
        self.open.pop(protocol, None)

    def waiting_count(self) -> int:
        """Open connections with no request being answered."""
        return sum(1 for p in self.open if not _busy(p))

    # ------------------------------------------------------------------ helpers
    def _expire(self, protocol: Any, since: float) -> None:
        if self.open.get(protocol) != since or _busy(protocol):
            return  # closed, answered since, or a request is being answered
        self.timed_out += 1
        self._close(protocol)

    def _close(self, protocol: Any) -> None:
        self.open.pop(protocol, None)
        transport = getattr(protocol, "transport", None)
        if transport is not None and not transport.is_closing():
            transport.close()
