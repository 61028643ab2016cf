"""The version a stored-cluster plan names (``X-Cluster-Version``) is the version the plan
is valid for.

The worker plans one snapshot of the cluster; a delta applied after that snapshot (the
next ``PATCH``, answered right after the plan in the same worker) must not relabel the
answer.  A daemon that trusts the header would otherwise apply a plan to a cluster it
was not made for.
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

import httpx
import numpy as np

from heuristics.lifecycle import CacheLifecycle
from models.check import check
from models.compiled import compile_scenario
from models.io import scenario_from_data
from models.placement import PlacementFile
from solver.service.app import ServiceConfig
from solver.service.state import ClusterDelta, apply_delta
from tests.solver.service.conftest import example, running_server

SCENARIO = example("ordinary-8npu").to_dict()
#: every node's ``free`` at PUT; a delta lowers or restores it (always a valid delta)
FREE = {node["name"]: int(node["free"]) for node in SCENARIO["nodes"]}


def _violations(scenario: dict[str, Any], placement: dict[str, Any]) -> list[Any]:
    """The validator's violations of ``placement`` against ``scenario``."""
    problem = compile_scenario(scenario_from_data(scenario, "version"))
    return check(problem, PlacementFile.model_validate(placement))


def _applied(scenario: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    """``delta`` applied to ``scenario`` as the service applies it."""
    problem = compile_scenario(scenario_from_data(scenario, "version"))
    lifecycle = CacheLifecycle.from_model(problem.scenario.affinity_cache)
    return apply_delta(problem, lifecycle, ClusterDelta.model_validate(delta)).scenario.to_dict()


def test_a_delta_applied_between_the_workers_answer_and_the_response_keeps_the_version(
) -> None:
    """Deterministic form of the race: a ``PATCH`` that takes every free chip is applied
    after the worker's plan answer and before the response is built.  The plan names the
    version it was made for (valid there), not the one after the delta (where it
    overcommits every node it uses)."""
    with running_server(ServiceConfig(warmup=False, workers=1)) as (url, service), \
            httpx.Client(base_url=url, timeout=60) as http:
        put = http.put("/v1/clusters/c", json=SCENARIO)
        assert put.status_code == 201
        planned_version = put.json()["version"]
        pool = service.pool
        take_all = {"node-updates": [{"name": name, "free": 0} for name in FREE]}
        plan_of_pool = pool.plan

        async def plan_then_patch(**kwargs: Any) -> Any:
            outcome = await plan_of_pool(**kwargs)
            await pool.patch_cluster("c", httpx.Request("PATCH", "/", json=take_all).read())
            return outcome

        pool.plan = plan_then_patch  # type: ignore[method-assign]
        try:
            answer = http.post("/v1/clusters/c/plan", params={"engine": "greedy",
                                                              "time-limit": 20})
        finally:
            del pool.plan  # the class's method again
        assert answer.status_code == 200
        placement = answer.json()
        assert any(job["placed"] for job in placement["jobs"])
        assert http.get("/v1/clusters/c").json()["version"] == planned_version + 1
        assert answer.headers["X-Cluster-Version"] == str(planned_version)
        assert _violations(SCENARIO, placement) == []
        # the test can fail: the plan is not valid for the version after the delta
        assert _violations(_applied(SCENARIO, take_all), placement) != []


class _History:
    """Every scenario the test's clusters held, by ``(name, version)``, as the replies
    of the service told the clients (a ``PATCH`` with ``expect-version`` names the exact
    scenario it was applied to)."""

    def __init__(self) -> None:
        self.scenarios: dict[tuple[str, int], dict[str, Any]] = {}
        self.latest: dict[str, int] = {}
        self.lock = threading.Lock()

    def record(self, name: str, version: int, scenario: dict[str, Any]) -> None:
        with self.lock:
            self.scenarios[(name, version)] = scenario
            self.latest[name] = max(version, self.latest.get(name, 0))

    def newest(self, name: str) -> tuple[int, dict[str, Any]] | None:
        with self.lock:
            version = self.latest.get(name)
            if version is None:
                return None
            return version, self.scenarios[(name, version)]


def _race(url: str, names: list[str], seed: int, operations: int, seconds: float,
          history: _History, plans: list[tuple[str, int, dict[str, Any]]]) -> set[int]:
    """Random PUT/DELETE/PATCH/plan calls on ``names`` from 6 threads, each bounded by
    ``operations`` calls and ``seconds``; every plan answer is kept with the version it
    names.  Returns the statuses seen."""
    statuses: set[int] = set()
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def run(thread: int) -> None:
        rng = np.random.default_rng([seed, thread])
        with httpx.Client(base_url=url, timeout=60) as http:
            for _ in range(operations):
                if time.monotonic() > stop_at:
                    return
                name = names[int(rng.integers(len(names)))]
                base = f"/v1/clusters/{name}"
                op = str(rng.choice(["put", "delete", "patch", "patch", "patch",
                                     "plan", "plan", "plan"]))
                if op == "put":
                    response = http.put(base, json=SCENARIO)
                    if response.status_code in (200, 201):
                        history.record(name, response.json()["version"],
                                       copy.deepcopy(SCENARIO))
                elif op == "delete":
                    response = http.delete(base)
                elif op == "patch":
                    newest = history.newest(name)
                    if newest is None:
                        continue
                    version, scenario = newest
                    chosen = rng.choice(list(FREE), size=3, replace=False)
                    delta = {"expect-version": version, "node-updates": [
                        {"name": str(node), "free": int(rng.integers(FREE[str(node)] + 1))}
                        for node in chosen]}
                    response = http.patch(base, json=delta)
                    if response.status_code == 200:
                        after = response.json()["version"]
                        if after != version:
                            history.record(name, after, _applied(scenario, delta))
                else:
                    response = http.post(f"{base}/plan",
                                         params={"engine": "greedy", "time-limit": 20})
                    if response.status_code == 200:
                        with lock:
                            plans.append((name, int(response.headers["X-Cluster-Version"]),
                                          response.json()))
                with lock:
                    statuses.add(response.status_code)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 120)
        assert not thread.is_alive(), "a client thread did not finish"
    return statuses


def test_every_plan_under_concurrent_updates_is_valid_for_the_version_it_names() -> None:
    """Random concurrent PUT/DELETE/PATCH/plan on 2 names, 2 workers (plans take 0.05 s,
    so deltas queue behind plans as under load): every plan is checked by the validator
    against the exact scenario of the version its header names."""
    config = ServiceConfig(warmup=False, workers=2, queue=64, max_clusters=64,
                           solve="tests.solver.service.faults:sleepy_greedy")
    history = _History()
    plans: list[tuple[str, int, dict[str, Any]]] = []
    with running_server(config) as (url, _):
        for seed in range(3):
            names = [f"v{seed}-{k}" for k in range(2)]
            statuses = _race(url, names, seed, 40, 60.0, history, plans)
            # 409: a delta that expected a version a PUT replaced; 503: admission refused
            assert statuses <= {200, 201, 204, 404, 409, 503}, sorted(statuses)
    assert len(plans) >= 20  # the run planned (not only refused)
    for name, version, placement in plans:
        scenario = history.scenarios.get((name, version))
        assert scenario is not None, (name, version)  # a version no reply named
        assert _violations(scenario, placement) == [], (name, version)
