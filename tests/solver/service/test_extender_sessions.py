"""Volcano sessions against the extender (benchmarks/volcano_session.py re-creates Volcano's
allocate action): over several sessions with evictions and node faults, on generated
clusters of every family, Volcano's bindings equal npu-place's plan for the jobs the
extender steers, and evicted ranks return to their origin nodes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.generators import GenParams, generate_case
from benchmarks.volcano_session import (
    AscendStandIn,
    SessionReport,
    VolcanoCluster,
    cluster_from_scenario,
    run_session,
)
from solver.service.app import ServiceConfig
from solver.service.extender import SELECTING_FAMILIES, ExtenderConfig, ExtenderCore
from tests.solver.service.conftest import running_server

#: deterministic CP-SAT (1 worker, fixed seed): the same plan under any load
EXTENDER = dict(engine="auto", deterministic_time=0.3, http_timeout=30.0, seed=1)


@contextmanager
def extender_server(cluster: VolcanoCluster, folder: Path, **settings: Any
                    ) -> Iterator[tuple[str, ExtenderCore]]:
    """A service with the extender on loopback; the device state from a dump of ``cluster``."""
    cluster.write_device_dump(folder)
    config = ExtenderConfig(configmaps=(str(folder),), **{**EXTENDER, **settings})
    with running_server(ServiceConfig(warmup=False, extender=config)) as (url, service):
        core = service.extender
        assert core is not None
        core.clock = lambda: cluster.now
        yield f"{url}/volcano", core


def check_steered(core: ExtenderCore, report: SessionReport) -> list[str]:
    """Steered jobs bound exactly as planned, with a super-pod rank from the plugin's
    selection for selecting families.  Returns the steered jobs."""
    session = core.session
    assert session is not None and session.error is None, session and session.error
    steered = [job for job, yes in session.decided.items() if yes]
    for job in steered:
        plan = session.jobs[job]
        assert job in report.bindings, f"steered job {job} was not bound"
        assert report.bindings[job] == plan.ranks, job
        if plan.family in SELECTING_FAMILIES and plan.family.value != "multilevel":
            assert all(report.super_pod_ranks[job].values()), (job, report.super_pod_ranks)
    return steered


def returns(origins: dict[str, dict[int, str]], report: SessionReport, jobs: list[str],
            lost: str | None = None) -> tuple[int, int]:
    """Ranks of ``jobs`` bound on their origin node, and ranks that were not (origins on
    ``lost`` do not count: the node is gone)."""
    back = missed = 0
    for job in jobs:
        for rank, node in origins.get(job, {}).items():
            if node == lost:
                assert report.bindings[job][rank] != lost
            elif report.bindings[job][rank] == node:
                back += 1
            else:
                missed += 1
    return back, missed


@pytest.mark.parametrize("family", ["ordinary", "a3", "850", "950", "multilevel"])
def test_sessions_bind_the_plan_and_origins_return(family: str, tmp_path: Path) -> None:
    case = generate_case(GenParams(family, nodes=24, seed=3, jobs=3, occupancy=0.3,
                                   unhealthy=0.0, subhealthy=0.0))
    cluster = cluster_from_scenario(case.scenario, family)
    plugin = AscendStandIn()
    with extender_server(cluster, tmp_path) as (url, core), httpx.Client(timeout=60) as client:
        first = run_session(client, url, cluster, plugin, seed=1)
        assert first.open_status == 200
        check_steered(core, first)
        assert first.bindings, "nothing was bound in the first session"
        # session 2: every job evicted (preemption): the plan brings every rank back
        origins = cluster.bound()
        for job in origins:
            cluster.evict(job)
        cluster.now += 120
        second = run_session(client, url, cluster, plugin, seed=2)
        steered = check_steered(core, second)
        assert sorted(steered) == sorted(origins), "an evicted job was not steered"
        assert returns(origins, second, steered) == (sum(map(len, origins.values())), 0)
        # session 3: a node of the first job fails, that job is evicted: steered jobs bind
        # their plan; a selecting family's job whose plan differs from the plugin's own
        # selection is left to the plugin (stock behaviour, a super-pod rank of its own)
        origins = cluster.bound()
        job = sorted(origins)[0]
        lost = origins[job][0]
        cluster.fault(lost)
        cluster.evict(job)
        cluster.now += 120
        third = run_session(client, url, cluster, plugin, seed=3)
        steered = check_steered(core, third)
        session = core.session
        assert session is not None
        plan = session.jobs[job]
        if plan.family not in SELECTING_FAMILIES:
            assert steered == [job]
        elif steered != [job]:
            assert "differs" in plan.reason
            assert all(third.super_pod_ranks.get(job, {0: "x"}).values())
        back, missed = returns(origins, third, steered, lost)
        assert missed == 0  # every rank whose origin node is alive came back
        assert back == sum(1 for j in steered for n in origins[j].values() if n != lost)
        assert [h["session"] for h in core.history] == [1, 2, 3]


def test_a_gang_that_does_not_fit_is_discarded_and_rolled_back(tmp_path: Path) -> None:
    case = generate_case(GenParams("ordinary", nodes=8, seed=2, jobs=1, occupancy=0.0,
                                   unhealthy=0.0, subhealthy=0.0))
    cluster = cluster_from_scenario(case.scenario, "ordinary")
    # a job of more whole-node tasks than there are nodes: the plan leaves it out (the
    # extender abstains), Volcano allocates task after task, then discards the gang
    cluster.add_job("train", "too-big", len(cluster.nodes) + 2, 8, policy="chip8-node8",
                    priority_class="training", priority=1000)
    plugin = AscendStandIn()
    with extender_server(cluster, tmp_path) as (url, core), httpx.Client(timeout=60) as client:
        report = run_session(client, url, cluster, plugin, seed=1)
        session = core.session
        assert session is not None
        job = next(j for j in report.discarded if "too-big" in j)
        assert job not in session.jobs and not session.decided.get(job, False)
        owner = session.owners[job]
        allocated = report.calls["deallocateFunc"]
        assert allocated > 0 and session.counts["discarded"] == allocated
        # every record of the discarded gang was rolled back
        assert all(core.lifecycle.state(owner, rank) is None for rank in range(allocated))
        assert job not in cluster.bound()


def test_early_stopped_predicates_lose_the_planned_node_unless_filtered(
        tmp_path: Path) -> None:
    """Volcano stops the predicate phase once enough nodes fit (``percentageNodesToFind``
    below 100); the job-level predicate's refusals do not count as fitting nodes, so with
    it every planned node is still found; without it a task whose planned node was not
    among the first nodes found is left to the other plugins."""
    case = generate_case(GenParams("ordinary", nodes=24, seed=3, jobs=3, occupancy=0.3,
                                   unhealthy=0.0, subhealthy=0.0))
    early = dict(percentage_nodes_to_find=10, min_nodes_to_find=3)
    for predicate in (True, False):
        cluster = cluster_from_scenario(case.scenario, "ordinary")
        folder = tmp_path / str(predicate)
        with extender_server(cluster, folder) as (url, core), \
                httpx.Client(timeout=60) as client:
            report = run_session(client, url, cluster, AscendStandIn(), seed=1,
                                 predicate=predicate, **early)  # type: ignore[arg-type]
            session = core.session
            assert session is not None
            if predicate:
                assert check_steered(core, report)
                assert "planned-node-not-offered" not in session.counts
                continue
            steered = [job for job, yes in session.decided.items() if yes]
            off_plan = sum(1 for job in steered for rank, node in report.bindings.get(
                job, {}).items() if session.jobs[job].ranks[rank] != node)
            missing = session.counts.get("planned-node-not-offered", 0)
            assert missing > 0  # the early stop did hide planned nodes
            assert off_plan <= missing  # only a task without its planned node went astray
