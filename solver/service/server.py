"""Running the service on uvicorn, with a graceful SIGTERM.

On SIGTERM (or SIGINT) the service stops accepting connections, ``/readyz`` turns 503,
new plan calls on open connections get 503, and in-flight plan calls answer at once with
greedy's plan when they have it (else at their deadline, never later); uvicorn then waits
for the open responses (at most ``graceful_seconds``) and runs the application's shutdown,
which closes the worker processes' pipes (and kills workers that do not exit).
"""

from __future__ import annotations

from types import FrameType

import uvicorn

from solver.service.app import PlanningService, ServiceConfig, create_app


class _Server(uvicorn.Server):
    """uvicorn's server, telling the service to drain as soon as a signal arrives."""

    def __init__(self, config: uvicorn.Config, service: PlanningService) -> None:
        super().__init__(config)
        self.service = service

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.service.begin_drain()
        super().handle_exit(sig, frame)


def build_server(config: ServiceConfig, log_level: str = "info") -> _Server:
    """A uvicorn server for ``config`` (not started)."""
    app = create_app(config)
    uv = uvicorn.Config(app, host=config.host, port=config.port, log_level=log_level,
                        timeout_graceful_shutdown=int(config.graceful_seconds) or None,
                        access_log=False, server_header=False,
                        # header timeout and connection bound (solver/service/connections.py)
                        http=app.state.service.connections.protocol_class())
    return _Server(uv, app.state.service)
