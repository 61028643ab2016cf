"""The service doors under attack: a stored cluster is never corrupted or made
invalid by a delta, and the replay log that rebuilds it after a worker restart is bounded
and exact.  Every test runs against a real server on loopback."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from models.check import check
from models.compiled import compile_scenario
from models.limits import MAX_ERRORS_SHOWN
from models.placement import PlacementFile
from models.scenario import Scenario
from solver.service import cluster_log
from solver.service.app import ServiceConfig
from tests.solver.service.conftest import HTTP_TIMEOUT, example, running_server

# The ``http`` fixture (conftest.py): a raw client of one server for the module (two
# workers, queue 4).


def ordinary(now: bool = True, hog: bool = False) -> dict[str, Any]:
    """The ordinary-8npu example as a dict; ``hog``: a running job holds all of node-4."""
    data = example("ordinary-8npu").to_dict()
    if not now:
        data.pop("now", None)
    if hog:
        data["running"] = [{"name": "hog", "policy": "chip8-node8", "npu-per-task": 8,
                            "ranks": {"0": "node-4"}}]
    return data


def put(http: httpx.Client, name: str, scenario: dict[str, Any]) -> None:
    response = http.put(f"/v1/clusters/{name}", content=json.dumps(scenario))
    assert response.status_code in (200, 201), response.text


def patch(http: httpx.Client, name: str, delta: Any) -> httpx.Response:
    content = delta if isinstance(delta, bytes) else json.dumps(delta)
    return http.patch(f"/v1/clusters/{name}", content=content)


def state(http: httpx.Client, name: str) -> tuple[bytes, dict[str, int], int]:
    """What the home worker holds: the scenario's bytes, the cache states (an empty delta
    answers the worker's own summary) and the version."""
    scenario = http.get(f"/v1/clusters/{name}/scenario")
    assert scenario.status_code == 200, scenario.text
    info = patch(http, name, {})
    assert info.status_code == 200, info.text
    return scenario.content, info.json()["cache-states"], info.json()["version"]


def greedy_plan(http: httpx.Client, name: str) -> list[tuple[str, bool, Any]]:
    """The stored cluster's greedy plan, checked by the validator against the stored
    scenario."""
    response = http.post(f"/v1/clusters/{name}/plan", params={"engine": "greedy",
                                                               "time-limit": 10})
    assert response.status_code == 200, response.text
    placement = PlacementFile.model_validate(response.json())
    stored = Scenario.model_validate(http.get(f"/v1/clusters/{name}/scenario").json())
    assert check(compile_scenario(stored), placement) == []
    return [(j.name, j.placed, j.ranks) for j in placement.jobs]


def full_body_accepted(http: httpx.Client, scenario: bytes) -> bool:
    response = http.post("/v1/validate", content=b'{"scenario": ' + scenario + b"}")
    assert response.status_code == 200, response.text
    return bool(response.json()["valid"])


# --------------------------------------------------------------------------- item 1

_OWNER = "rs-infer-7c9d"  # an owner in the example's cache (rank 0 on node-2)


@pytest.mark.parametrize(("delta", "words"), [
    ({"cache-events": [{"event": "bind", "owner-uid": _OWNER, "rank": 70000,
                        "node": "node-0"}]}, ["cache-events", "rank"]),
    ({"cache-events": [{"event": "bind", "owner-uid": _OWNER, "rank": 1e18,
                        "node": "node-0"}]}, ["cache-events", "rank"]),
    ({"cache-events": [{"event": "bind", "owner-uid": "evil\x1b[31m", "rank": 0,
                        "node": "node-0"}]}, ["cache-events", "owner-uid", "\\x1b"]),
    ({"cache-events": [{"event": "bind", "owner-uid": "o" * 300, "rank": 0,
                        "node": "node-0"}]}, ["cache-events", "owner-uid", "253"]),
    ({"now": 1e15, "cache-events": [{"event": "bind", "owner-uid": _OWNER, "rank": 0,
                                     "node": "node-0"}]}, ["now"]),
    ({"cache-events": [{"event": "bind", "owner-uid": _OWNER, "rank": 0, "node": "node-0"},
                       {"event": "bind", "owner-uid": _OWNER, "rank": 1, "node": "nope"}]},
     ["cache-events[1].node", "nope"]),
], ids=["rank-70000", "rank-1e18", "escape-owner", "long-owner", "now-1e15-bind",
        "bind-then-bad-bind"])
def test_a_refused_delta_leaves_the_cluster_byte_identical(
        http: httpx.Client, delta: dict[str, Any], words: list[str]) -> None:
    name = "atomic"
    put(http, name, ordinary())
    before = state(http, name)
    plan_before = greedy_plan(http, name)
    response = patch(http, name, delta)
    assert response.status_code == 422, response.text
    text = " ".join(response.json()["messages"])
    assert all(w in text for w in words), text
    assert "Traceback" not in text and "\x1b" not in text
    assert state(http, name) == before
    # the next delta with a cache event is accepted and does not carry the refused one
    ok = patch(http, name, {"cache-events": [{"event": "refresh", "owner-uid": "nobody"}]})
    assert ok.status_code == 200, ok.text
    assert ok.json()["cache-states"] == before[1]
    assert greedy_plan(http, name) == plan_before


# --------------------------------------------------------------------------- item 2


@pytest.mark.parametrize(("delta", "words"), [
    ({"node-updates": [{"name": "node-0", "npus": 100000}]}, ["node-updates[0]", "npus"]),
    ({"node-updates": [{"name": "node-0", "labels": {"a": "b\x1b[2J"}}]},
     ["node-updates[0]", "labels", "\\x1b"]),
    ({"node-updates": [{"name": "node-0", "labels": {f"k{i}": "v" for i in range(1000)}}]},
     ["node-updates[0]", "labels", "256"]),
    ({"node-updates": [{"name": "node-0", "labels": {"k": "v" * 5000}}]},
     ["node-updates[0]", "labels", "1024"]),
    ({"now": -5}, ["now"]),
    ({"now": 1e15}, ["now"]),
    ({"node-updates": [{"name": "node-0", "super-pod-id": 2**40}]},
     ["node-updates[0]", "super-pod-id"]),
    ({"node-updates": [{"name": "node-0", "rack-id": 2**40}]},
     ["node-updates[0]", "rack-id"]),
    ({"node-updates": [{"name": "node-0", "labels": {"k": {"nested": 1}}}]},
     ["node-updates[0]", "labels", "mapping"]),
    ({"nodes-removed": ["node-\x1b"]}, ["nodes-removed"]),
    ({"node-updates": [{"name": "node-0", "free": None}]}, ["node-updates[0].free"]),
    ({"node-updates": [{"name": "node-0", "health": None}]}, ["node-updates[0].health"]),
    ({"node-updates": [{"name": "node-0", "npus": None}]}, ["node-updates[0].npus"]),
], ids=["npus", "label-escape", "1000-labels", "long-label", "now-negative", "now-1e15",
        "super-pod-id-2^40", "rack-id-2^40", "label-mapping", "removed-escape", "free-null",
        "health-null", "npus-null"])
def test_a_delta_is_held_to_the_full_body_bounds(
        http: httpx.Client, delta: dict[str, Any], words: list[str]) -> None:
    name = "bounds"
    put(http, name, ordinary())
    before = state(http, name)
    response = patch(http, name, delta)
    assert response.status_code == 422, response.text
    text = " ".join(response.json()["messages"])
    assert all(w in text for w in words), text
    assert "\x1b" not in text
    assert state(http, name) == before
    assert full_body_accepted(http, before[0])


def test_accepted_deltas_keep_a_scenario_the_full_body_route_accepts(
        http: httpx.Client) -> None:
    name = "bounds-ok"
    put(http, name, ordinary())
    for delta in ({"node-updates": [{"name": "node-0", "labels": {"zone": 7, "gpu": True}}]},
                  {"node-updates": [{"name": "node-1", "super-pod-id": -3, "npus": 16,
                                     "free": 16}]},
                  {"now": 10**11, "cache-events": [{"event": "bind", "owner-uid": "u" * 253,
                                                    "rank": 65535, "node": "node-3"}]}):
        response = patch(http, name, delta)
        assert response.status_code == 200, response.text
        scenario = http.get(f"/v1/clusters/{name}/scenario").content
        assert full_body_accepted(http, scenario)
        planned = http.post("/v1/plan", content=scenario, params={"engine": "greedy"})
        assert planned.status_code == 200, planned.text
    stored = Scenario.model_validate_json(scenario)
    assert stored.nodes[0].labels == {"zone": "7", "gpu": "True"}  # as in a full body


# --------------------------------------------------------------------------- item 3


def test_the_values_tier_keeps_the_running_jobs_rule(http: httpx.Client) -> None:
    name = "hogged"
    put(http, name, ordinary(hog=True))
    before = state(http, name)
    response = patch(http, name, {"node-updates": [{"name": "node-4", "free": 8}]})
    assert response.status_code == 422, response.text
    text = " ".join(response.json()["messages"])
    assert "node-updates[0].free" in text and "running" in text, text
    assert state(http, name) == before
    # the same state as a full body is refused by the same rule
    as_full = ordinary(hog=True)
    as_full["nodes"][4]["free"] = 8
    refused = http.post("/v1/plan", content=json.dumps(as_full), params={"engine": "greedy"})
    assert refused.status_code == 422 and "running" in refused.text
    # feasible side: the hog's node may change health (values tier), and a free node may
    # change free; the plan never puts a rank on node-4
    ok = patch(http, name, {"node-updates": [{"name": "node-4", "health": "subhealthy"},
                                             {"name": "node-0", "free": 4}]})
    assert ok.status_code == 200 and ok.json()["last-update"] == "values", ok.text
    for job, placed, ranks in greedy_plan(http, name):
        assert "node-4" not in (ranks or {}).values(), (job, placed, ranks)


# --------------------------------------------------------------------------- items 5, 9


def _wait(condition: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _kill_home_worker(service: Any, name: str) -> None:
    """Kill the cluster's worker process (as the OOM killer would) and wait for the
    replacement to have replayed its clusters."""
    pool = service.pool
    home = pool.clusters[name].home
    old = pool.workers[home]
    restarts = pool.restarts
    old.process.kill()
    _wait(lambda: pool.restarts > restarts and pool.workers[home] is not old)
    _wait(lambda: pool.workers[home].ready and pool.workers[home].current is None
          and not pool.workers[home].queue)


def _session_delta(i: int) -> dict[str, Any]:
    """A session's delta: bind, keep and roll back cache entries, move free chips."""
    node = f"node-{i % 4}"
    events: list[dict[str, Any]] = [
        {"event": "bind", "owner-uid": f"owner-{i % 9}", "rank": i % 5, "node": node}]
    if i % 3 == 0:
        events.append({"event": "evict", "owner-uid": f"owner-{(i + 4) % 9}",
                       "rank": (i + 1) % 5})
    if i % 7 == 0:
        events.append({"event": "discard", "owner-uid": f"owner-{i % 9}", "rank": i % 5})
    if i % 11 == 0:
        events.append({"event": "delete-owner", "owner-uid": f"owner-{(i + 2) % 9}"})
    return {"node-updates": [{"name": "node-5", "free": i % 9}], "cache-events": events}


@pytest.mark.parametrize("sessions", [5, 70])
def test_a_restarted_worker_rebuilds_the_cluster_exactly(sessions: int) -> None:
    with running_server(ServiceConfig(warmup=False)) as (url, service), \
            httpx.Client(base_url=url, timeout=HTTP_TIMEOUT) as http:
        put(http, "plain", ordinary(now=False))  # no `now`: cache events use the clock
        put(http, "timed", ordinary(now=True))
        for i in range(sessions):
            for name in ("plain", "timed"):
                response = patch(http, name, _session_delta(i))
                assert response.status_code == 200, response.text
            if i == 2:
                time.sleep(1.1)  # a replay at another second must not re-stamp entries
        record = service.pool.clusters["plain"]
        if sessions >= cluster_log.COMPACT_EVERY:
            _wait(lambda: not record.compacting)
            assert record.base_states is not None and len(record.deltas) < sessions
        before = {name: state(http, name) for name in ("plain", "timed")}
        plans = {name: greedy_plan(http, name) for name in ("plain", "timed")}
        assert len(before["plain"][1]) >= 2  # several lifecycle states to keep
        time.sleep(1.1)
        _kill_home_worker(service, "plain")
        for name in ("plain", "timed"):
            assert state(http, name) == before[name]
            assert greedy_plan(http, name) == plans[name]


def test_the_replay_log_keeps_compact_deltas_bounded_in_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_log, "COMPACT_BYTES", 4096)
    with running_server(ServiceConfig(warmup=False, max_body_mb=4)) as (url, service), \
            httpx.Client(base_url=url, timeout=HTTP_TIMEOUT) as http:
        padding = b" " * (3 * 1024 * 1024)  # 3 MB of whitespace around a tiny body
        response = http.put("/v1/clusters/c", content=padding + json.dumps(ordinary()).encode())
        assert response.status_code == 201, response.text
        record = service.pool.clusters["c"]
        _wait(lambda: not record.compacting)
        assert len(record.base) < 10_000 and record.base_states is not None
        for i in range(6):
            body = padding + json.dumps({"node-updates": [
                {"name": "node-0", "free": i}]}).encode() + padding[:1024]
            assert patch(http, "c", body).status_code == 200
        assert 0 < record.log_bytes < 1024  # the compact form, not 6 x 3 MB
        assert all(len(delta) < 100 for delta, _ in record.deltas)
        # deltas of real size: the log is compacted whenever it passes the byte bound
        big = {"jobs-submitted": [{"name": f"j{k}", "policy": "chip8-node8", "tasks": 1,
                                   "npu-per-task": 8} for k in range(40)]}
        peak = 0
        for i in range(12):
            big_delta: dict[str, Any] = (
                {"jobs-removed": [f"j{k}" for k in range(40)]} if i % 2 else big)
            assert patch(http, "c", big_delta).status_code == 200
            _wait(lambda: not record.compacting)
            peak = max(peak, record.log_bytes)
        assert peak < 4096 + 4096  # below the bound plus one delta
        before = state(http, "c")
        _kill_home_worker(service, "c")
        assert state(http, "c") == before


# --------------------------------------------------------------------------- item 8


def test_a_worker_killed_mid_solve_answers_greedy_labelled_and_counted() -> None:
    scenario = example("superpod-850")
    problem = compile_scenario(scenario)
    config = ServiceConfig(warmup=False, solve="tests.solver.service.faults:die_in_full_solve")
    with running_server(config) as (url, service), \
            httpx.Client(base_url=url, timeout=HTTP_TIMEOUT) as http:
        response = http.post("/v1/plan", content=json.dumps(scenario.to_dict()),
                             params={"engine": "auto", "time-limit": 20})
        assert response.status_code == 200, response.text
        assert response.headers["x-plan-source"] == "greedy-fallback"
        placement = PlacementFile.model_validate(response.json())
        assert placement.engine == "greedy" and check(problem, placement) == []
        assert any("full solve failed" in note and "the fallback plan (greedy)" in note
                   for note in placement.notes), placement.notes
        metrics = http.get("/metrics").text
        assert "npu_place_solve_errors_total 1.0" in metrics
        assert 'source="greedy-fallback"' in metrics
        _wait(lambda: service.pool.restarts == 1 and service.pool.ready)
        # a greedy-only plan is the answer asked for: labelled solve, no error counted
        response = http.post("/v1/plan", content=json.dumps(scenario.to_dict()),
                             params={"engine": "greedy", "time-limit": 20})
        assert response.headers["x-plan-source"] == "solve"
        assert "npu_place_solve_errors_total 1.0" in http.get("/metrics").text


# --------------------------------------------------------------------------- item 4


def test_max_clusters_holds_under_concurrent_puts() -> None:
    content = json.dumps(ordinary()).encode()
    config = ServiceConfig(warmup=False, workers=2, max_clusters=4)
    with running_server(config) as (url, service), \
            httpx.Client(base_url=url, timeout=HTTP_TIMEOUT,
                         limits=httpx.Limits(max_connections=32)) as http:

        def store(name: str) -> int:
            return http.put(f"/v1/clusters/{name}", content=content).status_code

        with ThreadPoolExecutor(16) as pool:
            codes = list(pool.map(store, [f"race-{i}" for i in range(32)]))
        assert sorted(set(codes)) == [201, 507], codes
        assert codes.count(201) == 4 and len(service.pool.clusters) == 4
        assert "npu_place_clusters 4.0" in http.get("/metrics").text
        stored = sorted(service.pool.clusters)
        assert store(stored[0]) == 200  # replacing a stored cluster is always allowed
        assert store("one-more") == 507
        assert http.delete(f"/v1/clusters/{stored[0]}").status_code == 204
        assert store("one-more") == 201
        assert len(service.pool.clusters) == 4


# --------------------------------------------------------------------------- item 6


def _half_sent(port: int, head: bytes = b"POST /v1/plan HTTP/1.1\r\nHost: x\r\n") -> socket.socket:
    """A connection that sends part of a request's headers and stalls."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(head)
    return sock


def _closed_by_server(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``sock`` within ``seconds`` (reads what it sends)."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if sock.recv(65536) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:  # reset by the server
            return True
    return False


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_a_trickled_body_gets_its_answer_by_the_plans_deadline() -> None:
    content = json.dumps(ordinary()).encode()
    config = ServiceConfig(warmup=False, body_timeout=30)
    with running_server(config) as (url, _):
        sock = socket.create_connection(("127.0.0.1", _port(url)), timeout=10)
        sock.sendall(b"POST /v1/plan?engine=greedy&time-limit=1 HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\n"
                     b"Content-Length: " + str(len(content)).encode() + b"\r\n\r\n")
        started = time.monotonic()
        sent = 0
        answer = b""
        sock.settimeout(0.01)
        # 50 bytes every 0.1 s: the whole body would take many seconds
        while sent < len(content) and time.monotonic() - started < 20:
            with contextlib.suppress(OSError):
                sock.sendall(content[sent:sent + 50])
            sent += 50
            try:
                answer += sock.recv(65536)
            except TimeoutError:
                pass
            except OSError:
                break
            if b"\r\n\r\n" in answer:
                break
            time.sleep(0.1)
        elapsed = time.monotonic() - started
        sock.close()
        assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
        assert b"time limit passed while reading the body" in answer
        assert sent < len(content)  # answered while the body was still arriving
        assert elapsed < 1.0 + 2.0, elapsed  # at its deadline, with a loaded-machine margin
        assert 'reason="slow-body"' in httpx.get(url + "/metrics").text


def test_a_slow_body_without_a_deadline_gets_408() -> None:
    config = ServiceConfig(warmup=False, body_timeout=0.5)
    with running_server(config) as (url, _):
        put_ok = httpx.put(url + "/v1/clusters/c", content=json.dumps(ordinary()), timeout=30)
        assert put_ok.status_code == 201
        sock = socket.create_connection(("127.0.0.1", _port(url)), timeout=10)
        sock.sendall(b"PATCH /v1/clusters/c HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                     b"\r\n{")
        sock.settimeout(10)
        answer = sock.recv(65536)
        sock.close()
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]


def test_half_sent_connections_time_out_and_are_bounded_and_probes_answer() -> None:
    config = ServiceConfig(warmup=False, max_connections=16, header_timeout=60)
    with running_server(config) as (url, service):
        port = _port(url)
        guard = service.connections
        stalled = [_half_sent(port) for _ in range(60)]
        try:
            with httpx.Client(base_url=url, timeout=10) as http:
                for _ in range(5):  # each probe gets in by closing a stalled connection
                    assert http.get("/healthz").status_code == 200
                    assert len(guard.open) <= 16
            assert guard.evicted >= 60 - 16
            metrics = httpx.get(url + "/metrics", timeout=10).text
            assert f"npu_place_connections_evicted {float(guard.evicted)}" in metrics
            closed = sum(_closed_by_server(sock, 0.2) for sock in stalled)
            assert closed >= 60 - 16
        finally:
            for sock in stalled:
                sock.close()
    short = ServiceConfig(warmup=False, header_timeout=0.5)
    with running_server(short) as (url, service):
        sock = _half_sent(_port(url))
        try:
            assert _closed_by_server(sock, 20)
            assert service.connections.timed_out == 1
            assert "npu_place_connections_timed_out 1.0" in httpx.get(url + "/metrics").text
        finally:
            sock.close()


def test_a_request_being_answered_is_never_evicted() -> None:
    content = json.dumps(ordinary()).encode()
    config = ServiceConfig(warmup=False, max_connections=8, header_timeout=60,
                           solve="tests.solver.service.faults:slow_greedy")
    with running_server(config) as (url, service):
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(httpx.post, url + "/v1/plan", content=content,
                                 params={"engine": "greedy", "time-limit": 20}, timeout=60)
            _wait(lambda: service.pool.in_flight == 1)
            stalled = [_half_sent(_port(url)) for _ in range(40)]
            try:
                response = future.result(timeout=60)
            finally:
                for sock in stalled:
                    sock.close()
        assert response.status_code == 200, response.text
        assert response.headers["x-plan-source"] == "solve"


# --------------------------------------------------------------------------- item 7


def test_validate_caps_its_messages(http: httpx.Client) -> None:
    data = ordinary()
    for i, node in enumerate(data["nodes"]):
        node.update({f"colour{k}": i for k in range(10)})  # 120 unknown fields
    response = http.post("/v1/validate", json={"scenario": data})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["valid"] is False and answer["errors-total"] == 120
    assert len(answer["errors"]) == MAX_ERRORS_SHOWN + 1
    assert answer["errors"][-1] == "... and 70 more error(s) not shown"
    keys = {f"k{i}": 0 for i in range(200_000)}
    response = http.post("/v1/validate", content=json.dumps({"scenario": ordinary()} | keys))
    assert response.status_code == 422
    assert len(response.content) < 20_000
    assert response.json()["messages"][-1] == \
        f"... and {200_000 - MAX_ERRORS_SHOWN} more error(s) not shown"
    bad = {"jobs": [{"name": "j", "ranks": {str(r): f"node-{r % 12}" for r in range(400)},
                     "placed": True}], "engine": "greedy", "status": "greedy"}
    response = http.post("/v1/validate", json={"scenario": ordinary(), "placement": bad})
    assert response.status_code in (200, 422), response.text
    assert len(response.content) < 40_000


def test_validate_is_bounded_in_time_and_spares_stored_clusters() -> None:
    keys = json.dumps({f"k{i}": {"a": [i, i, i]} for i in range(300_000)}).encode()
    content = b'{"scenario": ' + keys + b"}"
    config = ServiceConfig(warmup=False, kill_grace=0.2, validate_time_limit=0.05)
    with running_server(config) as (url, service), \
            httpx.Client(base_url=url, timeout=HTTP_TIMEOUT) as http:
        put(http, "kept", ordinary(now=False))
        assert patch(http, "kept", _session_delta(1)).status_code == 200
        before = state(http, "kept")
        response = http.post("/v1/validate", content=content)
        assert response.status_code == 503, response.text[:300]
        assert response.headers["retry-after"] == "1"
        _wait(lambda: service.pool.in_flight == 0)
        # the worker that overran was killed and replaced; the stored cluster is intact
        assert service.pool.killed == 1
        assert state(http, "kept") == before
        assert greedy_plan(http, "kept")
        fast = http.post("/v1/validate", params={"time-limit": 30},
                         json={"scenario": ordinary()})
        assert fast.status_code == 200 and fast.json()["valid"] is True


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _limit_descriptors() -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


def test_probes_answer_with_256_descriptors_and_300_half_sent_connections(
        tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1024 and (hard == resource.RLIM_INFINITY or hard >= 1024):
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    elif soft < 1024:
        pytest.skip("this process may not open 300 connections")
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "solver.cli", "serve", "--port", str(port),
                             "--workers", "1", "--log-level", "warning"],
                            stdout=log, stderr=subprocess.STDOUT, env=env,
                            preexec_fn=_limit_descriptors)
    url = f"http://127.0.0.1:{port}"
    stalled: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                    break
            assert time.monotonic() < deadline
            time.sleep(0.1)
        for _ in range(300):
            with contextlib.suppress(OSError):
                stalled.append(_half_sent(port))
        for _ in range(5):
            assert httpx.get(url + "/healthz", timeout=10).status_code == 200
        descriptors = len(os.listdir(f"/proc/{proc.pid}/fd"))
        assert descriptors < 256, descriptors  # room left: the bound is half the limit
        assert proc.poll() is None
    finally:
        for sock in stalled:
            sock.close()
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
