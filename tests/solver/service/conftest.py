"""Fixtures of the service tests: a real uvicorn server on a free loopback port."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import httpx
import pytest
import uvicorn

from benchmarks.generators import GenParams, generate_case
from models.io import load_scenario
from models.scenario import Scenario
from solver.doors import example_path
from solver.service.app import ServiceConfig, create_app
from solver.service.client import PlanClient
from solver.service.server import listen_socket

#: A request that must not take longer than this in these tests (loaded machine).
HTTP_TIMEOUT = 60.0

#: Allowed lateness of a timed plan request (a shared, loaded 2-core test machine); the
#: service aims at 0 (it answers at the deadline minus a reply margin).
SLACK = 0.35

#: One client for every timed call (a new httpx client per call costs tens of ms of CPU).
TIMED_HTTP = httpx.Client(timeout=HTTP_TIMEOUT)


@contextmanager
def running_server(config: ServiceConfig | None = None) -> Iterator[tuple[str, Any]]:
    """Start the app on uvicorn in a thread (a pre-bound loopback socket); stop it after.

    Yields the base URL and the :class:`~solver.service.app.PlanningService` once its
    worker processes are ready.

    The socket is :func:`~solver.service.server.listen_socket`'s, as ``npu-place serve``
    listens on: created with its resolved protocol (TCP), so that asyncio turns Nagle's
    algorithm off on every accepted connection.  A ``socket.socket(AF_INET,
    SOCK_STREAM)`` has protocol 0, asyncio then leaves Nagle on, and every answer's body
    (written after its headers) waited about 40 ms for the client's delayed ACK.
    """
    config = config or ServiceConfig(warmup=False)
    app = create_app(config)
    sock = listen_socket("127.0.0.1", 0)  # the socket ``npu-place serve`` listens on
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(
        app, log_level="warning", access_log=False, timeout_graceful_shutdown=5,
        http=app.state.service.connections.protocol_class()))  # as build_server does
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    service = app.state.service
    while not server.started or not (service.ready or config.warmup):
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", app.state.service
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()
        assert not thread.is_alive(), "the test server did not stop"


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Any]]:
    """One default server per test module."""
    with running_server(ServiceConfig(warmup=False, workers=2, queue=4)) as running:
        yield running


@pytest.fixture
def client(server: tuple[str, Any]) -> Iterator[PlanClient]:
    """A client of the module's server."""
    with PlanClient(server[0]) as c:
        yield c


@pytest.fixture
def http(server: tuple[str, Any]) -> Iterator[httpx.Client]:
    """A raw HTTP client of the module's server (status codes and bodies as sent)."""
    with httpx.Client(base_url=server[0], timeout=HTTP_TIMEOUT) as raw:
        yield raw


def timed_plan(url: str, content: bytes, **params: Any) -> tuple[httpx.Response, float]:
    """POST ``content`` to ``url``'s ``/v1/plan``; the answer and its wall time."""
    started = time.perf_counter()
    response = TIMED_HTTP.post(url + "/v1/plan", content=content, params=params,
                               headers={"content-type": "application/json"})
    return response, time.perf_counter() - started


def example(name: str = "superpod-850") -> Scenario:
    """A bundled example scenario."""
    return load_scenario(example_path(name))


@cache
def generated(family: str, nodes: int, jobs: int, seed: int = 1) -> Scenario:
    """A generated benchmark scenario (cached per test session)."""
    return generate_case(GenParams(family, nodes=nodes, seed=seed, jobs=jobs)).scenario


def body(scenario: Scenario) -> bytes:
    """The scenario as a JSON request body."""
    return json.dumps(scenario.to_dict()).encode()
