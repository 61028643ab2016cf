"""Every verb body is bounded before it is parsed, and parsed off the event loop: the
value bound of ``prioritize``, ``predicate``, ``allocateFunc`` and ``deallocateFunc``, the
memory of parsing the largest accepted body (counted with tracemalloc, not timed)."""

from __future__ import annotations

import threading
import tracemalloc
from typing import Any

import httpx
import pytest

from solver.service.app import ServiceConfig
from solver.service.extender import ExtenderConfig, routes
from solver.service.extender.protocol import BYTES_PER_VALUE
from solver.service.parsing import BadRequest
from tests.solver.service.conftest import running_server

LIMIT = 50_000


def _dense(values: int) -> bytes:
    """An object of ``values`` empty objects: the most memory per byte a body can ask."""
    return b'{"task":{"x":[' + b"{}," * (values - 1) + b"{}]}}"


@pytest.mark.parametrize("verb", ["prioritize", "predicate", "allocateFunc", "deallocateFunc"])
def test_a_body_above_the_value_bound_is_refused_unparsed(verb: str) -> None:
    config = ServiceConfig(warmup=False, extender=ExtenderConfig(
        engine="greedy", max_verb_values=LIMIT))
    with running_server(config) as (url, _), httpx.Client(timeout=30) as client:
        over = client.post(f"{url}/volcano/{verb}", content=_dense(LIMIT + 10))
        assert over.status_code == 413, over.text
        assert "JSON values" in over.text and str(LIMIT) in over.text
        under = client.post(f"{url}/volcano/{verb}", content=_dense(LIMIT // 2))
        assert under.status_code == 200, under.text
        assert client.post(f"{url}/volcano/{verb}", content=b'{"task": [').status_code == 400


def test_parsing_the_largest_accepted_body_holds_at_most_the_stated_memory() -> None:
    """At the bound, the parse's peak (tracemalloc) stays under values x BYTES_PER_VALUE:
    the figure the docs state for the default bound (2 million values, about 170 MB)."""
    body = _dense(LIMIT)
    tracemalloc.start()
    try:
        parsed = routes.parse_verb_body(body, LIMIT + 5, "predicate")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(parsed["task"]["x"]) == LIMIT
    assert LIMIT * 50 < peak <= LIMIT * BYTES_PER_VALUE, peak
    # above the bound nothing is built: the count is all the work
    over = _dense(LIMIT * 4)
    tracemalloc.start()
    try:
        with pytest.raises(BadRequest) as caught:
            routes.parse_verb_body(over, LIMIT, "predicate")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.status == 413 and peak < 100_000, peak


def test_verb_bodies_are_parsed_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[str] = []
    real = routes.parse_verb_body

    def spy(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(routes, "parse_verb_body", spy)
    config = ServiceConfig(warmup=False, extender=ExtenderConfig(engine="greedy"))
    with running_server(config) as (url, _), httpx.Client(timeout=30) as client:
        for verb in ("predicate", "allocateFunc", "deallocateFunc"):
            assert client.post(f"{url}/volcano/{verb}", content=b'{"task": {}}').status_code \
                == 200
    assert len(threads) == 3 and all(t.startswith("extender-parse") for t in threads), threads
