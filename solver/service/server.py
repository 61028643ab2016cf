"""Running the service on uvicorn, with a graceful SIGTERM.

On SIGTERM (or SIGINT) the service stops accepting connections, ``/readyz`` turns 503,
new plan calls on open connections get 503, and in-flight plan calls answer at once with
greedy's plan when they have it (else at their deadline, never later); uvicorn then waits
for the open responses (at most ``graceful_seconds``) and runs the application's shutdown,
which closes the worker processes' pipes (and kills workers that do not exit).  After a
SIGTERM the process exits with status 0 (:func:`run_server`).
"""

from __future__ import annotations

import signal
import socket
from types import FrameType

import uvicorn

from solver.service.app import PlanningService, ServiceConfig, create_app


class _Server(uvicorn.Server):
    """uvicorn's server, telling the service to drain as soon as a signal arrives."""

    def __init__(self, config: uvicorn.Config, service: PlanningService) -> None:
        super().__init__(config)
        self.service = service

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's start-up; with a socket bound beforehand (:func:`listen_socket`) it
        still logs where it serves ("Uvicorn running on http(s)://host:port"), as it does
        when it binds the socket itself."""
        await super().startup(sockets)
        if sockets and not self.should_exit:
            self._log_started_message(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.service.begin_drain()
        super().handle_exit(sig, frame)


def build_server(config: ServiceConfig, log_level: str = "info") -> _Server:
    """A uvicorn server for ``config`` (not started)."""
    app = create_app(config)
    uv = uvicorn.Config(app, host=config.host, port=config.port, log_level=log_level,
                        timeout_graceful_shutdown=int(config.graceful_seconds) or None,
                        access_log=False, server_header=False,
                        ssl_certfile=config.ssl_certfile, ssl_keyfile=config.ssl_keyfile,
                        # header timeout and connection bound (solver/service/connections.py)
                        http=app.state.service.connections.protocol_class())
    return _Server(uv, app.state.service)


def _drained(sig: int, frame: FrameType | None) -> None:
    """SIGTERM after the drain: nothing left to do (the process then exits with 0)."""


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0: any free one).

    Bound before uvicorn starts, so that a port in use or an address this machine does
    not have is the command line's clear error (exit 2) instead of uvicorn's log line and
    exit 3, and the socket uvicorn serves is the one that was checked.

    Raises
    ------
    OSError
        When the address cannot be resolved or bound.
    """
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def run_server(server: _Server, sock: socket.socket | None = None) -> int:
    """Serve until SIGTERM (or SIGINT); return exit status 0 after a graceful drain.

    uvicorn re-raises a captured signal once it has shut down, with the handler that was
    installed before it started: with the default handler a drained SIGTERM would end
    the process with status -15, which orchestrators report as a failure.  Installing a
    handler that does nothing for that re-raise makes a drained shutdown exit with 0.
    SIGINT keeps its default (``KeyboardInterrupt``, status 130 from the command line).
    """
    previous = signal.signal(signal.SIGTERM, _drained)
    try:
        server.run(sockets=None if sock is None else [sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0
