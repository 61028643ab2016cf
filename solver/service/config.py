"""The settings of one planning service instance (``npu-place serve`` options).

:class:`ServiceConfig` is what :func:`solver.service.app.create_app` builds a service
from; the command line (``solver/cli/serve.py``) fills it from its options.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from solver.service.extender import ExtenderConfig
from solver.service.worker import DEFAULT_SOLVE


@dataclass(frozen=True)
class ServiceConfig:
    """Settings of one service instance (``npu-place serve`` options).

    Attributes
    ----------
    workers
        Solver worker processes (requests solved at once).
    queue
        Solves that may wait for a worker; beyond ``workers + queue`` in flight the
        service answers 503 with ``Retry-After``.  Within that bound, admission is by
        time: a plan is refused at once when its worker is expected (from measured solve
        times) to be busy past its deadline, and withdrawn with a 503 before its
        deadline when it could not start in time.
    max_body_mb
        Largest request body accepted (413 above it).
    default_time_limit
        Time limit of a plan call without ``time-limit``.
    max_time_limit
        Largest ``time-limit`` accepted.
    reply_margin
        Seconds kept before the deadline for serialising and sending the answer.
    max_clusters
        Stored clusters at most.
    warmup
        Workers run a small solve at start-up (``/readyz`` answers 503 until then).
    kill_grace
        A worker still busy this long after an answered request's deadline is killed.
    solve
        ``module:function`` of the facade the workers call (tests name failing ones).
    recycle_after
        Requests a worker serves before it is replaced by a fresh one (0: never).
    token
        Bearer token every route except ``/healthz`` and ``/readyz`` requires
        (:mod:`solver.service.auth`); ``None``: no access control.  Never shown in a repr.
    ssl_certfile, ssl_keyfile
        PEM certificate chain and private key: serve HTTPS (uvicorn's TLS).
    body_timeout
        Seconds from a request's receipt by which its whole body must have arrived (408
        after it; a plan's own deadline comes first when earlier: 503).
    max_connections
        Open connections at most (0: half the process's file-descriptor limit, at most
        1,024).  A new connection beyond it closes the oldest one that has no request
        being answered (idle, or still sending its headers), so probes keep answering.
    header_timeout
        A connection that has not sent a request's headers this long after it opened
        (or after its last answer) is closed.
    validate_time_limit
        Time limit of ``POST /v1/validate`` without ``time-limit``: 503 after it, and its
        worker is killed ``kill_grace`` later if still busy (stored clusters are replayed).
    """

    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1
    queue: int = 8
    max_body_mb: float = 64.0
    default_time_limit: float = 1.0
    max_time_limit: float = 300.0
    reply_margin: float = 0.05
    max_clusters: int = 16
    warmup: bool = True
    graceful_seconds: float = 30.0
    kill_grace: float = 1.0
    solve: str = DEFAULT_SOLVE
    recycle_after: int = 1000
    validate_time_limit: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = 0
    header_timeout: float = 10.0
    token: str | None = field(default=None, repr=False)
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    #: Volcano's extender verbs (:mod:`solver.service.extender`); ``None``: not served
    extender: ExtenderConfig | None = None
    #: ``serve --watch``: keep a stored cluster current from the Kubernetes API
    #: (:class:`solver.service.watcher.WatchConfig`); ``None``: no watch
    watch: Any = None
