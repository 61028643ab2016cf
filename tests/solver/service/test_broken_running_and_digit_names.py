"""At the service: a partly running job whose running ranks break
their rack window, and node names with digits other than ASCII, answer 200 (stateless
and stored clusters, PUT, PATCH and plan) where they answered 500."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from models.check import check
from models.compiled import compile_scenario
from models.io import scenario_from_data
from models.placement import PlacementFile
from solver.service.app import ServiceConfig
from solver.service.client import PlanClient
from tests.models.builders import job, node, pod_node, scenario
from tests.solver.service.conftest import running_server


@pytest.fixture(scope="module")
def client() -> Iterator[PlanClient]:
    with running_server(ServiceConfig(warmup=False, workers=1, queue=4)) as (url, _), \
            PlanClient(url, timeout=60.0) as c:
        yield c


def _broken_window() -> dict[str, Any]:
    """Ranks 0 and 1 (rack window 0) run in racks 0 and 1."""
    nodes = [pod_node(f"r{rack}-n{i}", 0, rack, free=0 if i == 0 else 8)
             for rack in (0, 1) for i in range(3)]
    train = job("train", "chip8-node8-ra64-sp", tasks=4, sp_block=32, ra_block=16,
                pod_rescheduling=True, running_ranks={"0": "r0-n0", "1": "r1-n0"})
    return scenario(nodes, [train, job("other")], {"super-pod-size": 16, "reserve-nodes": 0})


def _answers(data: dict[str, Any], placement: PlacementFile) -> dict[str, Any]:
    assert check(compile_scenario(scenario_from_data(data, "<test>")), placement) == []
    return {j.name: j for j in placement.jobs}


@pytest.mark.parametrize("engine", ["greedy", "cpsat", "auto"])
def test_broken_running_window_stateless_and_stored(client: PlanClient, engine: str) -> None:
    data = _broken_window()
    for placement in (client.plan(data, engine=engine, time_limit=20, seed=0),
                      _stored(client, f"broken-{engine}", data, engine)):
        jobs = _answers(data, placement)
        assert not jobs["train"].placed
        assert "[rack-window]" in (jobs["train"].reason or "")
        assert jobs["other"].placed


def _stored(client: PlanClient, name: str, data: dict[str, Any],
            engine: str) -> PlacementFile:
    client.put_cluster(name, data)
    return client.plan_cluster(name, engine=engine, time_limit=20, seed=0)


@pytest.mark.parametrize("name", ["x1³", "n1²", "n١٢"])
def test_node_names_with_other_digits(client: PlanClient, name: str) -> None:
    data = scenario([node(name), node("n1"), node("n10")], [job("a", tasks=3)])
    assert all(j.placed for j in client.plan(data, engine="greedy").jobs)
    client.put_cluster("digits", data)
    client.patch_cluster("digits", {"nodes-added": [node(f"{name}0")]})
    assert len(client.cluster_scenario("digits").nodes) == 4
    placement = client.plan_cluster("digits", engine="greedy", time_limit=20)
    assert all(j.placed for j in placement.jobs)
    client.delete_cluster("digits")
