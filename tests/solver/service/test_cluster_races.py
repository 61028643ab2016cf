"""Stored clusters under concurrent PUT, DELETE, PATCH and plan.

The serving process keeps a record of every stored cluster (to answer GET and to replay
the cluster into a restarted worker); the cluster itself lives in its home worker.  Both
must agree on which names exist whatever the order requests arrive in, and a deleted
cluster must never come back when a worker is restarted.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import httpx
import numpy as np
import pytest

from solver.service.app import ServiceConfig
from tests.solver.service.conftest import example, running_server

SCENARIO = example("ordinary-8npu").to_dict()
NODE = SCENARIO["nodes"][0]["name"]


def _status(http: httpx.Client, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return http.request(method, path, timeout=60, **kwargs)


def _views(http: httpx.Client, name: str) -> dict[str, int]:
    """What every route says about ``name``: the status of GET info, GET scenario, an
    empty PATCH and a greedy plan."""
    base = f"/v1/clusters/{name}"
    return {
        "info": _status(http, "GET", base).status_code,
        "scenario": _status(http, "GET", f"{base}/scenario").status_code,
        "patch": _status(http, "PATCH", base, json={}).status_code,
        "plan": _status(http, "POST", f"{base}/plan",
                        params={"engine": "greedy", "time-limit": 20}).status_code,
    }


def _agreeing(http: httpx.Client, service: Any, names: list[str]) -> set[str]:
    """The names stored; fails unless every route agrees for every name, the serving
    process's records are exactly those names, and GET's version is the worker's."""
    present = set()
    for name in names:
        views = _views(http, name)
        assert set(views.values()) in ({200}, {404}), (name, views)
        if views["info"] == 200:
            present.add(name)
            info = _status(http, "GET", f"/v1/clusters/{name}").json()
            dumped = _status(http, "GET", f"/v1/clusters/{name}/scenario")
            assert dumped.headers["X-Cluster-Version"] == str(info["version"]), name
    assert set(service.pool.clusters) & set(names) == present
    return present


def _restart_workers(service: Any) -> None:
    """Kill every worker process (as the OOM killer would) and wait for the new ones."""
    pool = service.pool
    before = pool.restarts
    for worker in list(pool.workers):
        os.kill(worker.process.pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while pool.restarts < before + len(pool.workers) or not pool.ready or pool.in_flight:
        assert time.monotonic() < deadline, "the workers did not come back"
        time.sleep(0.05)


def _wait_until(check: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_delete_behind_a_queued_put_leaves_no_ghost() -> None:
    """The race: one worker busy with a plan, a second PUT of ``c`` queued
    behind it, then DELETE ``c``: afterwards ``c`` is gone everywhere, also after a worker
    restart."""
    config = ServiceConfig(warmup=False, workers=1, queue=8,
                           solve="tests.solver.service.faults:slow_greedy")
    with running_server(config) as (url, service), httpx.Client(base_url=url) as http:
        assert _status(http, "PUT", "/v1/clusters/c", json=SCENARIO).status_code == 201
        worker = service.pool.workers[0]
        answers: dict[str, int] = {}

        def call(key: str, method: str, path: str, **kwargs: Any) -> None:
            with httpx.Client(base_url=url) as own:
                answers[key] = _status(own, method, path, **kwargs).status_code

        busy = threading.Thread(target=call, args=(
            "plan", "POST", "/v1/clusters/c/plan"), kwargs={"params": {
                "engine": "greedy", "time-limit": 30}})
        busy.start()
        _wait_until(lambda: worker.current is not None, "the plan did not start")
        put = threading.Thread(target=call, args=("put", "PUT", "/v1/clusters/c"),
                               kwargs={"json": SCENARIO})
        put.start()
        _wait_until(lambda: len(worker.queue) == 1, "the second PUT was not queued")
        assert _status(http, "DELETE", "/v1/clusters/c").status_code == 204
        busy.join(60)
        put.join(60)
        assert answers == {"plan": 200, "put": 200}
        assert _views(http, "c") == dict.fromkeys(("info", "scenario", "patch", "plan"), 404)
        assert "c" not in service.pool.clusters
        _restart_workers(service)
        assert _views(http, "c") == dict.fromkeys(("info", "scenario", "patch", "plan"), 404)
        # the name's versions still go on: the queued PUT stored version 2, deleted
        assert _status(http, "PUT", "/v1/clusters/c", json=SCENARIO).json()["version"] == 3


def _random_operations(url: str, names: list[str], seed: int, count: int) -> list[int]:
    """``count`` random PUT/DELETE/PATCH/plan/GET calls on ``names`` from 6 threads;
    returns every status seen."""
    statuses: list[int] = []
    lock = threading.Lock()
    per_thread = count // 6

    def run(thread: int) -> None:
        rng = np.random.default_rng([seed, thread])
        with httpx.Client(base_url=url) as http:
            for _ in range(per_thread):
                name = names[int(rng.integers(len(names)))]
                base = f"/v1/clusters/{name}"
                op = rng.choice(["put", "put", "delete", "delete", "patch", "plan", "get"])
                if op == "put":
                    response = _status(http, "PUT", base, json=SCENARIO)
                elif op == "delete":
                    response = _status(http, "DELETE", base)
                elif op == "patch":
                    health = str(rng.choice(["healthy", "subhealthy"]))
                    response = _status(http, "PATCH", base, json={
                        "node-updates": [{"name": NODE, "health": health}]})
                elif op == "plan":
                    response = _status(http, "POST", f"{base}/plan",
                                       params={"engine": "greedy", "time-limit": 20})
                else:
                    response = _status(http, "GET", f"{base}/scenario")
                with lock:
                    statuses.append(response.status_code)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
        assert not thread.is_alive(), "a client thread did not finish"
    return statuses


@pytest.mark.parametrize("workers", [1, 2])
def test_random_races_leave_routes_and_workers_agreeing(workers: int) -> None:
    """Four seeds of 60 concurrent operations on 3 names (plans take 0.05 s, so requests
    queue behind each other): afterwards every route agrees for every name, and again
    after every worker was killed and its clusters replayed."""
    config = ServiceConfig(warmup=False, workers=workers, queue=64, max_clusters=64,
                           solve="tests.solver.service.faults:sleepy_greedy")
    with running_server(config) as (url, service), httpx.Client(base_url=url) as http:
        for seed in range(4):
            names = [f"s{seed}-{k}" for k in range(3)]
            statuses = _random_operations(url, names, seed, 60)
            # 503: a plan refused because its worker is expected to be busy past its limit
            assert set(statuses) <= {200, 201, 204, 404, 503}, sorted(set(statuses))
            present = _agreeing(http, service, names)
            _restart_workers(service)
            assert _agreeing(http, service, names) == present, seed
            for name in present:
                assert _status(http, "DELETE", f"/v1/clusters/{name}").status_code == 204
